"""Featurization speed and memory, in three parts (``--parts``):

* ``dataset``: ``MoleculeDataset`` per relation mode (complete, complete+vn, hops=3, radius=5.0),
  FreeSolv SMILES repeated to ``--molecules`` (default 10,000; radius: ETKDG conformers, on
  ``--radius-molecules``): cold featurization into a fresh cache folder; the cached load (the
  same constructor call served from the cache, with ``torch.load`` and the input's fingerprint
  timed alone); one pass of ``DataLoader(batch_size=128, collate_fn=collate_molecules)``.
  Target: cached load >= 2,000 molecules/s.
* ``store``: ``featurize_to_store`` with 1 and ``--workers`` processes (GRPE-Tiny's featurization,
  shards of 2,000) of FreeSolv repeated to ``--molecules`` (default 50,000) or, with ``--source
  moses``, a sample of MOSES; then opening the memory-mapped store against the same tensors as an
  in-memory cache file, each with one DataLoader pass. Each row runs in a fresh process: peak RSS
  of the main process and of the largest worker (descendants sampled every 0.25 s), CPU time of
  all processes, and the growth of anonymous (heap) and file-backed (memory-mapped) RSS from
  before opening to after the pass. Target: >= 1.8x with 2 workers.
* ``descriptors``: ``compute_features`` molecules/s of ``rdkit2d`` and ``morgan_counts`` with 1 and
  N worker processes on ``--molecules`` MOSES SMILES (default 2,000), for docs/features.md.

MOSES comes from the ``molsets`` wheel, fetched once with ``pip download --no-deps molsets``.

Run:  python -m benchmarks.checks.featurize [--parts dataset store] [--quick]
      python -m benchmarks.checks.featurize --parts store --source moses --molecules 100000
      python -m benchmarks.checks.featurize --parts descriptors --no-docs
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader

from benchmarks.common import check
from benchmarks.common import molecules as M
from benchmarks.common.measure import median, peak_mb, spread, status_mb, time_repeats
from benchmarks.common.report import REPO, environment_line, load_note

from dgl_graphtx.datasets import MoleculeDataset, collate_molecules, featurize_to_store, load_store
from dgl_graphtx.datasets.molecule_dataset import _content_fingerprint
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.featurize.descriptors import compute_features
from dgl_graphtx.models import get_preset
from dgl_graphtx.relation_graph import RelationConfig

TARGET_CACHED_MOL_S, TARGET_SPEEDUP = 2000.0, 1.8
MODES = {
    "complete": (FeaturizerConfig(), RelationConfig("complete")),
    "complete+vn": (FeaturizerConfig(), RelationConfig("complete", virtual_node=True)),
    "hops=3": (FeaturizerConfig(), RelationConfig("hops", hops=3)),
    "radius=5.0": (FeaturizerConfig(coordinates="etkdg"), RelationConfig("radius", radius=5.0)),
}
DATASET_COLUMNS = [("mode", "mode"), ("molecules", "mols"), ("cold_mol_s", "cold mol/s"), ("cold_s", "cold s"),
                   ("load_ms", "cached load ms"), ("load_mol_s", "cached mol/s"), ("meets_target", ">=2000?"),
                   ("torch_load_ms", "(torch.load ms)"), ("fingerprint_ms", "(fingerprint ms)"), ("loader_batch_s", "loader batch/s"),
                   ("loader_mol_s", "loader mol/s"), ("mean_atoms", "atoms/mol"), ("mean_rel_edges", "rel edges/mol"),
                   ("cache_mb", "cache MB")]
STORE_COLUMNS = [("measure", "measure"), ("molecules", "molecules"), ("seconds", "s"), ("mol_s", "mol/s"), ("speedup", "speed-up"),
                 ("cpu_s", "CPU s (all processes)"), ("cpu_ms_mol", "CPU ms/mol"), ("peak_main_mb", "peak RSS main MB"),
                 ("peak_worker_mb", "peak RSS worker MB"), ("anon_mb", "anon RSS MB"), ("file_mb", "file RSS MB"),
                 ("disk_mb", "on disk MB")]
DESCRIPTOR_COLUMNS = [("generator", "generator"), ("workers", "workers"), ("seconds", "seconds"), ("mol_s", "molecules/s"),
                      ("speedup", "speed-up")]


def dataset_row(mode: str, smiles: List[str], args: argparse.Namespace, work: Path) -> Dict[str, object]:
    """Cold featurization, cached load (and its parts) and one loader pass of one relation mode."""
    featurizer, relation = MODES[mode]
    targets = np.asarray(M.repeat_to(M.freesolv_smiles()[1], len(smiles)))

    def build(folder: Path, count: int = len(smiles)) -> MoleculeDataset:
        return MoleculeDataset(smiles[:count], targets[:count], featurizer=featurizer, relation=relation, cache_dir=folder, progress=False)

    build(work / "warm-up", 16)  # imports, RDKit and ETKDG first calls
    cold = []
    for rep in range(args.cold_repeats):
        gc.collect()
        start = time.perf_counter()
        dataset = build(work / f"cold{rep}")
        cold.append(time.perf_counter() - start)
    molecules, atoms, edges = len(dataset), dataset.graphs.num_nodes.double().mean(), dataset.relations.num_edges.double().mean()
    del dataset
    (cache,) = (work / f"cold{args.cold_repeats - 1}").glob("*.pt")
    written = cache.stat().st_mtime_ns
    loaded: List[MoleculeDataset] = []
    load = time_repeats(lambda: loaded.append(build(cache.parent)), args.repeats, setup=loaded.clear)
    if cache.stat().st_mtime_ns != written:
        raise RuntimeError(f"{mode}: the cached load featurized again instead of reading {cache}")
    loader = DataLoader(loaded[-1], batch_size=128, collate_fn=collate_molecules)
    passes = time_repeats(lambda: [None for _ in loader], args.repeats)
    n = len(smiles)
    return {"mode": f"{mode} (ETKDG, {n} mols)" if mode == "radius=5.0" else mode, "molecules": molecules,
            "cold_s": median(cold), "cold_mol_s": n / median(cold), "load_ms": 1e3 * median(load), "load_mol_s": n / median(load),
            "load_spread": spread(load), "meets_target": "yes" if n / median(load) >= TARGET_CACHED_MOL_S else "NO",
            "torch_load_ms": 1e3 * median(time_repeats(lambda: torch.load(cache, weights_only=True), args.repeats)),
            "fingerprint_ms": 1e3 * median(time_repeats(lambda: _content_fingerprint(smiles, targets.reshape(-1, 1)), args.repeats)),
            "loader_batch_s": len(loader) / median(passes), "loader_mol_s": n / median(passes),
            "mean_atoms": float(atoms), "mean_rel_edges": float(edges), "cache_mb": size_mb(cache)}


def dataset_part(args: argparse.Namespace, env: Dict[str, str]) -> None:
    smiles = M.freesolv_smiles()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="featurize-") as work:
        for mode in MODES:
            rows.append(dataset_row(mode, M.repeat_to(smiles, args.radius_molecules if mode == "radius=5.0" else args.molecules),
                                    args, Path(work) / mode))
            print(f"  {rows[-1]['mode']}: cold {rows[-1]['cold_mol_s']:,.0f} mol/s, cached {rows[-1]['load_mol_s']:,.0f} mol/s", flush=True)
    check.finish("featurize_speed", args, env, rows, DATASET_COLUMNS, [
        "#### Featurization and loading speed", "",
        f"Written by `python -m benchmarks.checks.featurize --parts dataset`: {environment_line(env)} FreeSolv SMILES repeated to "
        f"{args.molecules:,} molecules (radius mode: {args.radius_molecules:,}, ETKDG conformers). Cold = featurize and write the "
        "cache; cached load = the same `MoleculeDataset(...)` call served from the cache; loader = one pass of "
        f"`DataLoader(batch_size=128, collate_fn=collate_molecules)`. Target: cached load >= {TARGET_CACHED_MOL_S:,.0f} molecules/s."])


class DescendantSampler:
    """CPU seconds and largest RSS (MiB) of this process's descendants, polled every 0.25 s (pool
    workers are children of the fork server, which ``RUSAGE_CHILDREN`` does not see)."""

    def __init__(self) -> None:
        import psutil

        self.cpu: Dict[int, float] = {}
        self.rss: Dict[int, float] = {}
        self._stop, me = threading.Event(), psutil.Process()

        def poll() -> None:
            while not self._stop.wait(0.25):
                for child in me.children(recursive=True):
                    try:
                        times, memory = child.cpu_times(), child.memory_info()
                    except psutil.Error:  # ended between listing and reading
                        continue
                    self.cpu[child.pid] = times.user + times.system
                    self.rss[child.pid] = max(self.rss.get(child.pid, 0.0), memory.rss / 2**20)

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def store_molecules(args: argparse.Namespace) -> Tuple[List[str], Optional[List[List[float]]]]:
    """The SMILES of ``--source`` and their targets (FreeSolv's; MOSES is unlabelled)."""
    if args.source == "moses":
        return M.moses_smiles(args.moses_dir, args.molecules, seed=0), None
    smiles, targets = M.freesolv_smiles()
    return M.repeat_to(smiles, args.molecules), [[t] for t in M.repeat_to(targets, args.molecules)]


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.is_dir() else path.stat().st_size / 2**20


def store_job(args: argparse.Namespace) -> Dict[str, object]:
    """One store measurement in this (fresh) process."""
    torch.set_num_threads(1)
    preset, path = get_preset("grpe", "tiny"), Path(args.path)

    def cpu_s() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    if args.job == "cold":
        smiles, targets = store_molecules(args)
        sampler, start, cpu = DescendantSampler(), time.perf_counter(), cpu_s()
        featurize_to_store(smiles, path, targets, featurizer=preset.featurizer, relation=preset.relation, workers=args.workers,
                           shard_size=args.shard_size, progress=False)
        seconds = time.perf_counter() - start
        sampler.stop()
        cpu = cpu_s() - cpu + sum(sampler.cpu.values())
        return {"seconds": seconds, "molecules": len(smiles), "cpu_s": cpu, "cpu_ms_mol": 1000 * cpu / len(smiles),
                "peak_main_mb": peak_mb(), "peak_worker_mb": max(sampler.rss.values(), default=float("nan")), "disk_mb": size_mb(path)}
    anon, mapped, start = status_mb("RssAnon"), status_mb("RssFile"), time.perf_counter()  # libraries loaded, no data yet
    if args.job == "load-store":
        dataset = load_store(path)
    else:
        targets = ["expt"] if args.source == "freesolv" else []
        dataset = MoleculeDataset.from_payload(torch.load(path, weights_only=True), preset.featurizer, preset.relation, targets)
    opened = time.perf_counter() - start
    for _ in DataLoader(dataset, batch_size=128, collate_fn=collate_molecules):
        pass
    return {"seconds": opened, "pass_s": time.perf_counter() - start - opened, "molecules": len(dataset), "peak_main_mb": peak_mb(),
            "anon_mb": status_mb("RssAnon") - anon, "file_mb": status_mb("RssFile") - mapped, "disk_mb": size_mb(path)}


def measure_store(job: str, path: Path, args: argparse.Namespace, workers: int = 1) -> Dict[str, object]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "benchmarks.checks.featurize", "--job", job, "--path", str(path), "--workers", str(workers),
               "--molecules", str(args.molecules), "--shard-size", str(args.shard_size), "--source", args.source,
               "--moses-dir", str(args.moses_dir)]
    out = subprocess.run(command, check=True, env=env, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def store_part(args: argparse.Namespace, env: Dict[str, str]) -> None:
    if args.source == "moses":  # fetched once, here, so that no timed run downloads it
        M.moses_wheel(args.moses_dir)
    rows: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="featurize-store-") as work:
        for workers in (1, args.workers):
            result = measure_store("cold", Path(work) / f"store-{workers}", args, workers)
            rows.append({"measure": f"cold, {workers} worker{'s' if workers > 1 else ''}", **result,
                         "mol_s": result["molecules"] / result["seconds"]})
            print(f"  {rows[-1]['measure']}: {rows[-1]['mol_s']:,.0f} mol/s", flush=True)
        rows[1]["speedup"], cpu_ratio = rows[1]["mol_s"] / rows[0]["mol_s"], rows[1]["cpu_s"] / rows[0]["cpu_s"]
        store = Path(work) / "store-1"
        dataset = load_store(store)
        kept = len(dataset)
        torch.save(dataset.payload(), Path(work) / "cache.pt")
        del dataset
        for job, label in (("load-store", "load store (memory-mapped) + 1 DataLoader pass"),
                           ("load-cache", "load in-memory cache (torch.load) + 1 DataLoader pass")):
            result = measure_store(job, store if job == "load-store" else Path(work) / "cache.pt", args)
            rows.append({"measure": label, **result, "mol_s": result["molecules"] / result["seconds"]})
    molecules = rows[0]["molecules"]
    source = f"FreeSolv SMILES repeated to {args.molecules:,} molecules" if args.source == "freesolv" else (
        f"{molecules:,} MOSES training SMILES (random sample, seed 0, of {M.MOSES_SIZE:,}; from the molsets wheel, fetched with "
        "`pip download --no-deps molsets`)")
    print(f"\nspeed-up with {args.workers} workers {rows[1]['speedup']:.2f}x (target {TARGET_SPEEDUP}x); CPU time ratio {cpu_ratio:.2f} "
          f"(1.00: no parallel overhead); kept {kept:,} of {molecules:,} molecules")
    scaled = []
    if args.source == "moses" and molecules < M.MOSES_SIZE:
        scale = M.MOSES_SIZE / molecules
        scaled = ["", f"Scaled to all {M.MOSES_SIZE:,} MOSES molecules at the measured rates: {rows[0]['seconds'] * scale / 3600:.1f} h "
                  f"with 1 worker, {rows[1]['seconds'] * scale / 3600:.1f} h with {args.workers}, about "
                  f"{rows[0]['disk_mb'] * scale / 1024:.1f} GB on disk."]
    title = ("Parallel sharded featurization and the memory-mapped store" if args.source == "freesolv"
             else "Featurizing MOSES (ZINC drug-like SMILES) into the sharded store")
    check.finish("featurize_parallel" if args.source == "freesolv" else "featurize_moses", args, env, rows, STORE_COLUMNS, [
        f"#### {title}", "",
        f"Written by `python -m benchmarks.checks.featurize --parts store --source {args.source}`: {environment_line(env)} {source} "
        f"({kept:,} kept, {molecules - kept:,} invalid), GRPE-Tiny featurization (complete relation graph + virtual node), shards "
        f"of {args.shard_size:,}. Each row runs in a fresh process. Cold = `featurize_to_store(workers=W)` into an empty folder "
        "(1 worker = in the calling process); CPU s = user + system time of the main process and its workers (independent of "
        "other jobs on the machine, unlike the wall-clock speed-up); load = open the dataset (mol/s counts the opening only) "
        "then one `DataLoader(batch_size=128)` pass; anon / file RSS = growth of the process's heap / of its resident "
        "file-backed pages (the memory-mapped arrays, droppable by the kernel) from before opening to after the pass. "
        f"Target: >= {TARGET_SPEEDUP}x with {args.workers} workers on 2 cores. {load_note()}; the machine is shared with other "
        "jobs, so the speed-up is noisy.", *scaled])


