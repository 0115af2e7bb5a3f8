"""Predictions of a model exported by ``dgl-graphtx export``, with PyTorch (or ONNX Runtime), RDKit
and NumPy alone: no DGL, no dgl_graphtx.

``dgl-graphtx export`` writes this file beside the exported model as ``graphtx_portable.py``. It
turns SMILES into the plain tensors the exported program reads (the features of the library's
own featurizer: OGB atom and bond categories with CIP chirality, canonical atom order, random-walk
encodings, the relation graph's pairs with hop counts and bond classes; tests check that they are
identical) and runs the program::

    import graphtx_portable
    model = graphtx_portable.load("model.pt2")            # or "model.onnx" (needs onnxruntime)
    found = model.predict(["CCO", "c1ccccc1O", "C1CC"])
    found["logS"]      # array([-0.41, -0.87, nan]): one column per target (class probabilities for multiclass)
    found["error"]     # [None, None, "RDKit could not read this SMILES"]

The program's inputs, in the order of :data:`INPUTS`, describe a batch of ``B`` molecules with ``N``
atoms (nodes: heavy atoms, and hydrogens for a model trained with them), ``E`` directed bond edges
(two per bond) and ``P`` attention pairs: ``atom_features [N, 9]``, ``random_walk [N, k]`` (float32),
``bond_source [E]``, ``bond_target [E]``, ``bond_features [E, 3]``, ``pair_key [P]``,
``pair_query [P]``, ``pair_hops [P]`` (-1 between fragments), ``pair_bond_class [P]``,
``kernel_counts [B, F]`` (float32: each molecule's count fingerprints, side by side, for a model
with a fingerprint kernel, ``F = 0`` without one), ``atom_molecule [N]``, ``molecule_atoms [B]``
and ``block_slots [n]`` (``0 .. n - 1``, ``n`` the atoms of the largest molecule: the size of the
attention blocks) (all int64 unless said); its output is ``[B, outputs]``, the predictions in
target units (probabilities for classification).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from rdkit import Chem, rdBase

#: Format of the exported files this module writes (``format`` in their metadata): 2 adds the
#: fingerprint kernel's Morgan counts to the inputs, 3 names the kernel's count fingerprints.
FORMAT = 3
#: Formats this module reads (2: the kernel's Morgan ``[radius, bins]``).
READS = (2, 3)
#: Name of the metadata: an extra file of a ``.pt2`` archive, a metadata entry of an ONNX model.
METADATA = "dgl_graphtx.json"
#: Most attention-block slots (molecules x the largest one's atoms squared) in one pass by default:
#: 256 molecules of 64 atoms.
BLOCK_BUDGET = 256 * 64 * 64
#: The exported program's inputs, in order.
INPUTS = ("atom_features", "random_walk", "bond_source", "bond_target", "bond_features", "pair_key", "pair_query",
          "pair_hops", "pair_bond_class", "kernel_counts", "atom_molecule", "molecule_atoms", "block_slots")

# OGB's categories (ogb.utils.features.allowable_features); a value outside a list takes its last slot.
ATOMIC_NUMBERS = list(range(1, 119))
DEGREES = list(range(11))
FORMAL_CHARGES = list(range(-5, 6))
HYDROGENS = list(range(9))
RADICALS = list(range(5))
HYBRIDIZATIONS = ["SP", "SP2", "SP3", "SP3D", "SP3D2"]
BOND_TYPES = ["SINGLE", "DOUBLE", "TRIPLE", "AROMATIC"]
BOND_STEREO = ["STEREONONE", "STEREOZ", "STEREOE", "STEREOCIS", "STEREOTRANS", "STEREOANY"]
#: Category counts of the bond features, the radices of a pair's bond class.
BOND_RADICES = (5, 6, 2)
NO_BOND, SELF_PAIR = 60, 61  # bond classes of pairs that are not bonds (after the 5 * 6 * 2 bond types)


def _slot(values: Sequence[Any], value: Any) -> int:
    """Index of ``value`` in ``values``; the extra slot after them when it is not there."""
    return values.index(value) if value in values else len(values)


def atom_row(atom: Chem.Atom) -> List[int]:
    """OGB's 9 atom categories, with the atom's CIP label (1 R, 2 S, 3 a stereo tag without one,
    0 none) as the chirality."""
    chirality = {"R": 1, "S": 2}.get(atom.GetProp("_CIPCode"), 3) if atom.HasProp("_CIPCode") else (
        3 if atom.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED else 0)
    return [_slot(ATOMIC_NUMBERS, atom.GetAtomicNum()), chirality, _slot(DEGREES, atom.GetTotalDegree()),
            _slot(FORMAL_CHARGES, atom.GetFormalCharge()), _slot(HYDROGENS, atom.GetTotalNumHs()),
            _slot(RADICALS, atom.GetNumRadicalElectrons()), _slot(HYBRIDIZATIONS, str(atom.GetHybridization())),
            int(atom.GetIsAromatic()), int(atom.IsInRing())]


def bond_row(bond: Chem.Bond) -> List[int]:
    """OGB's 3 bond categories: type, stereo, conjugated."""
    return [_slot(BOND_TYPES, str(bond.GetBondType())), BOND_STEREO.index(str(bond.GetStereo())), int(bond.GetIsConjugated())]


