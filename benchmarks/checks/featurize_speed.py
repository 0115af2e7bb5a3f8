"""Featurization, cached-load and DataLoader throughput of MoleculeDataset, per relation mode.

For each relation mode (complete, complete+vn, hops=3, radius=5.0) this measures, on the embedded
FreeSolv SMILES repeated (and cut) to 10,000 molecules:

* cold featurization: ``MoleculeDataset(smiles, targets, featurizer=..., relation=...,
  cache_dir=<fresh temp dir>, progress=False)``; parsing, graphs, relation graphs, packing and
  writing the cache file;
* cached load: the same constructor call again, served from that cache. This is what a user
  waits for on every later run, so it includes everything the constructor does besides the
  ``torch.load`` (notably the SHA-256 fingerprint of the input that keys the cache). Breakdown
  columns show the ``torch.load`` of the cache file and the fingerprint alone;
* one full pass of ``DataLoader(ds, batch_size=128, collate_fn=collate_molecules)`` over the
  cached dataset (batches/s and molecules/s).

``radius=5.0`` needs 3-D coordinates (``FeaturizerConfig(coordinates="etkdg")``); ETKDG costs
tens of milliseconds per molecule, so that mode runs on a smaller subset (FreeSolv itself, 642
molecules, by default), as the table says.

Target: >= 2,000 molecules/s for the cached load on 2 cores (reported, not asserted).

Run:  .venv/bin/python -m benchmarks.checks.featurize_speed [--quick] [--csv PATH]
"""
from __future__ import annotations

import argparse
import gc
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch.utils.data import DataLoader

from benchmarks.common import molecules as M  # noqa: E402
from benchmarks.common import report as R  # noqa: E402
from benchmarks.common import timing as T  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, collate_molecules  # noqa: E402
from dgl_graphtx.featurize import FeaturizerConfig  # noqa: E402
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402

TARGET_CACHED_MOL_PER_S = 2000.0

MODES = {
    "complete": (FeaturizerConfig(), RelationConfig("complete")),
    "complete+vn": (FeaturizerConfig(), RelationConfig("complete", virtual_node=True)),
    "hops=3": (FeaturizerConfig(), RelationConfig("hops", hops=3)),
    "radius=5.0": (FeaturizerConfig(coordinates="etkdg"), RelationConfig("radius", radius=5.0)),
}
SLOW_MODES = {"radius=5.0"}  # ETKDG conformers: measured on the smaller subset


def _fingerprint_fn():
    """The dataset's private input-hash function, if this library version still has it."""
    try:
        from dgl_graphtx.datasets.molecule_dataset import _content_fingerprint
    except ImportError:
        return None
    return _content_fingerprint


