"""SMILES or RDKit molecule -> molecular DGLGraph (via dgllife) and its relation graph."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch
from rdkit import Chem, rdBase
import dgl
from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer

from ..errors import ConfigError, InvalidMoleculeError
from ..logs import progress as progress_bar
from ..relation_graph import BondVocabulary, RelationConfig, build_relation_graph
from .components import combine_row
from .config import FeaturizerConfig, SizeLimits
from .conformer import has_3d_conformer, molecule_coordinates
from .ogb_features import OGB_ATOM_FEATURE_DIMS, OGB_BOND_FEATURE_DIMS, OGBAtomFeaturizer, OGBBondFeaturizer, ogb_feature_value
from .walks import random_walk_landing



@dataclass(frozen=True)
class RejectedMolecule:
    """Stands in for a molecule that a reader could not build; featurizing it reports ``reason``
    for its row (instead of a generic "missing molecule").

    Example:
        >>> to_mol(RejectedMolecule("no bonds perceived"))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.InvalidMoleculeError: no bonds perceived
    """

    reason: str


#: One molecule as featurization takes it: a SMILES string, an RDKit molecule, a rejected one, or
#: ``None`` (a file record RDKit could not read); :func:`to_mol` turns the last two into an error.
#: A tuple of them is a row of several molecules (solute and solvent, ...; see
#: :mod:`~dgl_graphtx.featurize.components`), featurized molecule by molecule.
MoleculeLike = Union[str, Chem.Mol, RejectedMolecule, None, Tuple[Any, ...]]

#: Bond classes of molecular graphs: OGB's categorical bond features in mixed radix.
MOLECULE_BOND_VOCAB = BondVocabulary(OGB_BOND_FEATURE_DIMS)

#: Node data holding the extra features (see :mod:`dgl_graphtx.datasets.extra_features`), which
#: models read: each molecule's (the same row on all of its atoms) and each atom's own.
EXTRA_MOLECULE_FEATURES = "mol_features"
EXTRA_ATOM_FEATURES = "atom_extra"
#: Node data holding each molecule's count fingerprint for the fingerprint kernel (uint8, unscaled;
#: the same row on all of its atoms; see :mod:`dgl_graphtx.models.kernel`).
KERNEL_FINGERPRINTS = "kernel_fp"

#: Graph data holding atom- and bond-level labels (see :mod:`dgl_graphtx.datasets.level_targets`),
#: which training reads: atom labels on the nodes, bond labels on both edges of each bond (NaN
#: where missing), and the molecular value each constrained atom target sums to, on every atom.
ATOM_TARGETS = "atom_targets"
BOND_TARGETS = "bond_targets"
ATOM_TOTALS = "atom_totals"
#: Graph data set with those labels, for tables of atom- and bond-level predictions: each atom's
#: atomic number, and each edge's bond index in the input (-1 for bonds to hydrogens the featurizer added).
ATOMIC_NUMBER = "atomic_number"
INPUT_BOND = "input_bond"


def parse_smiles(smiles: str) -> Chem.Mol:
    """Parse and sanitize a SMILES string, raising :class:`InvalidMoleculeError` with RDKit's reason.

    Example:
        >>> parse_smiles("c1ccccc1O").GetNumAtoms()
        7
        >>> parse_smiles("CN(C)(C)(C)C")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.InvalidMoleculeError: Explicit valence for atom # 1 N, 5, is greater than permitted
    """
    if not isinstance(smiles, str):
        raise InvalidMoleculeError(f"expected a SMILES string, got {type(smiles).__name__} {smiles!r}")
    text = smiles.strip()
    if not text:
        raise InvalidMoleculeError("empty SMILES")
    with rdBase.BlockLogs():
        # RDKit's standard parse: sanitized, explicit [H] atoms removed (hydrogens are nodes only
        # with explicit_hydrogens=True), stereochemistry perceived (E/Z bonds, chiral centres)
        mol = Chem.MolFromSmiles(text)
        if mol is None:
            raise InvalidMoleculeError(_parse_failure(text))
    if mol.GetNumAtoms() == 0:
        raise InvalidMoleculeError("molecule has no atoms")
    return mol


def _parse_failure(text: str) -> str:
    """Why RDKit's standard parse of ``text`` failed, found step by step (logs blocked by the caller)."""
    mol = Chem.MolFromSmiles(text, sanitize=False)
    if mol is None:
        return "SMILES syntax error (RDKit could not parse it)"
    problems = Chem.DetectChemistryProblems(mol)
    if problems:
        return problems[0].Message()
    try:
        Chem.SanitizeMol(mol)
    except Exception as err:  # RDKit raises several unrelated exception types here
        return f"RDKit sanitization failed: {err}"
    return "RDKit could not parse this SMILES (hydrogen removal or stereo perception failed)"


