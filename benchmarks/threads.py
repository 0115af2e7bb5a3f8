"""Intra-op threads and DataLoader workers on CPU: FreeSolv training throughput on a quiet machine
and with a second training job beside it.

Every configuration (1 or 2 torch intra-op threads x 0, 1 or 2 DataLoader workers) trains the
Gradformer default preset on FreeSolv's 642 molecules (featurized once into a cache) for
``--epochs`` epochs at batch 64, without validation, in a fresh process. Reported per configuration:
the median training-epoch time after the first (warm-up) epoch as graphs/s, and the CPU seconds of
the process and its loader workers per trained graph (the cost on a shared machine, which the wall
clock hides). The loaded condition repeats everything while this script runs one more training
job (1 thread, no workers, the same model) in the background.

Run:  python benchmarks/threads.py [--quick] [--epochs 3] [--no-docs]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402

from dgl_graphtx.datasets import freesolv  # noqa: E402
from dgl_graphtx.models import build_model  # noqa: E402
from dgl_graphtx.runs import RunConfig, resolve_run_config  # noqa: E402
from dgl_graphtx.training import ProcessHooks, TrainConfig, Trainer, seed_everything  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MODEL = ("gradformer", "default")
COLUMNS = [
    ("load", "machine"), ("threads", "intra-op threads"), ("workers", "loader workers"),
    ("epoch_s", "s/epoch (median)"), ("graphs_s", "graphs/s"), ("cpu_ms_graph", "CPU ms/graph"),
    ("loadavg", "load average (1 min)"),
]


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished children (the loader workers of past epochs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class EpochClock(ProcessHooks):
    """Single-process hooks that note wall-clock and CPU time at the end of every epoch."""

    def __init__(self) -> None:
        self.marks = [(time.perf_counter(), _cpu_s())]

    def end_epoch(self, epoch: int, row: Dict[str, float]) -> None:
        self.marks.append((time.perf_counter(), _cpu_s()))


def run_config() -> RunConfig:
    """What ``dgl-graphtx train --model gradformer`` resolves to (featurizer, relation, model, recipe)."""
    return resolve_run_config(overrides=[f"preset.model={MODEL[0]}", f"preset.name={MODEL[1]}", "data.targets=expt"])


def worker(args: argparse.Namespace) -> int:
    """One training job: ``--epochs`` epochs (or endless with ``--background``) over the cached data."""
    import torch

    torch.set_num_threads(args.threads)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    config = run_config()
    dataset = freesolv(as_dataset=True, cache_dir=args.cache, progress=False, featurizer=config.featurizer, relation=config.relation)
    preset = config.as_preset()
    epochs = 10_000 if args.background else args.epochs
    seed_everything(0)
    hooks = EpochClock()
    trainer = Trainer(build_model(preset.model), TrainConfig.from_recipe(
        preset.train, epochs=epochs, batch_size=args.batch_size, warmup_epochs=1, progress=False, device="cpu",
        num_workers=args.workers), hooks=hooks)
    trainer.fit(dataset)
    wall = [b[0] - a[0] for a, b in zip(hooks.marks, hooks.marks[1:])]
    cpu = [b[1] - a[1] for a, b in zip(hooks.marks, hooks.marks[1:])]
    Path(args.result).write_text(json.dumps({"wall": wall, "cpu": cpu, "molecules": len(dataset)}))
    return 0


def _command(args: argparse.Namespace, threads: int, workers: int, result: Path, background: bool = False) -> List[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker", "--threads", str(threads), "--workers", str(workers),
            "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--cache", str(args.cache),
            "--result", str(result)] + (["--background"] if background else [])


def _env(threads: int) -> Dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def measure(args: argparse.Namespace, load: str, threads: int, workers: int, work: Path) -> Dict[str, object]:
    result = work / f"{load}-{threads}-{workers}.json"
    subprocess.run(_command(args, threads, workers, result), check=True, env=_env(threads), timeout=args.timeout)
    data = json.loads(result.read_text())
    timed = slice(1, None) if len(data["wall"]) > 1 else slice(None)  # the first epoch is warm-up
    epoch_s = statistics.median(data["wall"][timed])
    cpu_s = statistics.median(data["cpu"][timed])
    row = {"load": load, "threads": threads, "workers": workers, "epoch_s": epoch_s, "graphs_s": data["molecules"] / epoch_s,
           "cpu_ms_graph": 1000 * cpu_s / data["molecules"], "loadavg": os.getloadavg()[0]}
    print(f"  {load:>6}  {threads} thread(s), {workers} worker(s): {epoch_s:.2f} s/epoch, {row['graphs_s']:.0f} graphs/s, "
          f"{row['cpu_ms_graph']:.2f} CPU ms/graph, load {row['loadavg']:.2f}", flush=True)
    return row


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, default=None, help="featurization cache folder (default: a temporary one)")
    parser.add_argument("--quick", action="store_true", help="2 epochs, threads 1-2 with 0 workers only; does not update the docs")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per configuration; the first is warm-up (default: 3)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per configuration before giving up")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs = 2
    if args.csv is None:
        args.csv = R.default_csv("threads", args.quick)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    env = R.environment()
    R.print_environment(env, "threads and loader workers: FreeSolv, Gradformer default preset, batch 64")
    configs = [(t, w) for t in (1, 2) for w in ((0,) if args.quick else (0, 1, 2))]
    rows: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        args.cache = args.cache or work / "cache"
        config = run_config()
        freesolv(as_dataset=True, cache_dir=args.cache, progress=False, featurizer=config.featurizer,
                 relation=config.relation)  # featurize once, outside the timings
        for t, w in configs:
            rows.append(measure(args, "quiet", t, w, work))
        background = subprocess.Popen(_command(args, 1, 0, work / "background.json", background=True), env=_env(1),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(10)  # let it import and start its epochs
            for t, w in configs:
                rows.append(measure(args, "loaded", t, w, work))
        finally:
            background.kill()
            background.wait()
    print()
    print(R.format_table(rows, COLUMNS))
    intro = [f"Written by `benchmarks/threads.py`: {R.environment_line(env)}",
             f"FreeSolv (642 molecules), {MODEL[0]} `{MODEL[1]}` preset, batch {args.batch_size}, {args.epochs} epochs per "
             "configuration in a fresh process, median epoch after the first; CPU ms/graph counts the process and its loader "
             "workers. *quiet*: no other job started by the script; *loaded*: a second training job (1 thread, no workers) "
             "runs beside it. On a shared machine the other users' load comes on top: the load average column is read at "
             "the end of each configuration."]
    R.publish("threads", rows, COLUMNS, env, args.csv, intro, update_docs=not (args.no_docs or args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
