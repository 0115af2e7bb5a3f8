"""Atom- and bond-level targets read from files: per-atom and per-bond values given as lists in a
table's columns, or as SD atom and bond properties, checked against each molecule and put on its
graph's nodes and bonds (:mod:`~dgl_graphtx.models.levels` names the graph data).

In a table, a cell holds one value per atom (per bond), separated by commas, semicolons or spaces,
with optional brackets (``[0.1, -0.2, nan]``); blank, ``nan``, ``NA``, ``n/a`` or ``None`` mark a
missing value, and a blank cell leaves the whole molecule unlabelled. Atoms are in the order of the
SMILES as written (``atom_index="input"``; hydrogens written as ``[H]`` are not atoms of the
molecule) or, with ``atom_index="map"``, value ``m`` belongs to the atom with atom-map number
``m + 1`` (``[CH3:1][OH:2]``; unmapped atoms unlabelled). Bonds are in the order of the SMILES
(the order RDKit reads them). In an SDF, values are atom properties (``atom.dprop.NAME`` lists,
read by RDKit) and bond properties (``bond.dprop.NAME`` lists, in the order of the record's bond
block, ``n/a`` missing). A list of the wrong length is a one-line error naming the row and both
lengths.

A constrained atom target (``atom_sums``, ``TARGET=SOURCE``) has its predicted values add up to a
molecular value: the molecule's formal charge (``SOURCE`` = ``formal_charge``) or a column.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from ..errors import ConfigError, InvalidMoleculeError
from ..featurize.molecule import ATOM_TARGETS, ATOM_TOTALS, ATOMIC_NUMBER, BOND_TARGETS, INPUT_BOND, MoleculeLike, to_mol
from .packed import PackedGraphs
from .readers import MoleculeTable, check_unique, list_problem_key
from .report import show_value

#: How list positions name atoms: the atom order of the input, or atom-map numbers.
ATOM_INDEXES = ("input", "map")
#: The sum source that is the molecule's own formal charge.
FORMAL_CHARGE = "formal_charge"
_MISSING = ("", "nan", "na", "n/a", "none", "null")


@dataclass(frozen=True)
class LevelTargets:
    """Which atom- and bond-level targets a run reads, and how.

    Args:
        atom_targets: columns of lists (tables) or SD atom properties, one value per atom.
        bond_targets: columns of lists or SD bond properties (``bond.dprop.NAME``), one per bond.
        atom_index: ``input`` (list position = atom index of the SMILES as written / the SD
            record) or ``map`` (list position ``m`` = the atom with atom-map number ``m + 1``).
        atom_sums: ``TARGET=SOURCE`` items: the predicted values of atom target ``TARGET`` add up to
            the molecule's formal charge (``SOURCE`` = ``formal_charge``) or to column ``SOURCE``.

    Example:
        >>> spec = LevelTargets(("q", "shift"), atom_sums=("q=formal_charge",))
        >>> spec.sums, spec.constrained
        ([('q', 'formal_charge')], (0,))
        >>> LevelTargets(("q",), atom_sums=("shift=formal_charge",))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: --atom-sums shift=formal_charge constrains 'shift', which is not an atom target (--atom-targets q)
    """

    atom_targets: Tuple[str, ...] = ()
    bond_targets: Tuple[str, ...] = ()
    atom_index: str = "input"
    atom_sums: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("atom_targets", "bond_targets", "atom_sums"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        check_unique([*self.atom_targets, *self.bond_targets], "atom or bond target")
        if self.atom_index not in ATOM_INDEXES:
            raise ConfigError(f"atom_index must be one of {ATOM_INDEXES}, got {self.atom_index!r}")
        for item in self.atom_sums:
            target, _, source = item.partition("=")
            if not target.strip() or not source.strip():
                raise ConfigError(f"--atom-sums {item!r}: write TARGET=SOURCE, SOURCE being {FORMAL_CHARGE} or a column")
            if target.strip() not in self.atom_targets:
                raise ConfigError(f"--atom-sums {item} constrains {target.strip()!r}, which is not an atom target "
                                  f"(--atom-targets {','.join(self.atom_targets)})")
        check_unique([target for target, _ in self.sums], "constrained atom target")

    @property
    def any(self) -> bool:
        """Whether any atom- or bond-level target is read."""
        return bool(self.atom_targets or self.bond_targets)

    @property
    def sums(self) -> List[Tuple[str, str]]:
        """``(target, source)`` of each constrained atom target, in the order given."""
        return [tuple(part.strip() for part in item.split("=", 1)) for item in self.atom_sums]  # type: ignore[misc]  # two parts each (checked)

    @property
    def sum_columns(self) -> List[str]:
        """The columns the constrained sums are read from."""
        return [source for _, source in self.sums if source != FORMAL_CHARGE]

    @property
    def constrained(self) -> Tuple[int, ...]:
        """The constrained atom targets' indices among :attr:`atom_targets`, in the order of :attr:`sums`."""
        return tuple(self.atom_targets.index(target) for target, _ in self.sums)

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict (lists), as a checkpoint stores it."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "LevelTargets":
        """Inverse of :meth:`to_dict` (``None``: no atom or bond target)."""
        return cls(**(data or {}))