def measure_mode(name: str, smiles: List[str], targets: List[float], args, work_dir: Path) -> Dict[str, object]:
    featurizer, relation = MODES[name]
    kwargs = dict(featurizer=featurizer, relation=relation, progress=False)
    row: Dict[str, object] = {"mode": name, "molecules_in": len(smiles)}

    # warm-up (untimed): imports, RDKit / dgllife / ETKDG first-call costs
    MoleculeDataset(smiles[:16], targets[:16], cache_dir=work_dir / f"warmup-{name}", **kwargs)

    # cold featurization into fresh cache dirs
    cold_times, cache_dir = [], None
    for rep in range(args.cold_repeats):
        cache_dir = work_dir / f"{name}-cold{rep}"
        gc.collect()
        start = time.perf_counter()
        ds = MoleculeDataset(smiles, targets, cache_dir=cache_dir, **kwargs)
        cold_times.append(time.perf_counter() - start)
        if rep + 1 < args.cold_repeats:
            del ds
    cache_files = sorted(cache_dir.glob("*.pt"))
    if len(cache_files) != 1:
        raise RuntimeError(f"expected one cache file in {cache_dir}, found {cache_files}")
    cache_file = cache_files[0]
    mtime = cache_file.stat().st_mtime_ns
    row.update(
        molecules=len(ds),
        skipped=ds.report.num_skipped,
        cold_reps=args.cold_repeats,
        cold_s=T.median(cold_times),
        cold_mol_s=len(smiles) / T.median(cold_times),
        mean_atoms=float(ds.graphs.num_nodes.double().mean()),
        mean_rel_edges=float(ds.relations.num_edges.double().mean()),
        cache_mb=cache_file.stat().st_size / 2**20,
    )
    del ds
    gc.collect()

    # cached load: the same constructor call again (one untimed warm-up load first)
    loaded: List[MoleculeDataset] = []
    load_times = T.time_repeats(
        lambda: loaded.append(MoleculeDataset(smiles, targets, cache_dir=cache_dir, **kwargs)),
        repeats=args.repeats,
        warmup=1,
        setup=loaded.clear,
    )
    if cache_file.stat().st_mtime_ns != mtime or len(list(cache_dir.glob("*.pt"))) != 1:
        raise RuntimeError(f"{name}: the cached load re-featurized instead of reading {cache_file}")
    ds = loaded[-1]
    row.update(
        load_reps=args.repeats,
        load_ms=1e3 * T.median(load_times),
        load_mol_s=len(smiles) / T.median(load_times),
        load_spread=T.spread(load_times),
    )
    row["meets_target"] = "yes" if row["load_mol_s"] >= TARGET_CACHED_MOL_PER_S else "NO"

    # breakdown of the cached load: torch.load of the file alone, fingerprint alone
    torch_load = T.time_repeats(
        lambda: torch.load(cache_file, map_location="cpu", weights_only=True), repeats=args.repeats, warmup=1
    )
    row["torch_load_ms"] = 1e3 * T.median(torch_load)
    fingerprint = _fingerprint_fn()
    if fingerprint is not None:
        import numpy as np

        raw = np.asarray(targets, dtype=np.float64).reshape(-1, 1)
        row["fingerprint_ms"] = 1e3 * T.median(
            T.time_repeats(lambda: fingerprint(smiles, raw), repeats=args.repeats, warmup=1)
        )
    else:
        row["fingerprint_ms"] = float("nan")

    # one full DataLoader pass over the cached dataset
    loader = DataLoader(ds, batch_size=args.batch_size, collate_fn=collate_molecules)
    num_batches = len(loader)

    def one_pass() -> None:
        for _ in loader:
            pass

    pass_times = T.time_repeats(one_pass, repeats=args.repeats, warmup=1)
    row.update(
        batches=num_batches,
        loader_s=T.median(pass_times),
        loader_batch_s=num_batches / T.median(pass_times),
        loader_mol_s=len(ds) / T.median(pass_times),
        loader_spread=T.spread(pass_times),
    )
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    return row


