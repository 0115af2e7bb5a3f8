"""Shared helpers of the benchmark scripts: molecules, timing, environment, tables and CSV files.

Not part of the package; imported by ``featurize_speed.py`` and ``attention_speed.py`` when they
are run as ``python benchmarks/<name>.py`` (their folder is then first on ``sys.path``).
"""
from __future__ import annotations

import csv
import datetime
import os
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from rdkit import Chem, rdBase

import dgl_graphtx  # noqa: F401  (selects DGL's PyTorch backend before dgl is imported)
import dgl
from dgl_graphtx.datasets import freesolv

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------------------------------------
# Molecules
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------
def time_repeats(fn: Callable[[], object], repeats: int, warmup: int = 1, setup: Optional[Callable[[], object]] = None) -> List[float]:
    """Seconds of ``repeats`` timed calls of ``fn`` after ``warmup`` untimed ones.

    ``setup`` (if given) runs before every call, warm-up included, outside the timed region.
    """
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def time_interleaved(
    fns: Dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> Dict[str, List[float]]:
    """Like :func:`time_repeats` for several functions at once, their timed calls interleaved
    (``a b``, then ``b a``, ...), so that load bursts from other processes hit all of them alike."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for rep in range(repeats):
        for name in names if rep % 2 == 0 else reversed(names):
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """Relative spread ``(max - min) / median`` of repeated timings (a noise indicator)."""
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else float("nan")


# ---------------------------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------------------------
def environment() -> Dict[str, str]:
    """Versions, thread counts and the machine's load, for the report header and the CSV."""
    import rdkit

    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "dgl": dgl.__version__,
        "rdkit": rdkit.__version__,
        "dgl_graphtx": dgl_graphtx.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "torch_interop_threads": str(torch.get_num_interop_threads()),
        "cpu_count": str(os.cpu_count()),
        "cpu_affinity": str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "?",
        "machine": f"{platform.system()} {platform.machine()} {platform.processor() or ''}".strip(),
    }
    if hasattr(os, "getloadavg"):
        info["loadavg_1m"] = f"{os.getloadavg()[0]:.2f}"
    return info


def print_environment(info: Dict[str, str], title: str) -> None:
    print(f"== {title}")
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"  {key:<{width}}  {value}")
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        cpus = int(info.get("cpu_affinity", "0")) if info.get("cpu_affinity", "?").isdigit() else os.cpu_count() or 1
        if load > 0.5 * cpus:
            print(f"  NOTE: 1-minute load average {load:.2f} on {cpus} CPUs: other work is running, timings are noisy")
            if torch.get_num_threads() > 1:
                print(
                    "  NOTE: with busy cores, every multi-threaded torch op can stall in OpenMP barriers\n"
                    "        (milliseconds each, even for tiny tensors); compare with --threads 1"
                )
    print()


def load_note() -> str:
    return f"1-minute load average at the end: {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------
def format_table(rows: List[Dict[str, object]], columns: List[Tuple[str, str]]) -> str:
    """Plain-text table; ``columns`` are ``(key, header)``; floats shown with 3 significant-ish digits."""

    def fmt(value: object) -> str:
        if isinstance(value, float):
            if value != value:  # NaN
                return "-"
            if value != 0 and abs(value) < 0.01:
                return f"{value:.1e}"
            if abs(value) >= 100:
                return f"{value:,.0f}"
            if abs(value) >= 10:
                return f"{value:.1f}"
            return f"{value:.2f}"
        if isinstance(value, int) and not isinstance(value, bool):
            return f"{value:,}"
        return str(value)

    cells = [[fmt(r.get(key, "")) for key, _ in columns] for r in rows]
    headers = [h for _, h in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    left = [isinstance(rows[0].get(key), str) if rows else True for key, _ in columns]

    def line(values: List[str]) -> str:
        return "  ".join(v.ljust(w) if lft else v.rjust(w) for v, w, lft in zip(values, widths, left))

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(c) for c in cells]
    return "\n".join(out)


def default_csv(name: str, quick: bool) -> Path:
    return RESULTS_DIR / (f"{name}-quick.csv" if quick else f"{name}.csv")


def write_csv(path: Path, rows: List[Dict[str, object]], env: Dict[str, str]) -> Path:
    """Write ``rows`` (plus the environment as extra columns on every row) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [{**row, **{f"env_{k}": v for k, v in env.items()}} for row in rows]
    fields: List[str] = []
    for record in records:
        fields += [k for k in record if k not in fields]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    return path