def parse_values(text: Any) -> np.ndarray:
    """The numbers of a list cell (``"[0.1, -0.2, nan]"``, ``"0.1;-0.2"``, ``"0.1 -0.2"``); missing
    entries NaN; a blank cell gives no value. An entry that is not a number raises ``ValueError``.

    Example:
        >>> parse_values("[0.5, n/a, -1]").tolist(), parse_values("").tolist()
        ([0.5, nan, -1.0], [])
    """
    if text is None or (isinstance(text, float) and np.isnan(text)):
        return np.zeros(0)
    if isinstance(text, (int, float)):
        return np.array([float(text)])
    body = str(text).strip().strip("[]()")
    if not body.strip():
        return np.zeros(0)
    entries = re.split(r"[,;\s]+", body.strip())
    return np.array([np.nan if entry.lower() in _MISSING else float(entry) for entry in entries], dtype=np.float64)


class LevelLabels(NamedTuple):
    """The atom and bond labels of a table's rows, in the input's atom and bond order: per row
    ``[n_atoms, A]`` and ``[n_bonds, C]`` (``None`` for a molecule that could not be read, which
    featurization reports), and the constrained sums' values ``[M, S]``."""

    atoms: List[Optional[np.ndarray]]
    bonds: List[Optional[np.ndarray]]
    totals: np.ndarray


def _readable(molecule: MoleculeLike) -> Optional[Chem.Mol]:
    try:
        return to_mol(molecule)
    except InvalidMoleculeError:
        return None


def _table_values(cell: Any, mol: Chem.Mol, spec: LevelTargets, level: str, where: str, name: str) -> np.ndarray:
    """One row's values of one list column, in atom (bond) order, checked against ``mol``."""
    try:
        values = parse_values(cell)
    except ValueError:
        raise ConfigError(f"{where}: {level} target {name!r} holds {cell!r}, which is not a list of numbers; separate the "
                          "values by commas, semicolons or spaces (blank or nan where unknown)") from None
    count = mol.GetNumAtoms() if level == "atom" else mol.GetNumBonds()
    if level == "atom" and spec.atom_index == "map":
        maps = [atom.GetAtomMapNum() for atom in mol.GetAtoms()]
        if len(values) and len(values) != max(maps):
            raise ConfigError(f"{where}: atom target {name!r} lists {len(values)} values for atom-map numbers up to {max(maps)}; "
                              "give one value per map number, value m for the atom mapped m+1 (blank or nan where unknown)")
        return np.array([values[m - 1] if m > 0 and len(values) else np.nan for m in maps])
    if len(values) and len(values) != count:
        order = "the SMILES as written" if level == "atom" else "the bonds of the SMILES as written"
        raise ConfigError(f"{where}: {level} target {name!r} lists {len(values)} values for the {count} {level}s of the molecule; "
                          f"give one value per {level}, in the order of {order} (blank or nan where unknown)")
    return values if len(values) else np.full(count, np.nan)


def _property_values(mol: Chem.Mol, level: str, name: str, where: str) -> np.ndarray:
    """One molecule's SD atom (bond) property ``name`` in atom (bond) order, NaN where absent; a
    list the reader could not read (:func:`~dgl_graphtx.datasets.readers.check_property_lists`) is
    an error naming the row."""
    if mol.HasProp(list_problem_key(level, name)):
        raise ConfigError(f"{where}: {mol.GetProp(list_problem_key(level, name))}; give one value per {level} "
                          "('n/a' where unknown)")
    items = mol.GetAtoms() if level == "atom" else mol.GetBonds()
    return np.array([item.GetDoubleProp(name) if item.HasProp(name) else np.nan for item in items], dtype=np.float64)


