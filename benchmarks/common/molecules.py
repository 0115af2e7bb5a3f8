"""Molecules for the benchmarks: FreeSolv SMILES, ZINC-sized molecules built from them, and the
MOSES training SMILES read from the ``molsets`` wheel.

Not part of the package; imported by the scripts in this folder when they are run as
``python benchmarks/<name>.py`` (their folder is then first on ``sys.path``).
"""
from __future__ import annotations

import gzip
import random
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from rdkit import Chem, rdBase

from dgl_graphtx.datasets import freesolv


def freesolv_smiles() -> Tuple[List[str], List[float]]:
    """The 642 SMILES of the embedded FreeSolv set and their ``expt`` targets."""
    frame = freesolv()
    return [str(s) for s in frame["smiles"]], [float(y) for y in frame["expt"]]


def repeat_to(items: Sequence, minimum: int) -> List:
    """``items`` repeated whole until the list has at least ``minimum`` entries."""
    copies = max(1, -(-minimum // len(items)))
    return list(items) * copies


def heavy_atoms(smiles: str) -> int:
    mol = Chem.MolFromSmiles(smiles)
    return 0 if mol is None else mol.GetNumHeavyAtoms()


def _attachable_atoms(mol: Chem.Mol) -> List[int]:
    """Atoms that can take one more single bond by giving up an implicit hydrogen."""
    return [
        a.GetIdx()
        for a in mol.GetAtoms()
        if a.GetNumImplicitHs() > 0 and a.GetFormalCharge() == 0 and a.GetNumRadicalElectrons() == 0
    ]


def join_molecules(first: Chem.Mol, second: Chem.Mol, rng: random.Random) -> Optional[Chem.Mol]:
    """``first`` and ``second`` joined by one single bond between two atoms that have implicit
    hydrogens (each loses one); ``None`` if no such pair exists or RDKit rejects the result."""
    left, right = _attachable_atoms(first), _attachable_atoms(second)
    if not left or not right:
        return None
    combined = Chem.RWMol(Chem.CombineMols(first, second))
    a, b = rng.choice(left), first.GetNumAtoms() + rng.choice(right)
    combined.AddBond(a, b, Chem.BondType.SINGLE)
    mol = combined.GetMol()
    with rdBase.BlockLogs():
        try:
            Chem.SanitizeMol(mol)
        except Exception:  # RDKit raises several exception types on bad valences / kekulization
            return None
        # round-trip so that hydrogen counts and aromaticity are re-perceived from scratch
        out = Chem.MolFromSmiles(Chem.MolToSmiles(mol))
    return out


def zinc_like_smiles(
    count: int, seed: int = 0, min_atoms: int = 20, max_atoms: int = 26, pool: Optional[Sequence[str]] = None
) -> List[str]:
    """``count`` connected drug-sized molecules (``min_atoms..max_atoms`` heavy atoms, ~23 on
    average like ZINC) made by joining random FreeSolv molecules with single bonds.

    Deterministic for a given ``seed`` (and RDKit version). The molecules are chemically plausible
    (valences respected, sanitized by RDKit) but not meant to be real compounds.
    """
    rng = random.Random(seed)
    source = list(pool) if pool is not None else freesolv_smiles()[0]
    parts = []
    with rdBase.BlockLogs():
        for s in source:
            mol = Chem.MolFromSmiles(s)
            if mol is not None and "." not in s and _attachable_atoms(mol):
                parts.append(mol)
    if not parts:
        raise ValueError("no usable building blocks")
    out: List[str] = []
    attempts = 0
    while len(out) < count:
        attempts += 1
        if attempts > 1000 * count:
            raise RuntimeError("could not build enough ZINC-like molecules; loosen min/max atoms")
        target = rng.randint(min_atoms, max_atoms)
        mol = rng.choice(parts)
        for _ in range(50):  # grow until the drawn target size is reached
            n = mol.GetNumHeavyAtoms()
            if n >= target:
                break
            room = target - n  # fill up to the target, never past it
            candidates = [p for p in parts if p.GetNumHeavyAtoms() <= room]
            if not candidates:
                break
            joined = join_molecules(mol, rng.choice(candidates), rng)
            if joined is not None:
                mol = joined
        if min_atoms <= mol.GetNumHeavyAtoms() <= max_atoms:
            out.append(Chem.MolToSmiles(mol))
    return out


#: The MOSES training set inside the ``molsets`` wheel (1,584,663 ZINC-derived SMILES, MIT).
MOSES_MEMBER = "moses/dataset/data/train.csv.gz"
MOSES_SIZE = 1_584_663


def moses_wheel(folder: Path) -> Path:
    """The ``molsets`` wheel in ``folder``, fetched with ``pip download --no-deps molsets`` if absent.

    The package is downloaded, never installed: its install requirements are heavy and pinned
    (e.g. pomegranate 0.12); only the data file inside the archive is read.
    """
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob("molsets-*.whl"))
    if not found:
        print(f"fetching the molsets wheel into {folder} (pip download --no-deps molsets) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "molsets", "-d", str(folder)], check=True)
        found = sorted(folder.glob("molsets-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download left no molsets wheel in {folder}")
    return found[-1]


def moses_smiles(folder: Path, count: Optional[int] = None, seed: int = 0) -> List[str]:
    """MOSES training SMILES read from the molsets wheel in ``folder`` (see :func:`moses_wheel`):
    all of them (file order) when ``count`` is None, else a random sample of ``count`` (``seed``)."""
    with zipfile.ZipFile(moses_wheel(folder)) as archive, archive.open(MOSES_MEMBER) as raw:
        lines = gzip.decompress(raw.read()).decode().splitlines()
    if lines[0].strip().upper() != "SMILES":
        raise ValueError(f"unexpected header {lines[0]!r} in {MOSES_MEMBER}")
    smiles = [line.strip() for line in lines[1:] if line.strip()]
    if count is None or count >= len(smiles):
        return smiles
    return random.Random(seed).sample(smiles, count)
