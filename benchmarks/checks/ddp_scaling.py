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
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

from benchmarks.common import check
from benchmarks.common import molecules as M
from benchmarks.common.report import REPO, environment_line, load_note

from dgl_graphtx.datasets import featurize_to_store, load_store
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.runs.distributed import DistributedConfig, DistributedContext, process_hooks
from dgl_graphtx.training import TrainConfig, Trainer, seed_everything

COLUMNS = [("config", "configuration"), ("processes", "processes"), ("threads", "threads/process"), ("epoch_s", "s/epoch (median)"),
           ("graphs_s", "graphs/s"), ("speedup", "vs 1 proc x 1 thread"), ("cpu_ms_graph", "CPU ms/graph")]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(args: argparse.Namespace) -> int:
    """One training process (alone, or one of several under torchrun)."""
    import torch

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
    script = ["-m", "benchmarks.checks.ddp_scaling", "--worker", str(store), "--result", str(result), "--epochs", str(args.epochs),
              "--batch-size", str(args.batch_size), "--device", args.device, "--model", args.model, "--preset", args.preset,
              "--threads", str(threads)]
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", "--no-python", sys.executable] * (nproc > 1)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, *launch, *script], check=True, env=env, timeout=args.timeout, stdout=subprocess.DEVNULL)
    data = json.loads(result.read_text())
    epoch_s = statistics.median(data["seconds"][1:] or data["seconds"])
    print(f"  {name}: {epoch_s:.2f} s/epoch, {data['molecules'] / epoch_s:,.0f} graphs/s", flush=True)
    return {"config": name, "processes": nproc, "threads": threads, "epoch_s": epoch_s, "graphs_s": data["molecules"] / epoch_s,
            "cpu_ms_graph": 1000 * data["cpu_s"] / (data["molecules"] * args.epochs), "molecules": data["molecules"]}


def main(argv: Optional[List[str]] = None) -> int:
    parser = check.parser(__doc__)
    parser.add_argument("--worker", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--nproc", type=int, default=2, help="processes of the distributed configuration (default: 2)")
    parser.add_argument("--molecules", type=int, default=2000)
    parser.add_argument("--threads-row", action="store_true", help="also measure 1 process with --nproc threads")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per configuration; the first is warm-up (default: 4)")
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size (default: 64)")
    parser.add_argument("--device", default="cpu", help="cpu (default; backend gloo) or auto / cuda (one GPU per process, nccl)")
    parser.add_argument("--model", default="grpe")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration before giving up")
    args = parser.parse_args(argv)
    if args.worker:
        check.start(args, "ddp_scaling worker")
        return worker(args)
    if args.quick:
        args.molecules, args.epochs = min(args.molecules, 400), min(args.epochs, 3)
    env = check.start(args, "ddp_scaling")
    smiles = M.zinc_like_smiles(args.molecules, seed=0, min_atoms=12, max_atoms=16)
    preset = get_preset(args.model, args.preset)
    with tempfile.TemporaryDirectory(prefix="ddp_scaling-") as tmp:
        store = featurize_to_store(smiles, Path(tmp) / "store", [[float(M.heavy_atoms(s))] for s in smiles],
                                   featurizer=preset.featurizer, relation=preset.relation, progress=False)
        configs = [("1 process x 1 thread", 1, 1)] + [(f"1 process x {args.nproc} threads", 1, args.nproc)] * args.threads_row
        rows = [run_config(name, nproc, threads, store, args, Path(tmp))
                for name, nproc, threads in configs + [(f"{args.nproc} processes (DDP, gloo) x 1 thread", args.nproc, 1)]]
    for row in rows:
        row["speedup"] = row["graphs_s"] / rows[0]["graphs_s"]
    print("\nCPU ms/graph = user + system time of all processes during fit() / (graphs x epochs): the training cost of one graph "
          "(forward, backward, optimizer, gradient all-reduce), which other jobs on the machine do not distort.")
    check.finish("ddp_scaling", args, env, rows, COLUMNS, [
        "#### Data-parallel training: 1 vs 2 processes (DDP, gloo, CPU)", "",
        f"Written by `benchmarks/checks/ddp_scaling.py`: {environment_line(env)} {len(smiles):,} ZINC-like molecules with 12-16 heavy "
        f"atoms (PCQM4Mv2-sized), {args.model} {args.preset}, global batch {args.batch_size}, median training-epoch time of epochs "
        f"2-{args.epochs}, no validation; CPU ms/graph = CPU time of all processes during training / (graphs x epochs). "
        f"{load_note()}; the machine is shared, so the ratios are noisy."])
    return 0


if __name__ == "__main__":
    sys.exit(main())