def heavy_atoms_written(smiles: str) -> int:
    """The atoms other than hydrogen of ``smiles`` as written, counted without RDKit's full parse
    (0 where it cannot be read): no molecule parsed from it has fewer nodes, so a size budget can
    be checked first (RDKit 2023's parse of a 2,000-atom chain takes 13 s, the count 1 ms).

    Example:
        >>> heavy_atoms_written("[H]OC([H])([H])[H]"), heavy_atoms_written("C" * 5000)
        (2, 5000)
    """
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles.strip(), sanitize=False)
    return 0 if mol is None else sum(atom.GetAtomicNum() != 1 for atom in mol.GetAtoms())


def to_mol(molecule: MoleculeLike) -> Chem.Mol:
    """Return an RDKit molecule from a SMILES string or a molecule (checked to have atoms); for a
    row of several molecules, all of them in one molecule (its fragments in the row's order).

    Example:
        >>> Chem.MolToSmiles(to_mol(("CCO", "O")))
        'CCO.O'
    """
    if isinstance(molecule, tuple):
        parts = [_row_molecule(index, part, to_mol) for index, part in enumerate(molecule)]
        combined = functools.reduce(Chem.CombineMols, parts)
        Chem.SanitizeMol(combined)  # ring information and the rest, as each part had them
        return combined
    if isinstance(molecule, RejectedMolecule):
        raise InvalidMoleculeError(molecule.reason)
    if isinstance(molecule, Chem.Mol):
        if molecule.GetNumAtoms() == 0:
            raise InvalidMoleculeError("molecule has no atoms")
        return molecule
    if molecule is None:
        raise InvalidMoleculeError("missing molecule (None); RDKit may have failed to read this record")
    return parse_smiles(molecule)


def _row_molecule(index: int, molecule: MoleculeLike, read: Callable[[MoleculeLike], Any]) -> Any:
    """``read(molecule)`` for molecule ``index`` (0-based) of a row; its error names it in the row."""
    try:
        return read(molecule)
    except InvalidMoleculeError as err:
        raise InvalidMoleculeError(f"molecule {index + 1} of the row: {err}") from None


def to_heavy_atom_mol(molecule: MoleculeLike) -> Chem.Mol:
    """:func:`to_mol` with only the heavy atoms: hydrogen atoms the molecule carries (SDF files,
    ``Chem.AddHs``) become implicit, so that a SMILES and an SD record of the same molecule give the
    same descriptors and fingerprints.

    Example:
        >>> to_heavy_atom_mol(Chem.AddHs(Chem.MolFromSmiles("CO"))).GetNumAtoms(), to_heavy_atom_mol("CO").GetNumAtoms()
        (2, 2)
    """
    mol = to_mol(molecule)
    return Chem.RemoveHs(mol) if any(atom.GetAtomicNum() == 1 for atom in mol.GetAtoms()) else mol


def prepare_input(molecule: MoleculeLike, config: FeaturizerConfig) -> MoleculeLike:
    """``molecule`` as featurization takes it, the same whatever the route (a SMILES string, an
    RDKit molecule built or read in Python, a record of a file): RDKit molecules lose the hydrogen
    atoms they carry (``Chem.RemoveHs``, as RDKit's SDF reader does on reading) unless
    ``config.explicit_hydrogens``; SMILES strings are left as they are (parsing removes ``[H]``
    atoms). A molecule whose hydrogens cannot be removed becomes a :class:`RejectedMolecule`
    saying why. Readers, :class:`MoleculeFeaturizer`, prediction and extra features all call this,
    so a new hydrogen setting of :class:`FeaturizerConfig` belongs here.

    Example:
        >>> with_h = Chem.AddHs(Chem.MolFromSmiles("CO"))
        >>> kept = FeaturizerConfig(explicit_hydrogens=True)
        >>> prepare_input(with_h, FeaturizerConfig()).GetNumAtoms(), prepare_input(with_h, kept).GetNumAtoms()
        (2, 6)
    """
    if isinstance(molecule, tuple):
        return tuple(prepare_input(part, config) for part in molecule)
    if config.explicit_hydrogens or not isinstance(molecule, Chem.Mol):
        return molecule
    if not any(atom.GetAtomicNum() == 1 for atom in molecule.GetAtoms()):
        return molecule
    try:
        with rdBase.BlockLogs():
            return Chem.RemoveHs(molecule)
    except Exception as err:  # RDKit raises several unrelated exception types here
        return RejectedMolecule(f"RDKit could not remove the molecule's hydrogen atoms: {err}")


