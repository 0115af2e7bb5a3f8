"""Training steps of the presets, four measures (``--measure``, several at once):

* ``paths`` (default): steps (forward, masked loss, backward, AdamW) of the tiny presets (GRPE,
  MoireGT 2-D, Gradformer with GINE and with GatedGCN) on one batch of ``--batch-size`` FreeSolv
  molecules along each compute path (``TrainConfig.compute``: DGL's kernels over DGLGraphs, plain
  tensors over GraphTensors, batches collated before timing as loader workers do), timed
  interleaved; median ms/step, graphs/s and tensors/DGL. Where DGL cannot use the device (a GPU
  with a CPU-only DGL build) the tensor path alone. Its docs section: ``compute_paths``
  (``compute_paths_gpu`` on a GPU) of docs/benchmarks.md.
* ``modes``: graphs/s of each ``--presets`` step four ways: eager as before (the loss and the
  gradient norm read back every step), eager without host syncs (``TrainStep``), captured in a
  CUDA graph per padded shape (``CapturedStep``, CUDA only), compiled (``CompiledStep``); the same
  weights on the same ``--batches`` batches of 32 MolHIV-sized molecules (padded size buckets for
  the captured and compiled ways, as the trainer deals them), warmed up (capture and compile
  seconds reported), then timed with the device synchronised after each pass.
* ``speed``: training and inference graphs/s and peak device memory of every variant at its
  papers' sizes (``--presets``, default the eight below) on MolHIV-sized (24-27 heavy atoms) and
  QM9-sized (8-9, FreeSolv) molecules, on the tensor path at each preset's recipe batch size:
  ``--batches`` distinct batches moved to the device first, cycled through ``--warmup`` untimed
  and ``--repeats`` timed training steps (forward, loss, backward, AdamW) and inference passes,
  the device synchronised in every timed call; peak memory is ``torch.cuda.max_memory_allocated``.
  Its docs section: ``gpu_speed`` of docs/benchmarks.md (only from a GPU).
* ``ops``: ATen operations and host syncs of one warm step (the second) of each preset, split
  into forward + loss, backward and optimizer with ``torch.optim.AdamW(foreach=True)`` (how the
  table in docs/scaling.md counts them), and of the trainer's own step (fused AdamW, gradient
  norm, finiteness decided on the device): counts, not times, so run it anywhere.

MolHIV-sized molecules (20-30 heavy atoms; speed: 24-27): ``--smiles FILE``, else MOSES from the
molsets wheel, else ZINC-like ones joined from FreeSolv (said in the table).

Run:  python -m benchmarks.checks.training_steps [--device cuda] [--quick]
      python -m benchmarks.checks.training_steps --measure modes --device cuda --no-docs
      python -m benchmarks.checks.training_steps --measure speed --device cuda --smiles MOSES_20K.smi --warmup 5 --repeats 20
      python -m benchmarks.checks.training_steps --measure ops --presets all --no-docs
"""
from __future__ import annotations

import argparse
import gc
import itertools
import math
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import torch

from benchmarks.checks.authors import AuthorsUnavailable, build_authors_network, is_paired
from benchmarks.common import check
from benchmarks.common.measure import median, spread, time_interleaved, time_repeats
from benchmarks.common.molecules import freesolv_smiles, heavy_atoms, repeat_to, sized_smiles
from benchmarks.common.report import environment_line

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors, collate_molecules
from dgl_graphtx.datasets.buckets import PaddedCollate, SizeBuckets, molecule_sizes
from dgl_graphtx.devices import dgl_cuda_error, resolve_device
from dgl_graphtx.models import GPSOptions, Preset, build_model, get_preset
from dgl_graphtx.models.presets import PRESETS
from dgl_graphtx.testing import OperationCounter
from dgl_graphtx.training.adamw import adamw
from dgl_graphtx.training.fast_steps import CapturedStep, CompiledStep
from dgl_graphtx.training.train_step import TrainStep
from dgl_graphtx.training.trainer import masked_loss

PATH_MODELS = {"grpe-tiny": ("grpe", "tiny", {}), "moire-2d": ("moire", "2d", {}), "gradformer-gine": ("gradformer", "default", {}),
               "gradformer-gatedgcn": ("gradformer", "default", {"gps": GPSOptions(local_model="gatedgcn")})}