def _check_present(table: MoleculeTable, names: Sequence[str], level: str, molecules: Sequence[Optional[Chem.Mol]]) -> None:
    """Every named list column (table) or property (SDF, on some atom or bond of some record) exists."""
    if table.kind == "table":
        missing = [n for n in names if n not in table.columns.columns]
        where = f"column(s) {missing} of lists"
    else:
        seen = {name for mol in molecules if mol is not None
                for item in (mol.GetAtoms() if level == "atom" else mol.GetBonds()) for name in item.GetPropNames()}
        seen |= {n for n in names for mol in molecules if mol is not None and mol.HasProp(list_problem_key(level, n))}
        missing = [n for n in names if n not in seen]
        where = f"SD {level} propert{'ies' if len(missing) > 1 else 'y'} {missing} (atom.dprop.NAME / bond.dprop.NAME lists)"
    if missing:
        raise ConfigError(f"{level} target {where} not found in {table.source}; check --{level}-targets")


def read_level_labels(table: MoleculeTable, spec: LevelTargets) -> LevelLabels:
    """The atom and bond labels of every row of ``table`` (a table's list columns, or an SDF's atom
    and bond properties) and the values of the constrained sums, checked before featurization.

    Example:
        >>> import tempfile, pathlib
        >>> from dgl_graphtx.datasets import read_molecules
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "q.csv"
        >>> _ = p.write_text('smiles,q\\nOC,"[-0.4, 0.1]"\\n')
        >>> read_level_labels(read_molecules(p), LevelTargets(("q",))).atoms[0].tolist()
        [[-0.4], [0.1]]
        >>> _ = p.write_text('smiles,q\\nOC,"[-0.4, 0.1, 0.3]"\\n')
        >>> read_level_labels(read_molecules(p), LevelTargets(("q",)))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: row 0 of .../q.csv (OC): atom target 'q' lists 3 values for the 2 atoms of the molecule; ...
    """
    if table.kind not in ("table", "sdf"):
        raise ConfigError(f"atom and bond targets are read from a CSV/TSV (lists in columns) or an SDF (atom and bond "
                          f"properties); {table.source} is a {table.kind} file")
    molecules = [_readable(m) for m in table.molecules]
    _check_present(table, spec.atom_targets, "atom", molecules)
    _check_present(table, spec.bond_targets, "bond", molecules)
    per_level: Dict[str, List[Optional[np.ndarray]]] = {"atom": [], "bond": []}
    for row, mol in enumerate(molecules):
        where = f"row {row} of {table.source} ({table.identifiers[row]})"
        for level, names in (("atom", spec.atom_targets), ("bond", spec.bond_targets)):
            if mol is None or not names:
                per_level[level].append(None)
            elif table.kind == "table":
                per_level[level].append(np.stack([_table_values(table.columns[n].iloc[row], mol, spec, level, where, n)
                                                  for n in names], axis=1))
            else:
                per_level[level].append(np.stack([_property_values(mol, level, n, where) for n in names], axis=1))
    return LevelLabels(per_level["atom"], per_level["bond"], sum_totals(spec, table.molecules, table.columns,
                                                                        table.identifiers, table.source, required=True))