def parse(smiles: str) -> Chem.Mol:
    """The sanitized molecule of ``smiles``; ``ValueError`` saying why not."""
    if not isinstance(smiles, str) or not smiles.strip():
        raise ValueError("empty SMILES" if isinstance(smiles, str) else f"expected a SMILES string, got {smiles!r}")
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles.strip())
    if mol is None or mol.GetNumAtoms() == 0:
        raise ValueError("RDKit could not read this SMILES" if mol is None else "molecule has no atoms")
    return mol


def canonical(mol: Chem.Mol) -> Chem.Mol:
    """``mol`` with its atoms in canonical order: rebuilt from its canonical SMILES, so that every
    writing of a molecule gives the same atoms, bonds and stereo labels."""
    with rdBase.BlockLogs():
        text = Chem.MolToSmiles(mol)
        written = list(mol.GetPropsAsDict(True, True)["_smilesAtomOutputOrder"])
        params = Chem.SmilesParserParams()
        params.removeHs = False  # type: ignore[assignment]  # RDKit's stubs type its parameter properties as the class
        rebuilt = Chem.MolFromSmiles(text, params)
    if rebuilt is not None and rebuilt.GetNumAtoms() == mol.GetNumAtoms() == len(written):
        return rebuilt
    ranks = list(Chem.CanonicalRankAtoms(mol, breakTies=True, includeChirality=True))
    return Chem.RenumberAtoms(mol, sorted(range(mol.GetNumAtoms()), key=ranks.__getitem__))


def random_walk(num_atoms: int, source: np.ndarray, target: np.ndarray, steps: int) -> np.ndarray:
    """``[n, steps]`` float32: the probability that a random walk over the bonds is back at its start
    after 1 .. ``steps`` steps."""
    adjacency = np.zeros((num_atoms, num_atoms))
    adjacency[source, target] = 1.0
    walk = adjacency / (adjacency.sum(1, keepdims=True) + 1e-30)
    power, out = walk, [np.diagonal(walk)]
    for _ in range(steps - 1):
        power = power @ walk
        out.append(np.diagonal(power))
    return np.stack(out, axis=-1).astype(np.float32) if steps else np.zeros((num_atoms, 0), np.float32)


class Settings(NamedTuple):
    """The featurization an exported model was trained with (its metadata's ``featurizer``)."""

    explicit_hydrogens: bool
    random_walk_steps: int
    hops: Optional[int]  # pairs at most this many bonds apart; ``None``: every pair
    #: The fingerprint kernel's count fingerprints, if the model has one: each ``(name, *options)``,
    #: ``("morgan_counts", radius, bins)``, ``("atom_pair_counts", bins)`` or ``("avalon_counts", bins)``.
    kernel: Optional[Tuple[Tuple[Any, ...], ...]] = None


class Molecule(NamedTuple):
    """One molecule's arrays (local atom indices); :func:`batch` stacks them."""

    atom_features: np.ndarray
    random_walk: np.ndarray
    bond_source: np.ndarray
    bond_target: np.ndarray
    bond_features: np.ndarray
    pair_key: np.ndarray
    pair_query: np.ndarray
    pair_hops: np.ndarray
    pair_bond_class: np.ndarray
    kernel_counts: np.ndarray


