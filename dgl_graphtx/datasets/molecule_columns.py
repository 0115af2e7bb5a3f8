"""Rows of several molecules: which columns of a table hold a row's molecules (solute and solvent,
drug and drug, the components of a mixture), which of them hold reactions (``reactants>>products``,
read as two molecules: the reactant side and the product side), and which hold each molecule's
mixture weight.

:meth:`MoleculeColumns.read` turns a table read by :func:`~dgl_graphtx.datasets.read_molecules`
into one whose molecules are tuples (one entry per molecule of the row, in the order of the
columns), which featurization lays side by side (:mod:`~dgl_graphtx.featurize.components`); a row's
identifier is its molecules' SMILES joined by ``.`` (a valid SMILES of the whole row, which splits,
fingerprints and reports read). A reaction cell without ``>>`` is a one-line error naming the row.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch

from ..errors import ConfigError
from ..featurize.components import MIXTURE_WEIGHTS
from ..featurize.molecule import describe_molecule
from .packed import PackedGraphs
from .readers import MoleculeTable, check_unique


def split_reaction(text: str, row: int, column: str, source: object) -> Tuple[str, str]:
    """The reactant and product sides of a reaction SMILES ``reactants>>products``; a cell without
    ``>>``, or with agents between the arrows, is a one-line error naming the row.

    Example:
        >>> split_reaction("CC(=O)O.OCC>>CC(=O)OCC.O", 0, "rxn", "d.csv")
        ('CC(=O)O.OCC', 'CC(=O)OCC.O')
        >>> split_reaction("CCO", 3, "rxn", "d.csv")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: row 3 of d.csv: reaction column 'rxn' holds 'CCO', which has no '>>'; write each reaction as ...
    """
    parts = text.split(">")
    if len(parts) != 3:
        raise ConfigError(f"row {row} of {source}: reaction column {column!r} holds {text!r}, which has no '>>'; write each "
                          "reaction as reactants>>products")
    if parts[1].strip():
        raise ConfigError(f"row {row} of {source}: reaction column {column!r} holds agents ({parts[1]!r}) between '>' and '>'; "
                          "they are not read: write reactants>>products, with the agents among the reactants if they matter")
    return parts[0].strip(), parts[2].strip()


@dataclass(frozen=True)
class MoleculeColumns:
    """The columns of a table that hold a row's molecules.

    Args:
        smiles_cols: the molecules' columns, in the order the model reads them (empty: the one
            SMILES column of the reader, ``smiles_col``).
        reaction_cols: the columns (of ``smiles_cols``, or alone) holding reactions
            ``reactants>>products``: each gives two molecules, its reactant and product sides.
        mixture_weights: one column per molecule holding its weight in the row (mole fractions
            of a mixture, say), for a model that sums its molecules' encodings weighted.

    Example:
        >>> MoleculeColumns(("solute", "solvent")).names
        ['solute', 'solvent']
        >>> MoleculeColumns(reaction_cols=("rxn",)).names
        ['rxn reactants', 'rxn products']
        >>> MoleculeColumns(("a", "b"), mixture_weights=("x_a",))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: 1 mixture weight column(s) ['x_a'] for 2 molecules per row ['a', 'b']; give one weight column ...
    """

    smiles_cols: Tuple[str, ...] = ()
    reaction_cols: Tuple[str, ...] = ()
    mixture_weights: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, what in (("smiles_cols", "molecule column"), ("reaction_cols", "reaction column"),
                           ("mixture_weights", "mixture weight column")):
            object.__setattr__(self, name, tuple(getattr(self, name)))
            check_unique(getattr(self, name), what)
        outside = [c for c in self.reaction_cols if c not in self.columns]
        if outside:
            raise ConfigError(f"reaction column(s) {outside} (--reaction-cols) are not among the molecule columns "
                              f"{list(self.columns)} (--smiles-cols); list them there too")
        if self.mixture_weights and len(self.mixture_weights) != self.count:
            raise ConfigError(f"{len(self.mixture_weights)} mixture weight column(s) {list(self.mixture_weights)} for {self.count} "
                              f"molecules per row {self.names}; give one weight column per molecule (--mixture-weights)")

    @property
    def columns(self) -> Tuple[str, ...]:
        """The columns holding molecules or reactions, in order."""
        return self.smiles_cols or self.reaction_cols

    @property
    def count(self) -> int:
        """Molecules per row (a reaction counts twice; 1 without molecule columns)."""
        return max(len(self.columns) + len(self.reaction_cols), 1)

    @property
    def several(self) -> bool:
        """Whether a row holds more than one molecule."""
        return self.count > 1

    @property
    def names(self) -> List[str]:
        """What each molecule of a row is called: its column, or a reaction's side."""
        out: List[str] = []
        for column in self.columns:
            out += [f"{column} reactants", f"{column} products"] if column in self.reaction_cols else [column]
        return out

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict (lists), as a checkpoint stores it."""
        return {k: list(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "MoleculeColumns":
        """Inverse of :meth:`to_dict` (``None``: one molecule per row)."""
        return cls(**(data or {}))

    def first_column(self, smiles_col: str) -> str:
        """The column the reader checks first: the first molecule column, or ``smiles_col``."""
        return self.columns[0] if self.columns else smiles_col

    def read(self, table: MoleculeTable) -> MoleculeTable:
        """``table`` with each row's molecules as a tuple (unchanged for one molecule per row), in
        the order of :attr:`names`, identified by their SMILES joined with ``.``.

        Example:
            >>> import tempfile, pathlib
            >>> from dgl_graphtx.datasets import read_molecules
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.csv"
            >>> _ = p.write_text("rxn,solvent,y\\nCCO>>CC=O,O,1.5\\n")
            >>> rows = MoleculeColumns(("rxn", "solvent"), ("rxn",)).read(read_molecules(p, "rxn"))
            >>> rows.molecules, rows.identifiers
            ([('CCO', 'CC=O', 'O')], ['CCO.CC=O.O'])
        """
        if not self.several and not self.reaction_cols:
            return table
        if table.kind != "table":
            raise ConfigError(f"several molecules per row (--smiles-cols {','.join(self.columns)}) are read from the columns of a "
                              f"CSV/TSV table; {table.source} is an {table.kind.upper()} file")
        cells = [table.column(c) for c in self.columns]  # names a missing column
        molecules: List[Any] = []
        for row in range(len(table)):
            parts: List[str] = []
            for column, values in zip(self.columns, cells):
                text = values[row]
                parts += split_reaction(text, row, column, table.source) if column in self.reaction_cols and text else [text]
                if column in self.reaction_cols and not text:
                    parts.append("")  # a blank reaction: both sides empty, reported as an invalid row
            molecules.append(tuple(parts))
        return dataclasses.replace(table, molecules=molecules, identifiers=[describe_molecule(m) for m in molecules])

    def weights(self, frame: Optional[pd.DataFrame], identifiers: Sequence[str], source: object = "the input") -> Optional[np.ndarray]:
        """The rows' mixture weights ``[M, K]`` (``None`` without weight columns); a missing column,
        or a cell that is not a finite number >= 0, is an error naming the row.

        Example:
            >>> columns = MoleculeColumns(("a", "b"), mixture_weights=("xa", "xb"))
            >>> columns.weights(pd.DataFrame({"xa": [0.2], "xb": ["0.8"]}), ["C.O"]).tolist()
            [[0.2, 0.8]]
        """
        if not self.mixture_weights:
            return None
        available = [] if frame is None else list(frame.columns)
        missing = [c for c in self.mixture_weights if c not in available]
        if missing or frame is None:
            raise ConfigError(f"mixture weight column(s) {missing} not in {source}; available: {available}")
        values = np.empty((len(frame), self.count))
        for k, column in enumerate(self.mixture_weights):
            for row, cell in enumerate(frame[column]):
                try:
                    values[row, k] = float(cell)
                except (TypeError, ValueError):
                    values[row, k] = np.nan
                if not np.isfinite(values[row, k]) or values[row, k] < 0:
                    raise ConfigError(f"row {row} of {source} ({identifiers[row]}): mixture weight column {column!r} holds "
                                      f"{cell!r}; weights must be finite numbers >= 0")
        return values


def attach_mixture_weights(graphs: PackedGraphs, weights: Optional[np.ndarray]) -> None:
    """Give each row's graph its mixture weights ``[K]`` (``weights``: one row per graph of
    ``graphs``), read by a model that sums its molecules weighted; nothing without weights."""
    if weights is not None:
        graphs.graph_data[MIXTURE_WEIGHTS] = torch.as_tensor(weights, dtype=torch.float32)