def descriptors_part(args: argparse.Namespace, env: Dict[str, str]) -> None:
    smiles = M.moses_smiles(args.moses_dir, args.molecules, seed=0)
    rows: List[Dict[str, object]] = []
    for generator in ("rdkit2d", "morgan_counts"):
        compute_features([generator], smiles[:1])
        for workers in (1, args.workers):
            start = time.perf_counter()
            compute_features([generator], smiles, workers=workers, chunk_size=250)
            seconds = time.perf_counter() - start
            rows.append({"generator": generator, "workers": workers, "seconds": seconds, "mol_s": len(smiles) / seconds})
            rows[-1]["speedup"] = rows[-1]["mol_s"] / rows[-2 if workers > 1 else -1]["mol_s"]
    print(f"{len(smiles):,} MOSES molecules (random sample, seed 0)")
    check.finish("descriptor_speed", args, env, rows, DESCRIPTOR_COLUMNS)


def main(argv: List[str] = None) -> int:
    parser = check.parser(__doc__)
    parser.add_argument("--parts", nargs="+", choices=("dataset", "store", "descriptors"), default=["dataset", "store"])
    parser.add_argument("--molecules", type=int, help="dataset: 10,000; store: 50,000 (moses: 0 = all); descriptors: 2,000")
    parser.add_argument("--radius-molecules", type=int, default=642, help="molecules of the radius mode (ETKDG is slow)")
    parser.add_argument("--repeats", type=int, default=5, help="timed cached loads and loader passes (median)")
    parser.add_argument("--cold-repeats", type=int, default=1, help="cold featurizations per mode (median)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes of the parallel runs")
    parser.add_argument("--source", choices=("freesolv", "moses"), default="freesolv", help="molecules of the store part")
    parser.add_argument("--shard-size", type=int, default=2000, help="molecules per shard of the store")
    parser.add_argument("--moses-dir", type=Path, default=M.MOSES_DIR, help="folder of the molsets wheel")
    parser.add_argument("--job", choices=("cold", "load-store", "load-cache"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        print(json.dumps(store_job(args)))
        return 0
    env, given = check.start(args, "featurize"), args.molecules
    if args.quick:
        args.radius_molecules, args.repeats, args.shard_size = min(args.radius_molecules, 64), min(args.repeats, 2), 100
    for part in args.parts:
        args.molecules = {"dataset": 10_000, "store": 50_000, "descriptors": 2_000}[part] if given is None else given or M.MOSES_SIZE
        args.molecules = min(args.molecules, 256) if args.quick else args.molecules
        {"dataset": dataset_part, "store": store_part, "descriptors": descriptors_part}[part](args, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