def featurize(smiles: str, settings: Settings) -> Molecule:
    """The arrays of one molecule; ``ValueError`` when RDKit cannot read it."""
    mol = canonical(parse(smiles))
    counts = kernel_counts(mol, settings.kernel)
    if settings.explicit_hydrogens:
        mol = Chem.AddHs(mol)
    n = mol.GetNumAtoms()
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx(), bond_row(b)) for b in mol.GetBonds()]
    source = np.array([a for u, v, _ in bonds for a in (u, v)], dtype=np.int64)
    target = np.array([a for u, v, _ in bonds for a in (v, u)], dtype=np.int64)
    features = np.array([row for _, _, row in bonds for _ in (0, 1)], dtype=np.int64).reshape(-1, 3)
    hops = Chem.GetDistanceMatrix(mol).astype(np.int64)
    hops[hops > n] = -1  # RDKit's distance between fragments is a large number
    classes = np.full((n, n), NO_BOND, dtype=np.int64)
    np.fill_diagonal(classes, SELF_PAIR)
    if len(source):
        classes[target, source] = features[:, 0] + BOND_RADICES[0] * (features[:, 1] + BOND_RADICES[1] * features[:, 2])
    kept = np.ones((n, n), bool) if settings.hops is None else (hops >= 0) & (hops <= settings.hops)
    query, key = np.nonzero(kept)  # by query, then key
    atoms = np.array([atom_row(a) for a in mol.GetAtoms()], dtype=np.int64).reshape(n, 9)
    return Molecule(atoms, random_walk(n, source, target, settings.random_walk_steps), source, target, features,
                    key, query, hops[query, key], classes[query, key], counts)


def kernel_counts(mol: Chem.Mol, kernel: Optional[Tuple[Tuple[Any, ...], ...]]) -> np.ndarray:
    """``[1, bins]`` float32: the count fingerprints (of the heavy atoms, at most 255 each) the
    model's fingerprint kernel reads, side by side (:attr:`Settings.kernel`), or ``[1, 0]`` for a
    model without one."""
    if kernel is None:
        return np.zeros((1, 0), np.float32)
    from rdkit.Avalon import pyAvalonTools
    from rdkit.Chem import rdFingerprintGenerator

    heavy, parts = Chem.RemoveHs(mol), []
    for name, *options in kernel:
        if name == "morgan_counts":
            counts = rdFingerprintGenerator.GetMorganGenerator(radius=options[0], fpSize=options[1]).GetCountFingerprintAsNumPy(heavy)
        elif name == "atom_pair_counts":
            counts = rdFingerprintGenerator.GetAtomPairGenerator(fpSize=options[0]).GetCountFingerprintAsNumPy(heavy)
        elif name == "avalon_counts":
            counts = np.zeros(options[0])
            for bit, count in pyAvalonTools.GetAvalonCountFP(heavy, nBits=options[0]).GetNonzeroElements().items():
                counts[bit] = count
        else:
            raise ValueError(f"unknown count fingerprint {name!r} in the exported file's kernel; export it with this library version")
        parts.append(np.minimum(counts, 255).astype(np.float32))
    return np.concatenate(parts)[None]


def batch(molecules: Sequence[Molecule]) -> Tuple[torch.Tensor, ...]:
    """The program's inputs (:data:`INPUTS`) for a batch of molecules."""
    sizes = np.array([len(m.atom_features) for m in molecules], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def joined(field: str, shift: bool = False) -> torch.Tensor:
        parts = [getattr(m, field) + (offset if shift else 0) for m, offset in zip(molecules, offsets)]
        return torch.from_numpy(np.concatenate(parts))

    shifted = {"bond_source", "bond_target", "pair_key", "pair_query"}
    columns = [joined(name, name in shifted) for name in Molecule._fields]
    return (*columns, torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes)), torch.from_numpy(sizes), torch.arange(int(sizes.max())))


def _checked(text: Optional[str], path: Path) -> Dict[str, Any]:
    """The metadata ``text`` of the exported file ``path``, checked to be of a format in :data:`READS`."""
    if text is None:
        raise ValueError(f"{path} carries no {METADATA}: it was not written by 'dgl-graphtx export'")
    meta = json.loads(text)
    if meta.get("format") not in READS:
        raise ValueError(f"{path} has export format {meta.get('format')!r}; this loader reads formats {', '.join(map(str, READS))}")
    return meta