def sum_totals(spec: LevelTargets, molecules: Sequence[MoleculeLike], frame: Optional[pd.DataFrame], identifiers: Sequence[str],
               source: object = "the input", required: bool = False) -> np.ndarray:
    """The molecular value each constrained atom target sums to, per row ``[M, S]``: the formal
    charge, or a column (an unreadable molecule, and a blank cell unless ``required``, give NaN:
    no constraint; a cell that is not a number is an error naming the row).

    Example:
        >>> sum_totals(LevelTargets(("q",), atom_sums=("q=formal_charge",)), ["[NH4+]", "CC(=O)[O-]"], None, ["a", "b"]).tolist()
        [[1.0], [-1.0]]
    """
    out = np.full((len(molecules), len(spec.sums)), np.nan)
    for j, (target, column) in enumerate(spec.sums):
        if column == FORMAL_CHARGE:
            for row, molecule in enumerate(molecules):
                mol = _readable(molecule)
                out[row, j] = np.nan if mol is None else Chem.GetFormalCharge(mol)
            continue
        if frame is None or column not in frame.columns:
            raise ConfigError(f"the sum of atom target {target!r} is read from column {column!r} (--atom-sums), which {source} lacks")
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
        for row in np.flatnonzero(~np.isfinite(values)).tolist():
            cell = frame[column].iloc[row]
            if required or not (pd.isna(cell) or not str(cell).strip()):
                shown = "a blank" if pd.isna(cell) or not str(cell).strip() else show_value(cell)
                raise ConfigError(f"row {row} of {source} ({identifiers[row]}): column {column!r} holds {shown}, but the atom "
                                  f"values of {target!r} must add up to a number there (--atom-sums)")
        out[:, j] = values
    return out


def attach_level_labels(graphs: PackedGraphs, rows: Sequence[int], labels: LevelLabels, molecules: Sequence[MoleculeLike],
                        spec: LevelTargets) -> None:
    """Put the labels of the featurized ``rows`` on their graphs (position ``p`` of ``graphs``
    holds row ``rows[p]``): atom labels on the nodes in canonical order (through
    ``ndata["input_atom"]``; hydrogens the featurizer added unlabelled), bond labels on both edges
    of each bond, the constrained sums as each graph's values."""
    offsets, counts = graphs.node_offsets.tolist(), graphs.num_nodes.tolist()
    input_atom = graphs.ndata["input_atom"]
    if spec.atom_targets:
        values = torch.full((int(graphs.num_nodes.sum()), len(spec.atom_targets)), float("nan"))
        elements = torch.ones(len(values), dtype=torch.int64)  # hydrogens the featurizer added
        for position, row in enumerate(rows):
            found, mol = labels.atoms[row], _readable(molecules[row])
            nodes = slice(offsets[position], offsets[position] + counts[position])
            known = input_atom[nodes] >= 0
            atoms = input_atom[nodes][known].numpy()
            if found is not None and mol is not None:
                values[nodes][known] = torch.from_numpy(found[atoms]).float()
                elements[nodes][known] = torch.tensor([mol.GetAtomWithIdx(int(a)).GetAtomicNum() for a in atoms], dtype=torch.int64)
        graphs.ndata[ATOM_TARGETS], graphs.ndata[ATOMIC_NUMBER] = values, elements
    if spec.bond_targets:
        graphs.edata[BOND_TARGETS], graphs.edata[INPUT_BOND] = _bond_values(graphs, rows, labels, molecules, len(spec.bond_targets))
    if spec.sums:
        graphs.graph_data[ATOM_TOTALS] = torch.as_tensor(labels.totals[list(rows)], dtype=torch.float32)


def _bond_values(graphs: PackedGraphs, rows: Sequence[int], labels: LevelLabels, molecules: Sequence[MoleculeLike],
                 width: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Bond labels on both edges of each bond of every graph (``[sum E, C]``), matched to the input's
    bonds through the atoms each edge joins, and each edge's input bond index (-1: none)."""
    values = torch.full((len(graphs.src), width), float("nan"))
    bonds = torch.full((len(graphs.src),), -1, dtype=torch.int64)
    offsets, edge_offsets, input_atom = graphs.node_offsets.tolist(), graphs.edge_offsets.tolist(), graphs.ndata["input_atom"]
    for position, row in enumerate(rows):
        found, mol = labels.bonds[row], _readable(molecules[row])
        if found is None or mol is None:
            continue
        start, end = edge_offsets[position], edge_offsets[position] + int(graphs.num_edges[position])
        ends = (input_atom[offsets[position] + graphs.src[start:end].long()].tolist(),
                input_atom[offsets[position] + graphs.dst[start:end].long()].tolist())
        for edge, (a, b) in enumerate(zip(*ends)):
            bond = mol.GetBondBetweenAtoms(a, b) if a >= 0 and b >= 0 else None
            if bond is not None:
                values[start + edge] = torch.from_numpy(found[bond.GetIdx()]).float()
                bonds[start + edge] = bond.GetIdx()
    return values, bonds