COLUMNS = [
    ("mode", "mode"),
    ("molecules", "mols"),
    ("cold_mol_s", "cold mol/s"),
    ("cold_s", "cold s"),
    ("load_ms", "cached load ms"),
    ("load_mol_s", "cached mol/s"),
    ("meets_target", ">=2000?"),
    ("torch_load_ms", "(torch.load ms)"),
    ("fingerprint_ms", "(fingerprint ms)"),
    ("loader_batch_s", "loader batch/s"),
    ("loader_mol_s", "loader mol/s"),
    ("mean_atoms", "atoms/mol"),
    ("mean_rel_edges", "rel edges/mol"),
    ("cache_mb", "cache MB"),
]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="MoleculeDataset throughput per relation mode: cold featurization, cached load "
        "and DataLoader pass, on FreeSolv SMILES repeated to N molecules.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 256 molecules (64 for radius), 2 repeats, 1 torch thread unless --threads is given")
    parser.add_argument(
        "--molecules", type=int, default=10_000,
        help="molecules per mode: FreeSolv repeated and cut to this many (its content hash differs from "
        "FreeSolv's, so it is a dataset of its own for the cache)",
    )
    parser.add_argument(
        "--radius-molecules", type=int, default=642, help="molecules for the radius mode (ETKDG is slow): FreeSolv cut (or repeated) to N"
    )
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES), help="relation modes to run")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of cached load and loader pass (median reported)")
    parser.add_argument(
        "--cold-repeats", type=int, default=1,
        help="cold featurizations per mode (each into a fresh cache dir; one pass over 10k molecules "
        "is already ~30 s on 2 cores); use 3 on a quiet machine for a median",
    )
    parser.add_argument("--batch-size", type=int, default=128, help="DataLoader batch size")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads; None: torch's choice (all cores)")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="parent of the temporary cache dirs (removed at the end); None: the system temp dir")
    parser.add_argument("--csv", type=Path, default=None,
                        help="CSV output; None: benchmarks/results/featurize_speed.csv (-quick.csv with --quick)")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md (never updated with --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecules = min(args.molecules, 256)
        args.radius_molecules = min(args.radius_molecules, 64)
        args.repeats = min(args.repeats, 2)
        args.cold_repeats = 1
        args.threads = args.threads or 1  # fast and steady on a busy machine; it is a smoke test
    if args.csv is None:
        args.csv = R.default_csv("featurize_speed", args.quick)
    if min(args.repeats, args.cold_repeats, args.molecules, args.radius_molecules) < 1:
        parser.error("counts and repeats must be >= 1")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    env = R.environment()
    R.print_environment(env, "featurize_speed environment")

    smiles, targets = M.freesolv_smiles()
    big_smiles = M.repeat_to(smiles, args.molecules)[: args.molecules]
    big_targets = M.repeat_to(targets, args.molecules)[: args.molecules]
    print(
        f"FreeSolv: {len(smiles)} SMILES, repeated and cut to {len(big_smiles):,} molecules "
        f"(radius mode: {args.radius_molecules:,}); "
        f"cold repeats {args.cold_repeats}, cached-load / loader repeats {args.repeats} (median), "
        f"DataLoader batch size {args.batch_size}\n"
    )

    rows = []
    base = Path(tempfile.mkdtemp(prefix="featurize_speed-", dir=args.work_dir))
    try:
        for name in args.modes:
            if name in SLOW_MODES:
                n = args.radius_molecules
                mode_smiles = M.repeat_to(smiles, n)[:n]
                mode_targets = M.repeat_to(targets, n)[:n]
            else:
                mode_smiles, mode_targets = big_smiles, big_targets
            start = time.perf_counter()
            row = measure_mode(name, mode_smiles, mode_targets, args, base / "work")
            if name in SLOW_MODES:
                row["mode"] = f"{name} (ETKDG, {len(mode_smiles)} mols)"
            rows.append(row)
            print(
                f"  {row['mode']}: cold {row['cold_mol_s']:,.0f} mol/s, cached load {row['load_mol_s']:,.0f} mol/s, "
                f"loader {row['loader_mol_s']:,.0f} mol/s  ({time.perf_counter() - start:.1f} s)",
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print()
    print(R.format_table(rows, COLUMNS))
    print()
    print("cold = featurize + write the cache into a fresh dir; cached load = the same MoleculeDataset(...)")
    print("call served from the cache (fingerprints the input, torch.load, unpacks); (torch.load ms) and")
    print("(fingerprint ms) are parts of it timed alone. loader = one full pass of DataLoader(ds,")
    print(f"batch_size={args.batch_size}, collate_fn=collate_molecules). Medians; mol/s counts input rows.")
    print()
    print(f"TARGET: cached load >= {TARGET_CACHED_MOL_PER_S:,.0f} molecules/s on 2 cores (torch threads: {torch.get_num_threads()})")
    for row in rows:
        verdict = "meets target" if row["meets_target"] == "yes" else "BELOW target"
        print(f"  {row['mode']:<28} {row['load_mol_s']:>12,.0f} mol/s  {verdict}")
    R.publish("featurize_speed", rows, COLUMNS, env, args.csv, [
        "#### Featurization and loading speed",
        "",
        f"Written by `benchmarks/checks/featurize_speed.py`: {R.environment_line(env)} FreeSolv SMILES repeated to "
        f"{args.molecules:,} molecules (radius mode: {args.radius_molecules:,}, ETKDG conformers). Cold = featurize "
        "and write the cache; cached load = the same `MoleculeDataset(...)` call served from the cache; loader = one "
        f"pass of `DataLoader(batch_size={args.batch_size}, collate_fn=collate_molecules)`. Target: cached load >= "
        f"{TARGET_CACHED_MOL_PER_S:,.0f} molecules/s.",
    ], update_docs=not (args.quick or args.no_docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