def canonical_atom_order(mol: Chem.Mol) -> Tuple[Chem.Mol, List[int]]:
    """The molecule with its atoms (and bonds) in canonical order, and ``input_atom``: for each
    new atom, its index in ``mol``.

    The molecule is rebuilt from its canonical isomeric SMILES, so every writing of the same
    molecule gives the identical RDKit molecule: the same atom order, bond order and local
    chirality tags (which RDKit defines relative to bond order), hence the same features and the
    same seeded ETKDG coordinates. A 3-D conformer of ``mol`` is carried over.

    Example:
        >>> a, order_a = canonical_atom_order(Chem.MolFromSmiles("OC[C@H](N)C"))
        >>> b, order_b = canonical_atom_order(Chem.MolFromSmiles("C[C@H](CO)N"))  # same molecule
        >>> Chem.MolToMolBlock(a) == Chem.MolToMolBlock(b), order_a, order_b
        (True, [4, 2, 3, 1, 0], [0, 1, 4, 2, 3])
    """
    with rdBase.BlockLogs():
        smiles = Chem.MolToSmiles(mol)
        order = [int(i) for i in mol.GetPropsAsDict(True, True)["_smilesAtomOutputOrder"]]
        params = Chem.SmilesParserParams()
        params.removeHs = False  # type: ignore[assignment]  # RDKit's stubs type its parameter properties as the class
        canonical = Chem.MolFromSmiles(smiles, params)
    if canonical is None or canonical.GetNumAtoms() != mol.GetNumAtoms() or len(order) != mol.GetNumAtoms():
        # RDKit could not read back its own SMILES (rare): fall back to renumbering by canonical ranks
        ranks = list(Chem.CanonicalRankAtoms(mol, breakTies=True, includeChirality=True))
        order = sorted(range(mol.GetNumAtoms()), key=ranks.__getitem__)
        canonical = Chem.RenumberAtoms(mol, order)
        return canonical, order
    if mol.GetNumConformers():
        positions = mol.GetConformer().GetPositions()[order]
        conformer = Chem.Conformer(canonical.GetNumAtoms())
        for atom, xyz in enumerate(positions):
            conformer.SetAtomPosition(atom, xyz.tolist())
        conformer.Set3D(mol.GetConformer().Is3D())
        canonical.AddConformer(conformer, assignId=True)
    return canonical, order


def bond_graph(mol: Chem.Mol) -> dgl.DGLGraph:
    """The molecule's atoms as nodes and its bonds as edges in both directions (int64 ids), in
    dgllife's order (``mol_to_bigraph``): bond ``i`` from atom ``u`` to ``v`` is edges ``2i``
    (``u -> v``) and ``2i + 1`` (``v -> u``).

    Example:
        >>> g = bond_graph(Chem.MolFromSmiles("CCO"))
        >>> [t.tolist() for t in g.edges()]
        [[0, 1, 1, 2], [1, 0, 2, 1]]
    """
    ends = np.array([(bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()) for bond in mol.GetBonds()], dtype=np.int64).reshape(-1, 2)
    src, dst = torch.from_numpy(ends.reshape(-1)), torch.from_numpy(np.ascontiguousarray(ends[:, ::-1]).reshape(-1))
    return dgl.graph((src, dst), num_nodes=mol.GetNumAtoms(), idtype=torch.int64)


def describe_molecule(molecule: object) -> str:
    """Text naming an input in reports and tables: the SMILES as given, a molecule's SMILES, or
    the ``repr`` of anything else.

    Example:
        >>> describe_molecule(Chem.MolFromSmiles("OCC")), describe_molecule(None), describe_molecule(("CCO", "O"))
        ('CCO', 'None', 'CCO.O')
    """
    if isinstance(molecule, str):
        return molecule
    if isinstance(molecule, Chem.Mol):
        return Chem.MolToSmiles(molecule)
    if isinstance(molecule, tuple):
        return ".".join(describe_molecule(part) for part in molecule)
    return repr(molecule)


