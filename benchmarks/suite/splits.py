"""Split files: one per (set, seed), written once and given unchanged to every tool.

``data.csv`` holds ``smiles, target, split`` (``train`` / ``val`` / ``test``, the words chemprop's
``--splits-column`` and our ``--split-col`` both read), and ``cliff`` (0/1) where the set flags
activity cliffs; 3-D sets also get ``data.sdf``, the same
rows in the same order with hydrogens, DFT coordinates and the ``target`` and ``split`` properties.
"""
from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
from rdkit import Chem, rdBase
from rdkit.Chem.Scaffolds import MurckoScaffold

from .config import FRACTIONS, SuiteSet
from .sets import SetData

PARTS = ("train", "val", "test")


def random_split(n: int, seed: int, fractions: Sequence[float] = FRACTIONS) -> List[str]:
    """A part name per row: a seeded permutation cut at the fractions.

    Example:
        >>> parts = random_split(10, 0)
        >>> [parts.count(p) for p in PARTS]
        [8, 1, 1]
    """
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    parts = ["test"] * n
    for rank, row in enumerate(order):
        parts[row] = "train" if rank < n_train else "val" if rank < n_train + n_val else "test"
    return parts


def scaffold(smiles: str) -> str:
    """The Bemis-Murcko scaffold (no stereo); ``""`` for acyclic molecules.

    Example:
        >>> scaffold("CCc1ccccc1O"), scaffold("CCO")
        ('c1ccccc1', '')
    """
    with rdBase.BlockLogs():
        return MurckoScaffold.MurckoScaffoldSmiles(mol=Chem.MolFromSmiles(smiles), includeChirality=False)


def scaffold_split(smiles: Sequence[str], seed: int, fractions: Sequence[float] = FRACTIONS) -> List[str]:
    """Balanced scaffold split (as chemprop's): molecules sharing a scaffold stay in one part;
    scaffold sets larger than half the validation size go to training first, the rest in a
    seeded random order; each set fills train, else validation, else test.

    Example:
        >>> parts = scaffold_split(["c1ccccc1C", "c1ccccc1O", "C1CCCCC1", "C1CC1", "CCO"], 0, (0.6, 0.2, 0.2))
        >>> parts[0] == parts[1]
        True
    """
    groups: Dict[str, List[int]] = defaultdict(list)
    for row, text in enumerate(smiles):
        groups[scaffold(text)].append(row)
    n = len(smiles)
    n_train, n_val = int(fractions[0] * n), int(fractions[1] * n)
    sets = sorted(groups.values(), key=lambda rows: rows[0])
    big = [rows for rows in sets if len(rows) > n_val / 2]
    small = [rows for rows in sets if len(rows) <= n_val / 2]
    rng = np.random.default_rng(seed)
    ordered = [big[i] for i in rng.permutation(len(big))] + [small[i] for i in rng.permutation(len(small))]
    parts = [""] * n
    counts = {"train": 0, "val": 0}
    for rows in ordered:
        part = ("train" if counts["train"] + len(rows) <= n_train else
                "val" if counts["val"] + len(rows) <= n_val else "test")
        counts[part] = counts.get(part, 0) + len(rows)
        for row in rows:
            parts[row] = part
    return parts


def fixed_split(parts: Sequence[str], seed: int, valid_share: float = 0.2) -> List[str]:
    """The set's own ``train``/``test`` parts with ``valid_share`` of the training rows, drawn at
    random with ``seed``, moved to ``val`` (MoleculeACE's published protocol).

    Example:
        >>> parts = fixed_split(["train"] * 10 + ["test"] * 3, 0)
        >>> [parts.count(p) for p in PARTS]
        [8, 2, 3]
    """
    train = np.flatnonzero(np.asarray(parts) == "train")
    valid = set(np.random.default_rng(seed).choice(train, size=round(valid_share * len(train)), replace=False).tolist())
    return ["val" if row in valid else str(part) for row, part in enumerate(parts)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class SplitFiles:
    """The files of one (set, seed) and their SHA-256 digests (part of every run's cache key)."""

    folder: Path
    hashes: Dict[str, str]

    @property
    def csv(self) -> Path:
        return self.folder / "data.csv"

    @property
    def sdf(self) -> Path:
        return self.folder / "data.sdf"

    def counts(self) -> Dict[str, int]:
        import pandas as pd

        parts = pd.read_csv(self.csv)["split"]
        return {p: int((parts == p).sum()) for p in PARTS}


def _write_sdf(path: Path, molecules: Sequence[Chem.Mol], targets: Sequence[float], parts: Sequence[str]) -> None:
    writer = Chem.SDWriter(str(path))
    for mol, target, part in zip(molecules, targets, parts):
        copy = Chem.Mol(mol)
        copy.SetProp("target", repr(float(target)))
        copy.SetProp("split", part)
        writer.write(copy)
    writer.close()


def write_split_files(spec: SuiteSet, data: SetData, seed: int, folder: Path) -> SplitFiles:
    """Write (or rewrite, byte for byte the same) the split files of ``spec`` and ``seed``."""
    folder.mkdir(parents=True, exist_ok=True)
    smiles = list(data.frame["smiles"])
    parts = (fixed_split(list(data.frame["part"]), seed) if spec.split == "fixed" else
             scaffold_split(smiles, seed) if spec.split == "scaffold" else random_split(len(smiles), seed))
    table = data.frame[["smiles", "target"]].assign(split=parts)
    if "cliff" in data.frame:
        table["cliff"] = data.frame["cliff"].astype(int)
    table.to_csv(folder / "data.csv", index=False, float_format="%.10g", lineterminator="\n")
    names = ["data.csv"]
    if data.molecules is not None:
        _write_sdf(folder / "data.sdf", data.molecules, table["target"], parts)
        names.append("data.sdf")
    return SplitFiles(folder, {name: sha256(folder / name) for name in names})


def check_recorded(record: Path, key: Tuple[str, int], files: SplitFiles) -> None:
    """Compare ``files``' digests with those recorded for ``key`` in ``record`` (a JSON file),
    recording them on first sight; a changed split file stops the suite."""
    table = json.loads(record.read_text()) if record.exists() else {}
    name = f"{key[0]}/seed{key[1]}"
    entry = {"sha256": files.hashes, "rows": files.counts()}
    if name in table and table[name]["sha256"] != files.hashes:
        raise SystemExit(f"split files of {name} differ from those recorded in {record}: {table[name]['sha256']} "
                         f"vs {files.hashes}; results of other runs would not be comparable")
    if table.get(name) != entry:
        table[name] = entry
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(dict(sorted(table.items())), indent=1) + "\n")