PRESETS_TIMED = ["gradformer/molhiv", "gradformer/default", "grpe/tiny", "moire/2d"]
PRESETS_SPEED = ["grpe/tiny", "grpe/standard", "moire/2d", "moire/qm9", "gradformer/default", "gradformer/molhiv", "vanilla/tiny",
                 "graphormer/tiny"]
MODES = ("eager", "no-sync", "captured", "compiled")
PATH_COLUMNS = [("model", "model"), ("device", "device"), ("dgl_ms", "DGL ms/step"), ("dgl_graphs_s", "DGL graphs/s"),
                ("tensors_ms", "tensors ms/step"), ("tensors_graphs_s", "tensors graphs/s"), ("ratio", "tensors/DGL")]
MODE_COLUMNS = [("preset", "preset"), ("mode", "step"), ("batch", "batch"), ("ms_step", "ms/step"), ("graphs_s", "graphs/s"),
                ("setup_s", "capture/compile s"), ("note", "")]
SPEED_COLUMNS = [("model", "model"), ("config", "preset"), ("molecules", "molecules"), ("batch", "batch"), ("params", "params"),
                 ("train", "train graphs/s"), ("infer", "inference graphs/s"), ("peak_mib", "peak MiB"),
                 ("train_ratio", "train ours/authors"), ("infer_ratio", "inference ours/authors")]
OPS_COLUMNS = [("preset", "preset"), ("ops", "ops"), ("syncs", "syncs"), ("forward", "forward"), ("backward", "backward"),
               ("optimizer", "optimizer"), ("trainer_ops", "trainer ops"), ("trainer_syncs", "trainer syncs")]


def dataset(preset: Preset, smiles: Sequence[str]) -> MoleculeDataset:
    """``smiles`` featurized for ``preset``, with random labels of its task."""
    labels = torch.randn(len(smiles), preset.model.num_tasks)
    labels = labels if preset.model.task == "regression" else (labels > 0).float()
    return MoleculeDataset(list(smiles), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)


def loss_of(preset: Preset) -> Callable:
    def loss(output, batch, rows=None):
        return masked_loss(preset.model.task, output[:, : batch.labels.shape[1]], batch.labels, batch.mask)

    return loss


def legacy_step(model: torch.nn.Module, loss: Callable) -> Callable:
    """The step as the trainer ran it before issue 43: per-parameter AdamW, the loss and the
    gradient norm read back each step, a clipping call with clipping off."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(batch) -> float:
        value = loss(model(batch.graph, batch.relation_graph), batch)
        optimizer.zero_grad(set_to_none=True)
        if not bool(torch.isfinite(value.detach())):
            return math.nan
        value.backward()
        if bool(torch.isfinite(torch.nn.utils.clip_grad_norm_(list(model.parameters()), math.inf))):
            optimizer.step()
        return float(value.detach())

    return step


def trainer_step(model: torch.nn.Module, preset: Preset, device: torch.device) -> TrainStep:
    return TrainStep(model, loss_of(preset), list(model.parameters()), adamw([{"params": list(model.parameters())}], 1e-4, 0.0, device))


def time_paths(args: argparse.Namespace, device: torch.device) -> List[Dict[str, object]]:
    """The ``paths`` rows: each tiny model's step along DGL's kernels and along plain tensors."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    smiles, targets = freesolv_smiles()
    rows = []
    for name, (variant, preset_name, overrides) in PATH_MODELS.items():
        preset = get_preset(variant, preset_name, **overrides)
        data = MoleculeDataset(smiles[: args.batch_size], torch.tensor(targets[: args.batch_size])[:, None],
                               featurizer=preset.featurizer, relation=preset.relation, progress=False)
        samples = [data[i] for i in range(len(data))]
        steps = {}
        for path, collate in (("dgl", collate_molecules), ("tensors", collate_molecule_tensors)):
            if path == "dgl" and device.type != "cpu" and dgl_cuda_error() is not None:
                continue
            torch.manual_seed(args.seed)
            model, batch = build_model(preset.model).to(device), collate(samples).to(device)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

            def step(model=model, batch=batch, optimizer=optimizer) -> None:
                masked_loss(preset.model.task, model(batch.graph, batch.relation_graph), batch.labels, batch.mask).backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                sync()

            steps[path] = step
        times = time_interleaved(steps, args.repeats, args.warmup)
        row: Dict[str, object] = {"model": name, "device": str(device), "batch": len(samples)}
        for path, found in times.items():
            row.update({f"{path}_ms": 1000 * median(found), f"{path}_graphs_s": len(samples) / median(found),
                        f"{path}_spread": spread(found)})
        if "dgl" in times:
            row["ratio"] = row["tensors_graphs_s"] / row["dgl_graphs_s"]
        rows.append(row)
        print(rows[-1], flush=True)
    return rows