class PortableModel:
    """An exported model and its featurization: :meth:`predict` SMILES in batches.

    Args:
        path: a ``.pt2`` file (``torch.export``) or a ``.onnx`` file (run with ONNX Runtime).
    """

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        if self.path.suffix == ".onnx":
            import onnxruntime  # only ONNX files need it

            options = onnxruntime.SessionOptions()
            # one thread: ONNX Runtime's parallel ScatterND with reduction='add' (the sums over each
            # atom's pairs) races on repeated indices and gives wrong sums now and then
            # (microsoft/onnxruntime issues 18048, 23396)
            options.intra_op_num_threads = 1
            session = onnxruntime.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
            self.meta = _checked(session.get_modelmeta().custom_metadata_map.get(METADATA), self.path)
            self._run = lambda inputs: torch.from_numpy(session.run(None, {n: t.numpy() for n, t in zip(INPUTS, inputs)})[0])
        else:
            extra = {METADATA: ""}
            program = torch.export.load(str(self.path), extra_files=extra).module()
            self.meta = _checked(extra[METADATA] or None, self.path)
            self._run = lambda inputs: program(*inputs)
        featurizer = self.meta["featurizer"]
        kernel = featurizer.get("kernel")
        if kernel and self.meta["format"] == 2:  # the Morgan counts' [radius, bins]
            kernel = [["morgan_counts", *kernel]]
        self.settings = Settings(featurizer["explicit_hydrogens"], featurizer["random_walk_steps"], featurizer["hops"],
                                 tuple(tuple(part) for part in kernel) if kernel else None)
        #: The output columns: one per target, or per class of each target (multiclass).
        self.columns: List[str] = self.meta["columns"]

    def run(self, inputs: Tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The program's output ``[B, len(columns)]`` for inputs from :func:`batch`."""
        with torch.no_grad():
            return self._run(inputs)

    def predict(self, smiles: Union[str, Sequence[str]], batch_size: int = 256, block_budget: int = BLOCK_BUDGET) -> Dict[str, Any]:
        """One value per SMILES (a list, or one string) in each of :attr:`columns` (NaN where it could not be read), and
        ``error``: ``None``, or why the molecule could not be read. Molecules of like size share a
        pass (taken in order of atoms), at most ``batch_size`` of them and ``block_budget``
        attention-block slots (molecules times the largest one's atoms squared; a molecule above it
        alone)."""
        if isinstance(smiles, str):  # one SMILES, not its characters
            smiles = [smiles]
        values = np.full((len(smiles), len(self.columns)), np.nan)
        errors: List[Optional[str]] = [None] * len(smiles)
        done: List[Tuple[int, Molecule]] = []
        for row, text in enumerate(smiles):
            try:
                done.append((row, featurize(text, self.settings)))
            except ValueError as err:
                errors[row] = str(err)
        done.sort(key=lambda item: len(item[1].atom_features))  # little padding in the blocks; rows keep their places
        for part in _passes(done, batch_size, block_budget):
            values[[row for row, _ in part]] = self.run(batch([m for _, m in part])).double().numpy()
        return {**{name: values[:, i] for i, name in enumerate(self.columns)}, "error": errors}


def _passes(done: List[Tuple[int, Molecule]], batch_size: int, block_budget: int) -> List[List[Tuple[int, Molecule]]]:
    """``done``, in its order, cut into batches within ``batch_size`` molecules and ``block_budget`` slots."""
    out: List[List[Tuple[int, Molecule]]] = []
    largest = 0
    for item in done:
        atoms = len(item[1].atom_features)
        grown = max(largest, atoms)
        if out and len(out[-1]) < batch_size and (len(out[-1]) + 1) * grown ** 2 <= block_budget:
            out[-1].append(item)
            largest = grown
        else:
            out.append([item])
            largest = atoms
    return out


def load(path: Union[str, Path]) -> PortableModel:
    """The exported model at ``path`` (``.pt2`` or ``.onnx``)."""
    return PortableModel(path)
