"""Molecules, targets and a content fingerprint read from one input file: CSV, SDF or ``.smi``,
each optionally gzipped (``.csv.gz``, ``.sdf.gz``, ``.smi.gz``).

The single place where :mod:`~dgl_graphtx.datasets.sharded_store` reads its inputs, so that it
can be swapped for a library-wide input reader without touching the featurization.
"""
from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Union

import numpy as np
import pandas as pd
from rdkit import Chem, rdBase

from ..errors import ConfigError
from .molecule_dataset import _file_fingerprint, read_molecule_csv, smiles_column

PathLike = Union[str, Path]
FORMATS = ("csv", "sdf", "smi")


@dataclass
class MoleculeTable:
    """Molecules (SMILES or RDKit molecules, ``None`` for unreadable records) in input order,
    their targets (``None`` without target columns), the text naming each, and a fingerprint of
    the file and the reading settings (the content part of the cache key)."""

    molecules: List[object]
    targets: Optional[pd.DataFrame]
    identifiers: List[str]
    fingerprint: str


def input_format(path: PathLike) -> str:
    """``csv``, ``sdf`` or ``smi`` from the file name (``.gz`` ignored).

    Example:
        >>> input_format("mols.sdf.gz"), input_format("x.smi"), input_format("t.CSV")
        ('sdf', 'smi', 'csv')
    """
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    kind = {".csv": "csv", ".sdf": "sdf", ".sd": "sdf", ".smi": "smi", ".smiles": "smi"}.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise ConfigError(f"cannot tell the format of {path}: use a .csv, .sdf or .smi file (optionally .gz)")
    return kind


def _open_text(path: Path):
    return gzip.open(path, "rt") if path.suffix.lower() == ".gz" else open(path)


def read_molecule_table(path: PathLike, smiles_col: str = "smiles", target_cols: Sequence[str] = (),
                        explicit_hydrogens: bool = False) -> MoleculeTable:
    """Read ``path``. CSV: a SMILES column and target columns; SDF: molecules with targets as SD
    properties (hydrogens kept with ``explicit_hydrogens``); ``.smi``: one ``SMILES [name]`` per
    line, no targets.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.smi"
        >>> _ = p.write_text("CCO ethanol\\nc1ccccc1\\n")
        >>> t = read_molecule_table(p)
        >>> t.molecules, t.identifiers
        (['CCO', 'c1ccccc1'], ['CCO', 'c1ccccc1'])
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"input file not found: {path}")
    kind, cols = input_format(path), list(target_cols)
    fingerprint = _file_fingerprint(path)
    if kind == "csv":
        frame = read_molecule_csv(path, smiles_col)
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ConfigError(f"target column(s) {missing} not in {path}; columns are {list(frame.columns)}")
        smiles = smiles_column(frame, smiles_col)
        targets = frame[cols].reset_index(drop=True) if cols else None
        return MoleculeTable(smiles, targets, list(smiles), f"{fingerprint}|{smiles_col}|{cols}")
    if kind == "smi":
        if cols:
            raise ConfigError(f"{path} is a .smi file without targets; use a CSV or SDF for --targets")
        with _open_text(path) as handle:
            smiles = [line.split()[0] for line in handle if line.strip()]
        return MoleculeTable(smiles, None, list(smiles), f"{fingerprint}|smi")
    handle = gzip.open(path) if path.suffix.lower() == ".gz" else open(path, "rb")
    molecules, ids, props = [], [], []
    with handle, rdBase.BlockLogs():
        for index, mol in enumerate(Chem.ForwardSDMolSupplier(handle, removeHs=not explicit_hydrogens)):
            molecules.append(mol)
            ids.append(f"SDF record {index}" if mol is None else Chem.MolToSmiles(mol))
            props.append({} if mol is None else mol.GetPropsAsDict())
    targets = pd.DataFrame([[p.get(c, np.nan) for c in cols] for p in props], columns=cols) if cols else None
    return MoleculeTable(molecules, targets, ids, f"{fingerprint}|{cols}")
