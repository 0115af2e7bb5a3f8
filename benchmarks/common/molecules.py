"""Molecules for the checks: FreeSolv SMILES, ZINC-sized molecules joined from them, the MOSES
training SMILES read from the ``molsets`` wheel, and molecules of a size range from any of these."""
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

#: The MOSES training set inside the ``molsets`` wheel (1,584,663 ZINC-derived SMILES, MIT).
MOSES_MEMBER = "moses/dataset/data/train.csv.gz"
MOSES_SIZE = 1_584_663
MOSES_DIR = Path(__file__).resolve().parents[2] / ".cache" / "moses"


def freesolv_smiles() -> Tuple[List[str], List[float]]:
    """The 642 SMILES of the embedded FreeSolv set and their ``expt`` targets."""
    frame = freesolv()
    return [str(s) for s in frame["smiles"]], [float(y) for y in frame["expt"]]


def repeat_to(items: Sequence, count: int) -> List:
    """``items`` repeated whole and cut to ``count`` entries."""
    return (list(items) * max(1, -(-count // len(items))))[:count]


def heavy_atoms(smiles: str) -> int:
    mol = Chem.MolFromSmiles(smiles)
    return 0 if mol is None else mol.GetNumHeavyAtoms()


def read_smiles(path: Path) -> List[str]:
    """The first column of every line of a SMILES or CSV file, a ``smiles`` header left out."""
    lines = [line.split(",")[0].strip() for line in Path(path).read_text().splitlines()]
    return [s for s in lines if s and s.upper() != "SMILES"]


def _attachable_atoms(mol: Chem.Mol) -> List[int]:
    """Atoms that can take one more single bond by giving up an implicit hydrogen."""
    return [a.GetIdx() for a in mol.GetAtoms() if a.GetNumImplicitHs() > 0 and a.GetFormalCharge() == 0 and a.GetNumRadicalElectrons() == 0]


def join_molecules(first: Chem.Mol, second: Chem.Mol, rng: random.Random) -> Optional[Chem.Mol]:
    """``first`` and ``second`` joined by one single bond between two atoms that have implicit
    hydrogens (each loses one); ``None`` if no such pair exists or RDKit rejects the result."""
    left, right = _attachable_atoms(first), _attachable_atoms(second)
    if not left or not right:
        return None
    combined = Chem.RWMol(Chem.CombineMols(first, second))
    combined.AddBond(rng.choice(left), first.GetNumAtoms() + rng.choice(right), Chem.BondType.SINGLE)
    mol = combined.GetMol()
    with rdBase.BlockLogs():
        try:
            Chem.SanitizeMol(mol)
        except Exception:  # RDKit raises several exception types on bad valences / kekulization
            return None
        return Chem.MolFromSmiles(Chem.MolToSmiles(mol))  # hydrogens and aromaticity perceived anew


def zinc_like_smiles(count: int, seed: int = 0, min_atoms: int = 20, max_atoms: int = 26,
                     pool: Optional[Sequence[str]] = None) -> List[str]:
    """``count`` connected drug-sized molecules (``min_atoms..max_atoms`` heavy atoms, ~23 on
    average like ZINC) made by joining random FreeSolv molecules with single bonds.

    Deterministic for a given ``seed`` (and RDKit version); chemically plausible (valences
    respected, sanitized by RDKit), not meant to be real compounds.
    """
    rng = random.Random(seed)
    with rdBase.BlockLogs():
        mols = [Chem.MolFromSmiles(s) for s in (list(pool) if pool is not None else freesolv_smiles()[0]) if "." not in s]
    parts = [mol for mol in mols if mol is not None and _attachable_atoms(mol)]
    if not parts:
        raise ValueError("no usable building blocks")
    out: List[str] = []
    for _ in range(1000 * count):
        target, mol = rng.randint(min_atoms, max_atoms), rng.choice(parts)
        for _ in range(50):  # grow up to the drawn size, never past it
            candidates = [p for p in parts if p.GetNumHeavyAtoms() <= target - mol.GetNumHeavyAtoms()]
            if not candidates:
                break
            joined = join_molecules(mol, rng.choice(candidates), rng)
            mol = mol if joined is None else joined
        if min_atoms <= mol.GetNumHeavyAtoms() <= max_atoms:
            out.append(Chem.MolToSmiles(mol))
        if len(out) == count:
            return out
    raise RuntimeError("could not build enough ZINC-like molecules; loosen min/max atoms")


def moses_wheel(folder: Path = MOSES_DIR) -> Path:
    """The ``molsets`` wheel in ``folder``, fetched with ``pip download --no-deps molsets`` if absent
    (downloaded, never installed: its requirements are heavy and pinned; only its data file is read)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not sorted(folder.glob("molsets-*.whl")):
        print(f"fetching the molsets wheel into {folder} (pip download --no-deps molsets) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "molsets", "-d", str(folder)], check=True)
    found = sorted(folder.glob("molsets-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download left no molsets wheel in {folder}")
    return found[-1]


def moses_smiles(folder: Path = MOSES_DIR, count: Optional[int] = None, seed: int = 0) -> List[str]:
    """MOSES training SMILES from the molsets wheel in ``folder`` (see :func:`moses_wheel`): all of
    them (file order) when ``count`` is None, else a random sample of ``count`` (``seed``)."""
    with zipfile.ZipFile(moses_wheel(folder)) as archive, archive.open(MOSES_MEMBER) as raw:
        lines = gzip.decompress(raw.read()).decode().splitlines()
    if lines[0].strip().upper() != "SMILES":
        raise ValueError(f"unexpected header {lines[0]!r} in {MOSES_MEMBER}")
    smiles = [line.strip() for line in lines[1:] if line.strip()]
    return smiles if count is None or count >= len(smiles) else random.Random(seed).sample(smiles, count)


def sized_smiles(count: int, low: int, high: int, smiles_file: Optional[Path] = None, moses_dir: Path = MOSES_DIR,
                 seed: int = 0) -> Tuple[List[str], str]:
    """Up to ``count`` molecules of ``low..high`` heavy atoms and their source: from ``smiles_file``,
    else MOSES (when its wheel is in ``moses_dir``), else ZINC-like ones joined from FreeSolv (said)."""
    if smiles_file is not None:
        pool, source = read_smiles(smiles_file), f"SMILES of {Path(smiles_file).name}"
    elif sorted(Path(moses_dir).glob("molsets-*.whl")):
        pool, source = moses_smiles(Path(moses_dir), 12 * count, seed=seed), "MOSES"
    else:
        print(f"no molsets wheel in {moses_dir} and no --smiles: {low}-{high}-atom molecules are joined from FreeSolv "
              f"(pip download --no-deps molsets -d {moses_dir} for real ones)", flush=True)
        return zinc_like_smiles(count, seed=seed, min_atoms=low, max_atoms=high), "FreeSolv joined"
    chosen = [s for s in pool if "." not in s and low <= heavy_atoms(s) <= high][:count]
    if not chosen:
        raise SystemExit(f"no molecule of {low}-{high} heavy atoms in {source}")
    return chosen, source
