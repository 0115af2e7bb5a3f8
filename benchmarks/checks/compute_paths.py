"""Training-step throughput of the two compute paths: DGL's kernels over DGLGraphs and plain
torch ops over GraphTensors (``TrainConfig.compute``), on the CPU or a GPU.

For each model (tiny presets of GRPE, MoireGT 2-D and Gradformer with GINE and GatedGCN), the
same weights train on the same FreeSolv batches (``--batch-size`` molecules) along each path:
forward, masked loss, backward and an AdamW step, timed interleaved (``a b``, then ``b a``) so that
load bursts hit both alike; batches are collated (and, for the tensor path, turned into
GraphTensors with their dense-block geometry) before timing, as DataLoader workers do. Reports the
median step time and graphs/s per path and the ratio ``tensors / dgl`` of graphs/s. On a device
that DGL cannot use (a GPU with a CPU-only DGL build) only the tensor path is timed.

Run:  .venv/bin/python -m benchmarks.checks.compute_paths [--quick] [--device cuda] [--csv PATH]
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, Dict, List

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.common.molecules import freesolv_smiles  # noqa: E402
from benchmarks.common.report import default_csv, environment, environment_line, format_table, print_environment, publish  # noqa: E402
from benchmarks.common.timing import median, spread, time_interleaved  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors, collate_molecules  # noqa: E402
from dgl_graphtx.devices import dgl_cuda_error, resolve_device  # noqa: E402
from dgl_graphtx.models import GPSOptions, build_model, get_preset  # noqa: E402
from dgl_graphtx.training.trainer import masked_loss  # noqa: E402

MODELS = {
    "grpe-tiny": ("grpe", "tiny", {}),
    "moire-2d": ("moire", "2d", {}),
    "gradformer-gine": ("gradformer", "default", {}),
    "gradformer-gatedgcn": ("gradformer", "default", {"gps": GPSOptions(local_model="gatedgcn")}),
}
COLUMNS = [("model", "model"), ("device", "device"), ("dgl_ms", "DGL ms/step"), ("dgl_graphs_s", "DGL graphs/s"),
           ("tensors_ms", "tensors ms/step"), ("tensors_graphs_s", "tensors graphs/s"), ("ratio", "tensors/DGL")]


def training_step(model: torch.nn.Module, batch, optimizer: torch.optim.Optimizer, sync: Callable[[], None]) -> Callable[[], None]:
    def step() -> None:
        out = model(batch.graph, batch.relation_graph)
        loss = masked_loss(model.config.task, out, batch.labels, batch.mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sync()

    return step


def run(args: argparse.Namespace) -> List[Dict[str, object]]:
    device = resolve_device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dgl_usable = device.type == "cpu" or dgl_cuda_error() is None
    smiles, targets = freesolv_smiles()
    rows = []
    for name in args.models:
        model_name, preset_name, overrides = MODELS[name]
        preset = get_preset(model_name, preset_name, **overrides)
        data = MoleculeDataset(smiles[: args.batch_size], torch.tensor(targets[: args.batch_size])[:, None],
                               featurizer=preset.featurizer, relation=preset.relation, progress=False)
        samples = [data[i] for i in range(len(data))]
        torch.manual_seed(args.seed)
        steps = {}
        if dgl_usable:
            model = build_model(preset.model).to(device)
            steps["dgl"] = training_step(model, collate_molecules(samples).to(device),
                                         torch.optim.AdamW(model.parameters(), lr=1e-4), sync)
        torch.manual_seed(args.seed)
        model = build_model(preset.model).to(device)
        steps["tensors"] = training_step(model, collate_molecule_tensors(samples).to(device),
                                         torch.optim.AdamW(model.parameters(), lr=1e-4), sync)
        times = time_interleaved(steps, args.repeats, args.warmup)
        row: Dict[str, object] = {"model": name, "device": str(device), "batch": len(samples)}
        for path in ("dgl", "tensors"):
            if path in times:
                row[f"{path}_ms"] = 1000 * median(times[path])
                row[f"{path}_graphs_s"] = len(samples) / median(times[path])
                row[f"{path}_spread"] = spread(times[path])
        if "dgl" in times:
            row["ratio"] = row["tensors_graphs_s"] / row["dgl_graphs_s"]
        rows.append(row)
        print(format_table([row], COLUMNS), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: batch 16, 1 warm-up, 3 repeats")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ... (default: cpu)")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=128, help="molecules per step")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per path")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps per path (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--csv", type=Path, default=None, help="CSV output; None: benchmarks/results/compute_paths.csv")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md (never with --quick)")
    parser.add_argument("--step-modes", nargs="*", metavar="VARIANT/PRESET", default=None,
                        help="also rows of the step modes (eager / no-sync / captured / compiled, step_modes.py) "
                             "of these presets on MolHIV-sized molecules (none given: step_modes.py's four)")
    args = parser.parse_args()
    if args.quick:
        args.batch_size, args.warmup, args.repeats = 16, 1, 3
    torch.set_num_threads(args.threads)
    env = environment()
    print_environment(env, "compute paths")
    rows = run(args)
    on_gpu = torch.device(args.device).type != "cpu"
    section = "compute_paths_gpu" if on_gpu else "compute_paths"  # one table per kind of device
    intro = [f"#### Compute paths{' on a GPU' if on_gpu else ''} (`benchmarks/checks/compute_paths.py`)", "",
             f"Training steps (forward, loss, backward, AdamW) of the tiny presets on one batch of {args.batch_size} "
             "FreeSolv molecules along each compute path (`TrainConfig.compute`: `dgl` or `tensors`); median of "
             f"{args.repeats} interleaved repeats. {environment_line(env)}"]
    publish(section, rows, COLUMNS, env, args.csv or default_csv("compute_paths", args.quick), intro,
            update_docs=not (args.quick or args.no_docs))
    if args.step_modes is not None:
        from benchmarks.checks import step_modes  # the step modes' own rows, on the same device

        step_modes.main(["--device", args.device, "--batch-size", str(min(args.batch_size, 32)),
                         *(["--presets", *args.step_modes] if args.step_modes else []),
                         *(["--batches", "2", "--repeats", "2"] if args.quick else [])])


if __name__ == "__main__":
    main()