class MoleculeFeaturizer:
    """Turns a SMILES string or RDKit molecule into ``(molecular graph, relation graph)``.

    Atoms are put in canonical order first (:func:`canonical_atom_order`), so the same molecule
    gives the same graphs, and the same predictions, however its SMILES is written.
    ``ndata["input_atom"]`` (int64) maps node ``i`` back to the atom index in the input (the order
    of atoms in the SMILES string or SDF block); hydrogens added by ``explicit_hydrogens`` come
    after the heavy atoms and have ``input_atom = -1``. A tuple of molecules (a row of several:
    solute and solvent, ...) gives their graphs side by side, each node marked with its molecule
    (:func:`~dgl_graphtx.featurize.components.combine_row`); an error names the molecule of the row.

    The molecular graph has ``ndata["feat"]`` (int64 ``[N, 9]`` for ``ogb``, float ``[N, 74]`` for
    ``canonical``), optionally ``ndata["pos"]`` (float32 ``[N, 3]``) and ``ndata["rwse"]``, and
    ``edata["feat"]`` plus ``edata["bond_class"]`` (OGB bond features in mixed radix).

    Args:
        config: featurization settings.
        relation: relation-graph settings.
        limits: size budgets; a molecule over one raises :class:`InvalidMoleculeError` with the
            reason, checked before any work that grows with ``atoms ** 2`` (default: no limits).

    Example:
        >>> f = MoleculeFeaturizer(relation=RelationConfig(virtual_node=True))
        >>> g, r = f("CCO")
        >>> g.num_nodes(), g.num_edges(), r.num_nodes(), r.num_edges()
        (3, 4, 4, 16)
    """

    def __init__(self, config: FeaturizerConfig = FeaturizerConfig(), relation: RelationConfig = RelationConfig(),
                 limits: Optional[SizeLimits] = None):
        if relation.needs_coordinates and not config.needs_coordinates:
            raise ConfigError(
                f"relation mode {relation} needs 3-D coordinates; set coordinates='auto' or 'etkdg'"
            )
        self.config = config
        self.relation = relation
        self.limits = limits
        self.bond_vocab = MOLECULE_BOND_VOCAB
        self._ogb_bonds = OGBBondFeaturizer()
        if config.atom_features == "ogb":
            self._atoms, self._bonds = OGBAtomFeaturizer(), self._ogb_bonds
        else:
            self._atoms = CanonicalAtomFeaturizer(atom_data_field="feat")
            self._bonds = CanonicalBondFeaturizer(bond_data_field="feat")

    @property
    def atom_feature_dims(self) -> Tuple[int, ...]:
        """Category counts per atom column (``ogb``), or ``(width,)`` of the float features."""
        return OGB_ATOM_FEATURE_DIMS if self.config.atom_features == "ogb" else (self._atoms.feat_size(),)

    @property
    def bond_feature_dims(self) -> Tuple[int, ...]:
        """Category counts per bond column (``ogb``), or ``(width,)`` of the float features."""
        return OGB_BOND_FEATURE_DIMS if self.config.atom_features == "ogb" else (self._bonds.feat_size(),)

    def describe_feature(self, level: str, column: int, value: float) -> Optional[str]:
        """Words for ``value`` in column ``column`` of the ``atom`` or ``bond`` features (``None``
        for the atomic number, which the applicability domain checks as the element).

        Example:
            >>> MoleculeFeaturizer().describe_feature("atom", 1, 2), MoleculeFeaturizer().describe_feature("atom", 0, 7)
            ('atom chirality S', None)
        """
        if self.config.atom_features != "ogb":
            return f"{level} feature column {column} = {value:g}"
        if level == "atom" and column == 0:
            return None
        return f"{level} {ogb_feature_value(level, column, int(value))}"

    @property
    def model_inputs(self) -> Dict[str, Any]:
        """The :class:`~dgl_graphtx.models.ModelConfig` fields this featurizer fixes: the atom
        featurizer and the feature and bond-class sizes (the one place they are derived).

        Example:
            >>> MoleculeFeaturizer(FeaturizerConfig(atom_features="canonical")).model_inputs["atom_feature_dims"]
            (74,)
        """
        return {
            "atom_features": self.config.atom_features,
            "atom_feature_dims": self.atom_feature_dims,
            "bond_feature_dims": self.bond_feature_dims,
            "bond_radices": self.bond_vocab.radices,
        }

    def prepare(self, molecule: MoleculeLike) -> Tuple[Chem.Mol, List[int]]:
        """Parse (:func:`prepare_input`), put the atoms in canonical order and apply the hydrogen
        setting; returns the molecule whose atoms are the graph's nodes and each node's input atom
        index (-1: added H), an index into the prepared input."""
        if self.limits is not None and isinstance(molecule, str):  # before RDKit's full parse, which can take minutes
            problem = self.limits.check_atoms(heavy_atoms_written(molecule))
            if problem:
                raise InvalidMoleculeError(problem)
        mol = to_mol(prepare_input(molecule, self.config))
        problem = self.limits.check_atoms(mol.GetNumAtoms()) if self.limits is not None else None
        if problem:
            raise InvalidMoleculeError(problem)
        mol, input_atom = canonical_atom_order(mol)
        if self.config.explicit_hydrogens:
            mol = Chem.AddHs(mol, addCoords=has_3d_conformer(mol))
            input_atom = input_atom + [-1] * (mol.GetNumAtoms() - len(input_atom))
            problem = self.limits.check_atoms(mol.GetNumAtoms()) if self.limits is not None else None
            if problem:
                raise InvalidMoleculeError(problem)
        return mol, input_atom

    def molecular_graph(self, molecule: MoleculeLike) -> dgl.DGLGraph:
        """The featurized molecular graph (bonds in both directions, dgllife order)."""
        mol, input_atom = self.prepare(molecule)
        graph = bond_graph(mol)
        graph.ndata.update(self._atoms(mol))
        ogb_bonds = self._ogb_bonds(mol)["feat"]
        bond_feats = ogb_bonds if self._bonds is self._ogb_bonds else self._dense_bond_features(mol)
        graph.edata["feat"] = bond_feats
        graph.edata["bond_class"] = self.bond_vocab.encode(ogb_bonds)
        graph.ndata["input_atom"] = torch.tensor(input_atom, dtype=torch.int64)
        if self.config.needs_coordinates:
            coords = molecule_coordinates(mol, self.config.coordinates, self.config.embed_seed, self.config.mmff)
            graph.ndata["pos"] = torch.from_numpy(coords.astype(np.float32))
        if self.config.rwse_steps:
            src, dst = (ends.numpy() for ends in graph.edges())
            graph.ndata["rwse"] = random_walk_landing(graph.num_nodes(), src, dst, self.config.rwse_steps)
        return graph

    def _dense_bond_features(self, mol: Chem.Mol) -> torch.Tensor:
        if mol.GetNumBonds() == 0:  # dgllife returns no field at all for bondless molecules
            return torch.zeros(0, self._bonds.feat_size(), dtype=torch.float32)
        return self._bonds(mol)["feat"]

    def __call__(self, molecule: MoleculeLike) -> Tuple[dgl.DGLGraph, dgl.DGLGraph]:
        if isinstance(molecule, tuple):  # a row of several molecules, each featurized alone
            return combine_row([_row_molecule(index, part, self) for index, part in enumerate(molecule)])
        graph = self.molecular_graph(molecule)
        relation = build_relation_graph(graph, self.relation, vocab=self.bond_vocab)
        problem = self.limits.check_relation_edges(relation.num_edges()) if self.limits is not None else None
        if problem:
            raise InvalidMoleculeError(problem)
        return graph, relation