def prepared(preset: Preset, smiles: Sequence[str], batch_size: int, batches: int, buckets: int, device: torch.device) -> Tuple[list, list]:
    """``batches`` batches of ``smiles`` for ``preset``: plain tensors, and padded to ``buckets`` size buckets."""
    data = dataset(preset, smiles)
    count = min(batches, len(data) // batch_size)
    plain = [collate_molecule_tensors(data.__getitems__(list(range(i * batch_size, (i + 1) * batch_size)))).to(device)
             for i in range(count)]
    collate = PaddedCollate(SizeBuckets.of(*molecule_sizes(data), batch_size, buckets))
    by_size = torch.argsort(data.graphs.num_nodes, stable=True)
    return plain, [collate(data.__getitems__(by_size[i * batch_size:(i + 1) * batch_size].tolist())).to(device) for i in range(count)]


def time_modes(preset_name: str, modes: Sequence[str], device: torch.device, smiles: Sequence[str], batch_size: int = 32,
               batches: int = 8, warmup: int = 2, repeats: int = 5, buckets: int = 2, **overrides: object) -> List[Dict[str, object]]:
    """The ``modes`` rows of ``preset_name`` (``variant/preset``, its model settings with ``overrides``)."""
    preset = get_preset(*preset_name.split("/"), **overrides)
    plain, padded = prepared(preset, smiles, batch_size, batches, buckets, device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for mode in modes:
        row: Dict[str, object] = {"preset": preset_name, "mode": mode, "batch": batch_size}
        if mode == "captured" and device.type != "cuda":
            rows.append({**row, "note": "needs CUDA"})
            continue
        torch.manual_seed(0)
        model = build_model(preset.model).to(device).train()
        step = legacy_step(model, loss_of(preset)) if mode == "eager" else trainer_step(model, preset, device)
        step = {"captured": CapturedStep, "compiled": CompiledStep}.get(mode, lambda s: s)(step)
        inputs = padded if mode in ("captured", "compiled") else plain
        start, times = time.perf_counter(), []
        for rep in range(warmup + repeats):
            if rep == warmup:
                setup = time.perf_counter() - start
            begin = time.perf_counter()
            for batch in inputs:
                step(batch)
            sync()
            times.append((time.perf_counter() - begin) / len(inputs))
        ms = 1e3 * median(times[warmup:])
        rows.append({**row, "ms_step": round(ms, 2), "graphs_s": round(batch_size / ms * 1e3, 1),
                     **({"setup_s": round(setup, 1), "note": "padded size buckets"} if inputs is padded else {})})
        print(rows[-1], flush=True)
    return rows


def time_speed(preset_name: str, size: str, smiles: Sequence[str], device: torch.device,
               args: argparse.Namespace) -> List[Dict[str, object]]:
    """The ``speed`` rows of ``preset_name`` on ``smiles`` (one size class): ours, then the authors'
    network at the same size when ``--authors-dir`` holds its checkout; training and inference
    graphs/s, peak memory, and for the authors' row our speed over theirs."""
    preset = get_preset(*preset_name.split("/"))
    variant, name = preset_name.split("/")
    batch_size = 4 if args.quick else preset.train.batch_size
    data = dataset(preset, repeat_to(smiles, batch_size * args.batches))
    starts = range(0, len(data) - batch_size + 1, batch_size)
    batches = [collate_molecule_tensors(data.__getitems__(list(range(i, i + batch_size)))).to(device) for i in starts]
    torch.manual_seed(args.seed)
    model, loss = build_model(preset.model).to(device), loss_of(preset)
    ours = _timed(model, batches, lambda net, b: net(b.graph, b.relation_graph), loss, batch_size, device, args)
    config, atoms = preset.model, sum(map(heavy_atoms, smiles)) / len(smiles)
    base = {"model": variant, "molecules": f"{size} ({atoms:.1f} atoms)", "batch": batch_size}
    rows: List[Dict[str, object]] = [{**base, "config": f"{name} ({config.num_layers}/{config.hidden_dim}/{config.num_heads})", **ours}]
    if args.authors_dir is None or not is_paired(variant, name):
        return rows
    try:
        torch.manual_seed(args.seed)
        network = build_authors_network(variant, config, [[data[i + k][0] for k in range(batch_size)] for i in starts],
                                        Path(args.authors_dir), device)
    except AuthorsUnavailable as why:
        print(f"  skipped the authors' {variant} network: {why}", flush=True)
        return rows
    targets = [torch.randn(batch_size, 1, device=device) for _ in starts]
    theirs = _timed(network.model, list(zip(network.batches, targets)), lambda net, pair: network.forward(net, pair[0]),
                    lambda out, pair: torch.nn.functional.mse_loss(out.view_as(pair[1]), pair[1]), batch_size, device, args)
    return rows + [{**base, "model": network.label, "config": f"authors ({network.config})", **theirs,
                    "train_ratio": ours["train"] / theirs["train"], "infer_ratio": ours["infer"] / theirs["infer"]}]


def _timed(model: torch.nn.Module, batches: Sequence, forward: Callable, loss: Callable, graphs: int, device: torch.device,
           args: argparse.Namespace) -> Dict[str, object]:
    """Training (forward, loss, backward, AdamW) and inference graphs/s of ``model`` over ``batches``
    of ``graphs`` molecules (cycled), its parameters and peak device memory."""
    cuda, cycle = device.type == "cuda", itertools.cycle(batches)
    if cuda:
        gc.collect(), torch.cuda.empty_cache(), torch.cuda.reset_peak_memory_stats(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def train() -> None:
        batch = next(cycle)
        loss(forward(model, batch), batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()

    def infer() -> None:
        with torch.no_grad():
            forward(model, next(cycle))
        sync()

    seconds = {}
    for mode, run in (("train", train), ("infer", infer)):
        model.train(mode == "train")
        seconds[mode] = median(time_repeats(run, args.repeats, args.warmup))
    return {"params": sum(p.numel() for p in model.parameters()), "train": graphs / seconds["train"],
            "infer": graphs / seconds["infer"], "peak_mib": torch.cuda.max_memory_allocated(device) / 2**20 if cuda else float("nan")}


def speed_rows(args: argparse.Namespace, device: torch.device, presets: Sequence[str]) -> List[Dict[str, object]]:
    pool = 16 if args.quick else 2000
    molhiv, source = sized_smiles(pool, 24, 27, args.smiles, args.moses_dir)
    sizes = {f"MolHIV-sized, {source}": molhiv, "QM9-sized, FreeSolv": [s for s in freesolv_smiles()[0] if 8 <= heavy_atoms(s) <= 9][:pool]}
    rows = [row for preset in presets for size, smiles in sizes.items() for row in time_speed(preset, size, smiles, device, args)]
    for row in rows:
        print(row, flush=True)
    return rows


def count_ops(preset_name: str, smiles: Sequence[str], batch_size: int) -> Dict[str, object]:
    """The ``ops`` row of ``preset_name``: operations and syncs of its second step, two ways."""
    preset = get_preset(*preset_name.split("/"))
    first, second = prepared(preset, smiles, batch_size, 2, 1, torch.device("cpu"))[0]
    torch.manual_seed(0)
    step = trainer_step(build_model(preset.model).train(), preset, torch.device("cpu"))
    step(first)
    with OperationCounter() as trainer:
        step(second)
    torch.manual_seed(0)
    model, loss = build_model(preset.model).train(), loss_of(preset)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    for batch in (first, second):
        with OperationCounter() as forward:
            value = loss(model(batch.graph, batch.relation_graph), batch)
        with OperationCounter() as backward:
            optimizer.zero_grad(set_to_none=True)
            value.backward()
        with OperationCounter() as update:
            optimizer.step()
    phases = {"forward": forward.operations, "backward": backward.operations, "optimizer": update.operations}
    return {"preset": preset_name, "ops": sum(phases.values()), "syncs": sum(forward.syncs.values()) + sum(backward.syncs.values()),
            **phases, "trainer_ops": trainer.operations, "trainer_syncs": sum(trainer.syncs.values())}


def main(argv: Sequence[str] = None) -> int:
    parser = check.parser(__doc__, threads=1)
    check.molecule_options(parser)
    parser.add_argument("--measure", nargs="+", choices=("paths", "modes", "speed", "ops"), default=["paths"])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ... (ops: always the CPU)")
    parser.add_argument("--presets", nargs="+", help="variant/preset of modes, speed and ops; all: every one (default: the measure's)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="the step modes timed")
    parser.add_argument("--batch-size", type=int, default=128, help="molecules per step of paths (modes and ops: 32)")
    parser.add_argument("--batches", type=int, default=8, help="batches per pass of modes, distinct batches of speed")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per path")
    parser.add_argument("--repeats", type=int, default=10, help="timed steps of paths and speed, passes of modes (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--authors-dir", help="speed: also time the authors' networks from their checkouts here (see authors.py; "
                                              "e.g. .cache/authors); the table then gives our speed over theirs")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_size, args.warmup, args.repeats, args.batches = 16, 1, 3, 2
        args.modes = [mode for mode in args.modes if mode != "compiled"]  # inductor compiles for minutes
    env, device = check.start(args, "training steps"), resolve_device(args.device)
    if "paths" in args.measure:
        section = "compute_paths_gpu" if device.type != "cpu" else "compute_paths"  # one table per kind of device
        check.finish("compute_paths", args, env, time_paths(args, device), PATH_COLUMNS, [
            f"#### Compute paths{' on a GPU' if device.type != 'cpu' else ''} (`benchmarks/checks/training_steps.py`)", "",
            f"Training steps (forward, loss, backward, AdamW) of the tiny presets on one batch of {args.batch_size} FreeSolv molecules "
            f"along each compute path (`TrainConfig.compute`: `dgl` or `tensors`); median of {args.repeats} interleaved repeats. "
            f"{environment_line(env)}"], section=section)
    every = [f"{v}/{n}" for v in sorted(PRESETS) for n in sorted(PRESETS[v])]
    presets = every if args.presets == ["all"] else args.presets or (PRESETS_TIMED[:1] if args.quick else PRESETS_TIMED)
    if "speed" in args.measure:
        check.finish("gpu_speed", args, env, speed_rows(args, device, args.presets or PRESETS_SPEED[::4 if args.quick else 1]),
                     SPEED_COLUMNS, [] if device.type == "cpu" else [
                         "#### GPU speed (`benchmarks/checks/training_steps.py`)", "",
                         f"Device: **{torch.cuda.get_device_name(device)}**; {environment_line(env)} The tensor compute path; median "
                         f"of {args.repeats} steps after {args.warmup} warm-up step(s) over {args.batches} distinct batches of each "
                         "preset's recipe size; a training step is forward, loss, backward and AdamW; peak memory is "
                         "`torch.cuda.max_memory_allocated` over each network's run."])
    smiles = sized_smiles(32 * max(args.batches, 2), 20, 30, args.smiles, args.moses_dir)[0] if {"modes", "ops"} & set(args.measure) else []
    if "modes" in args.measure:
        rows = [row for preset in presets for row in time_modes(preset, args.modes, device, smiles, batches=args.batches,
                                                                   repeats=min(args.repeats, 5))]
        check.finish("step_modes", args, env, rows, MODE_COLUMNS)
    if "ops" in args.measure:
        check.finish("step_ops", args, env, [count_ops(preset, smiles[:64], 32) for preset in presets], OPS_COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
