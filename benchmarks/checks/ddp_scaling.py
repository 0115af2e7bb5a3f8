"""Data-parallel training throughput: 1 process vs N processes (torch DDP, gloo on CPU).

Molecules: ZINC-like molecules with 12-16 heavy atoms (mean ~14, like PCQM4Mv2's 14.1), built
deterministically from FreeSolv fragments (``benchmarks.common.molecules.zinc_like_smiles``), featurized once into
a store. Each configuration trains the same model (default GRPE-Tiny, 4 layers, width 64, 8 heads,
complete relation graphs with a virtual node) for ``--epochs`` epochs at the same *global* batch
size, without validation, and reports the median training-epoch time after the first epoch
(warm-up) and graphs/s.

Configurations: 1 process x 1 thread, and N processes x 1 thread under torchrun
(``python -m torch.distributed.run --standalone``); with ``--threads-row`` also 1 process x N
threads (slow on a busy machine: OpenMP threads wait for each other).

Besides wall-clock throughput, the CPU time of all processes per trained graph is reported: other
jobs on a shared machine distort the wall clock, not the CPU time. The per-graph cost feeds the
PCQM4Mv2 wall-time estimate in docs/scaling.md.

Run:  .venv/bin/python -m benchmarks.checks.ddp_scaling [--quick] [--nproc 2] [--molecules 2000]
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

from benchmarks.common import molecules as M  # noqa: E402
from benchmarks.common import report as R  # noqa: E402

from dgl_graphtx.datasets import featurize_to_store, load_store  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402
from dgl_graphtx.runs.distributed import DistributedConfig, DistributedContext, process_hooks  # noqa: E402
from dgl_graphtx.training import TrainConfig, Trainer, seed_everything  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
COLUMNS = [
    ("config", "configuration"), ("processes", "processes"), ("threads", "threads/process"),
    ("epoch_s", "s/epoch (median)"), ("graphs_s", "graphs/s"), ("speedup", "vs 1 proc x 1 thread"),
    ("cpu_ms_graph", "CPU ms/graph"),
]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(args: argparse.Namespace) -> int:
    """One training process (alone, or one of several under torchrun)."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    with process_hooks(args.device, DistributedConfig(timeout_s=600)) as hooks:
        dataset = load_store(args.worker)
        preset = get_preset(args.model, args.preset)
        seed_everything(0)
        device = str(hooks.device) if isinstance(hooks, DistributedContext) else args.device
        trainer = Trainer(build_model(preset.model), TrainConfig(epochs=args.epochs, batch_size=args.batch_size, warmup_epochs=1,
                                                                 progress=False, device=device), hooks=hooks)
        cpu0 = _cpu_s()
        history = trainer.fit(dataset).history
        cpu = sum(hooks.gather_objects(_cpu_s() - cpu0))  # every process's CPU time
        if hooks.is_main:
            Path(args.result).write_text(json.dumps({"seconds": history["seconds"].tolist(), "molecules": len(dataset), "cpu_s": cpu,
                                                     "world_size": hooks.world_size, "threads": torch.get_num_threads()}))
    return 0


def run_config(name: str, nproc: int, threads: int, store: Path, args: argparse.Namespace, work: Path) -> Dict[str, object]:
    result = work / f"{name}.json"
    job = [str(store), "--result", str(result), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size), "--device", args.device,
           "--model", args.model, "--preset", args.preset, "--threads", str(threads)]
    script = [str(Path(__file__).resolve()), "--worker", *job]
    if nproc > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *script]
    else:
        command = [sys.executable, *script]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, timeout=args.timeout, stdout=subprocess.DEVNULL)
    data = json.loads(result.read_text())
    epoch_s = statistics.median(data["seconds"][1:] or data["seconds"])
    graphs_s = data["molecules"] / epoch_s
    print(f"  {name}: {epoch_s:.2f} s/epoch, {graphs_s:,.0f} graphs/s  (job {time.perf_counter() - start:.0f} s)", flush=True)
    return {"config": name, "processes": nproc, "threads": threads, "epoch_s": epoch_s, "graphs_s": graphs_s,
            "cpu_ms_graph": 1000 * data["cpu_s"] / (data["molecules"] * args.epochs), "molecules": data["molecules"]}


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="400 molecules, 3 epochs; does not update the docs")
    parser.add_argument("--nproc", type=int, default=2, help="processes of the distributed configuration (default: 2)")
    parser.add_argument("--molecules", type=int, default=2000)
    parser.add_argument("--threads-row", action="store_true", help="also measure 1 process with --nproc threads")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per configuration; the first is warm-up (default: 4)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size (default: 64)")
    parser.add_argument("--device", default="cpu", help="cpu (default; backend gloo) or auto / cuda (one GPU per process, nccl)")
    parser.add_argument("--model", default="grpe")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration before giving up")
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecules, args.epochs = min(args.molecules, 400), min(args.epochs, 3)
    if args.csv is None:
        args.csv = R.default_csv("ddp_scaling", args.quick)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    env = R.environment()
    R.print_environment(env, "ddp_scaling environment")
    smiles = M.zinc_like_smiles(args.molecules, seed=0, min_atoms=12, max_atoms=16)
    preset = get_preset(args.model, args.preset)
    with tempfile.TemporaryDirectory(prefix="ddp_scaling-") as tmp:
        work = Path(tmp)
        store = featurize_to_store(smiles, work / "store", [[float(M.heavy_atoms(s))] for s in smiles],
                                   featurizer=preset.featurizer, relation=preset.relation, progress=False)
        print(f"{len(smiles):,} molecules (12-16 heavy atoms), {args.model} {args.preset}, global batch {args.batch_size}, "
              f"{args.epochs} epochs per configuration (first = warm-up)\n")
        rows = [run_config("1 process x 1 thread", 1, 1, store, args, work)]
        if args.threads_row:
            rows.append(run_config(f"1 process x {args.nproc} threads", 1, args.nproc, store, args, work))
        rows.append(run_config(f"{args.nproc} processes (DDP, gloo) x 1 thread", args.nproc, 1, store, args, work))
    base = rows[0]["graphs_s"]
    for row in rows:
        row["speedup"] = row["graphs_s"] / base
    print()
    print(R.format_table(rows, COLUMNS))
    print("\nCPU ms/graph = user + system time of all processes during fit() / (graphs x epochs): the training cost of")
    print("one graph (forward, backward, optimizer, gradient all-reduce), which other jobs on the machine do not distort.")
    R.publish("ddp_scaling", rows, COLUMNS, env, args.csv, [
        "#### Data-parallel training: 1 vs 2 processes (DDP, gloo, CPU)",
        "",
        f"Written by `benchmarks/checks/ddp_scaling.py`: {R.environment_line(env)} {len(smiles):,} ZINC-like molecules with 12-16 "
        f"heavy atoms (PCQM4Mv2-sized), {args.model} {args.preset}, global batch {args.batch_size}, median training-epoch "
        f"time of epochs 2-{args.epochs}, no validation; CPU ms/graph = CPU time of all processes during training / "
        f"(graphs x epochs). {R.load_note()}; the machine is shared, so the ratios are noisy.",
    ], update_docs=not (args.quick or args.no_docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
