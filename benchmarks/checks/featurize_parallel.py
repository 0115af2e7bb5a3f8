"""Parallel sharded featurization: cold molecules/s with 1 and N worker processes, cached load of
the memory-mapped store vs the in-memory cache, and their memory.

Input (``--source``): ``freesolv``, the embedded FreeSolv SMILES repeated to ``--molecules``
(default 50,000); or ``moses``, a random sample of ``--molecules`` (or ``--molecules 0``: all
1,584,663) of the MOSES training SMILES (ZINC-derived drug-like molecules, MIT licence; Polykovskiy
et al., Front. Pharmacol. 11, 565644 (2020)), read from ``moses/dataset/data/train.csv.gz`` inside
the ``molsets`` wheel, which the script fetches once with ``pip download --no-deps molsets`` into
``--moses-dir`` (never installed: its requirements are pinned and heavy). GRPE-Tiny's
featurization (OGB features, complete relation graph with a virtual node). Each measurement runs
in a fresh Python process, so its peak memory is its own:

* **cold**: ``featurize_to_store(..., workers=W, shard_size=2000)`` into an empty folder: parsing,
  graphs, relation graphs, shards written atomically, then concatenated into the memory-mapped
  arrays. ``workers=1`` featurizes in the calling process (today's single-process speed).
  Peak RSS: the main process, and the largest descendant (worker or fork server); CPU time: all
  processes together (a measure of parallel overhead that other jobs on the machine do not
  distort; descendants are sampled every 0.25 s, so their last fraction of a second may be missed).
* **load**: opening the dataset and one full ``DataLoader(batch_size=128)`` pass over it, for the
  store (``load_store``: memory-mapped) and for the same tensors as an in-memory cache file
  (``torch.load``, what ``MoleculeDataset(cache_dir=...)`` does). Memory is reported as the
  growth, from before opening to after the pass, of the process's anonymous RSS (heap: what
  cannot be paged out) and file-backed RSS (pages of the memory-mapped store, which the kernel
  can drop and re-read).

Target: >= 1.8x cold molecules/s with 2 workers on 2 cores (reported, not asserted).

Run:  .venv/bin/python -m benchmarks.checks.featurize_parallel [--quick] [--workers 2] [--molecules 50000]
      .venv/bin/python -m benchmarks.checks.featurize_parallel --source moses --molecules 100000
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from benchmarks.common import molecules as M  # noqa: E402
from benchmarks.common import report as R  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TARGET_SPEEDUP = 1.8
COLUMNS = [
    ("measure", "measure"), ("molecules", "molecules"), ("seconds", "s"), ("mol_s", "mol/s"), ("speedup", "speed-up"),
    ("cpu_s", "CPU s (all processes)"), ("cpu_ms_mol", "CPU ms/mol"),
    ("peak_main_mb", "peak RSS main MB"), ("peak_worker_mb", "peak RSS worker MB"), ("anon_mb", "anon RSS MB"),
    ("file_mb", "file RSS MB"), ("disk_mb", "on disk MB"),
]


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # kB on Linux


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.is_dir() else path.stat().st_size / 2**20


class ProcessTreeSampler:
    """Polls the CPU time and RSS of this process's descendants (pool workers are children of the
    fork server, so ``RUSAGE_CHILDREN`` does not see them) every ``interval`` seconds."""

    def __init__(self, interval: float = 0.25) -> None:
        import psutil

        self.cpu: Dict[int, float] = {}
        self.rss: Dict[int, float] = {}
        self._stop = threading.Event()
        self._me = psutil.Process()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        import psutil

        while not self._stop.wait(interval):
            for child in self._me.children(recursive=True):
                try:
                    times, memory = child.cpu_times(), child.memory_info()
                except psutil.Error:  # ended between listing and reading
                    continue
                self.cpu[child.pid] = times.user + times.system
                self.rss[child.pid] = max(self.rss.get(child.pid, 0.0), memory.rss / 2**20)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def input_molecules(args: argparse.Namespace) -> Tuple[List[str], Optional[List[List[float]]]]:
    """The SMILES of ``args.source`` (and FreeSolv's targets; MOSES is unlabelled)."""
    if args.source == "moses":
        return M.moses_smiles(Path(args.moses_dir), args.molecules or None, seed=0), None
    smiles, targets = M.freesolv_smiles()
    n = args.molecules
    return M.repeat_to(smiles, n)[:n], [[t] for t in M.repeat_to(targets, n)[:n]]


def describe_input(args: argparse.Namespace) -> str:
    if args.source == "freesolv":
        return f"FreeSolv SMILES repeated to {args.molecules:,} molecules"
    if args.molecules and args.molecules < M.MOSES_SIZE:
        return (f"{args.molecules:,} MOSES training SMILES (random sample, seed 0, of {M.MOSES_SIZE:,}; from the "
                "molsets wheel, fetched with `pip download --no-deps molsets`)")
    return f"all {M.MOSES_SIZE:,} MOSES training SMILES (from the molsets wheel, fetched with `pip download --no-deps molsets`)"


def job(args: argparse.Namespace) -> Dict[str, object]:
    """One measurement in this (fresh) process."""
    import torch
    from torch.utils.data import DataLoader

    from dgl_graphtx.datasets import MoleculeDataset, collate_molecules, featurize_to_store, load_store
    from dgl_graphtx.models import get_preset

    torch.set_num_threads(1)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    preset = get_preset("grpe", "tiny")
    if args.job == "cold":
        smiles, targets = input_molecules(args)
        sampler = ProcessTreeSampler()
        start, cpu0 = time.perf_counter(), _cpu_s(resource.RUSAGE_SELF)
        featurize_to_store(smiles, args.path, targets, featurizer=preset.featurizer, relation=preset.relation,
                           workers=args.workers, shard_size=args.shard_size, progress=False)
        seconds = time.perf_counter() - start
        sampler.stop()
        cpu = _cpu_s(resource.RUSAGE_SELF) - cpu0 + sum(sampler.cpu.values())
        return {"seconds": seconds, "molecules": len(smiles), "cpu_s": cpu, "cpu_ms_mol": 1000 * cpu / len(smiles),
                "peak_main_mb": _peak_mb(resource.RUSAGE_SELF),
                "peak_worker_mb": max(sampler.rss.values()) if sampler.rss else float("nan"),
                "disk_mb": _size_mb(Path(args.path))}
    anon0, file0 = _status_mb("RssAnon"), _status_mb("RssFile")  # libraries loaded, no data yet
    start = time.perf_counter()
    if args.job == "load-store":
        dataset = load_store(args.path)
    else:
        payload = torch.load(args.path, map_location="cpu", weights_only=True)
        dataset = MoleculeDataset.from_payload(payload, preset.featurizer, preset.relation, ["expt"] if args.source == "freesolv" else [])
    opened = time.perf_counter() - start
    for _ in DataLoader(dataset, batch_size=128, collate_fn=collate_molecules):
        pass
    return {"seconds": opened, "pass_s": time.perf_counter() - start - opened, "molecules": len(dataset),
            "peak_main_mb": _peak_mb(resource.RUSAGE_SELF), "anon_mb": _status_mb("RssAnon") - anon0,
            "file_mb": _status_mb("RssFile") - file0,
            "disk_mb": _size_mb(Path(args.path))}


def measure(kind: str, path: Path, args: argparse.Namespace, workers: int = 1) -> Dict[str, object]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "benchmarks.checks.featurize_parallel", "--job", kind, "--path", str(path),
               "--workers", str(workers), "--molecules", str(args.molecules), "--shard-size", str(args.shard_size),
               "--source", args.source, "--moses-dir", str(args.moses_dir)]
    out = subprocess.run(command, check=True, env=env, capture_output=True, text=True, timeout=args.timeout).stdout
    return json.loads(out.strip().splitlines()[-1])


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", choices=("cold", "load-store", "load-cache"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="2,000 molecules; does not update the docs")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the parallel run (default: 2)")
    parser.add_argument("--source", choices=("freesolv", "moses"), default="freesolv",
                        help="freesolv: embedded FreeSolv SMILES repeated; moses: a sample of the MOSES training SMILES")
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses",
                        help="folder holding (or receiving, via pip download --no-deps molsets) the molsets wheel")
    parser.add_argument("--molecules", type=int, default=50_000, help="molecules to featurize (moses: 0 = all 1,584,663)")
    parser.add_argument("--shard-size", type=int, default=2000, help="molecules per shard (default: 2,000; --quick: 250)")
    parser.add_argument("--work-dir", default=None, help="folder for the temporary stores (default: the system temp dir)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecules, args.shard_size = min(args.molecules or M.MOSES_SIZE, 2000), min(args.shard_size, 250)
    if args.csv is None:
        args.csv = R.default_csv("featurize_parallel" if args.source == "freesolv" else "featurize_moses", args.quick)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.job:
        print(json.dumps(job(args)))
        return 0
    import torch

    from dgl_graphtx.datasets import load_store

    env = R.environment()
    R.print_environment(env, "featurize_parallel environment")
    if args.source == "moses":  # fetch the wheel once, here, so that no timed run downloads it
        M.moses_wheel(Path(args.moses_dir))
    print(f"{describe_input(args)}, GRPE-Tiny featurization, shards of {args.shard_size:,}\n")
    base = Path(tempfile.mkdtemp(prefix="featurize_parallel-", dir=args.work_dir))
    rows = []
    try:
        for workers in (1, args.workers):
            store = base / f"store-{workers}"
            result = measure("cold", store, args, workers)
            rows.append({"measure": f"cold, {workers} worker{'s' if workers > 1 else ''}", **result,
                         "mol_s": result["molecules"] / result["seconds"]})
            print(f"  {rows[-1]['measure']}: {rows[-1]['mol_s']:,.0f} mol/s ({result['seconds']:.0f} s)", flush=True)
            if workers > 1:
                shutil.rmtree(store)
        rows[1]["speedup"] = rows[1]["mol_s"] / rows[0]["mol_s"]
        kept = len(load_store(base / "store-1"))
        rows[1]["cpu_ratio"] = rows[1]["cpu_s"] / rows[0]["cpu_s"]
        store = base / "store-1"
        cache = base / "in-memory-cache.pt"
        dataset = load_store(store)
        torch.save({k: v for k, v in dataset.payload().items()}, cache)
        del dataset
        for kind, label in (("load-store", "load store (memory-mapped) + 1 DataLoader pass"),
                            ("load-cache", "load in-memory cache (torch.load) + 1 DataLoader pass")):
            result = measure(kind, store if kind == "load-store" else cache, args)
            rows.append({"measure": label, **result, "mol_s": result["molecules"] / result["seconds"]})
            print(f"  {label}: open {result['seconds'] * 1000:.0f} ms ({rows[-1]['mol_s']:,.0f} mol/s), pass "
                  f"{result['pass_s']:.1f} s, anon RSS {result['anon_mb']:.0f} MB, file RSS {result['file_mb']:.0f} MB", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print()
    print(R.format_table(rows, COLUMNS))
    speedup = rows[1]["speedup"]
    print(f"\nTARGET: >= {TARGET_SPEEDUP}x cold mol/s with {args.workers} workers: {speedup:.2f}x "
          f"({'meets target' if speedup >= TARGET_SPEEDUP else 'BELOW target'})")
    print(f"CPU time of the {args.workers}-worker run / 1-worker run: {rows[1]['cpu_ratio']:.2f} (1.00 = no parallel overhead; "
          f"the wall-clock speed-up can reach {args.workers / rows[1]['cpu_ratio']:.2f}x on {args.workers} otherwise idle cores)")
    molecules = rows[0]["molecules"]
    print(f"kept {kept:,} of {molecules:,} molecules ({molecules - kept:,} skipped as invalid, listed in the store's input_report.csv)")
    lines = []
    if args.source == "moses" and molecules < M.MOSES_SIZE:
        scale = M.MOSES_SIZE / molecules
        lines = [f"Scaled to all {M.MOSES_SIZE:,} MOSES molecules at the measured rates: "
                 f"{rows[0]['seconds'] * scale / 3600:.1f} h with 1 worker, {rows[1]['seconds'] * scale / 3600:.1f} h with "
                 f"{args.workers}, about {rows[0]['disk_mb'] * scale / 1024:.1f} GB on disk."]
        print(lines[0])
    name = "featurize_parallel" if args.source == "freesolv" else "featurize_moses"
    title = "Parallel sharded featurization and the memory-mapped store" if args.source == "freesolv" else \
        "Featurizing MOSES (ZINC drug-like SMILES) into the sharded store"
    R.publish(name, rows, COLUMNS, env, args.csv, [
        f"#### {title}",
        "",
        f"Written by `benchmarks/featurize_parallel.py --source {args.source}`: {R.environment_line(env)} {describe_input(args)} "
        f"({kept:,} kept, {molecules - kept:,} invalid), GRPE-Tiny featurization (complete relation graph + virtual node), shards of "
        f"{args.shard_size:,}. Each row runs in a fresh process. Cold = `featurize_to_store(workers=W)` into an empty folder "
        f"(1 worker = in the calling process); CPU s = user + system time of the main process and its workers "
        f"(independent of other jobs on the machine, unlike the wall-clock speed-up); load = open the dataset (mol/s counts "
        f"the opening only) then one "
        f"`DataLoader(batch_size=128)` pass; anon / file RSS = growth of the process's heap / of its resident "
        f"file-backed pages (the memory-mapped arrays, droppable by the kernel) from before opening to after the pass. "
        f"Target: >= {TARGET_SPEEDUP}x with {args.workers} workers on "
        f"2 cores. {R.load_note()}; the machine is shared with other jobs, so the speed-up is noisy.",
        *([""] + lines if lines else []),
    ], update_docs=not (args.quick or args.no_docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