def featurize_each(
    featurizer: MoleculeFeaturizer, molecules: Iterable[Optional[MoleculeLike]], progress: bool = False
) -> Iterator[Tuple[int, Optional[Tuple[dgl.DGLGraph, dgl.DGLGraph]], Optional[str]]]:
    """Featurize molecule by molecule, never raising for bad input: yields ``(row, graphs, None)``
    or ``(row, None, reason)``, with progress reporting if asked (see :func:`dgl_graphtx.logs.progress`).

    Example:
        >>> [(row, error) for row, _, error in featurize_each(MoleculeFeaturizer(), ["CO", "C1C"])]
        [(0, None), (1, 'SMILES syntax error (RDKit could not parse it)')]
    """
    for row, molecule in enumerate(progress_bar(molecules, "featurizing", "mol", enabled=progress)):
        try:
            yield row, featurizer(molecule), None
        except Exception as err:  # any failure on user data is reported, never fatal
            yield row, None, str(err) if isinstance(err, InvalidMoleculeError) else f"{type(err).__name__}: {err}"


def smiles_to_graphs(
    smiles: str,
    config: FeaturizerConfig = FeaturizerConfig(),
    relation: RelationConfig = RelationConfig(),
) -> Tuple[dgl.DGLGraph, dgl.DGLGraph]:
    """One-shot helper: ``(molecular graph, relation graph)`` of a SMILES string.

    Example:
        >>> g, r = smiles_to_graphs("[Na+].[Cl-]")
        >>> r.edata["spd"].tolist()
        [0, -1, -1, 0]
    """
    return MoleculeFeaturizer(config, relation)(smiles)
