"""Training graphs/s of one preset's step run four ways: eager as before (reading the loss and
the gradient norm back every step), eager without host syncs (``TrainStep``), captured in a CUDA
graph per padded shape (``CapturedStep``, CUDA only) and compiled (``CompiledStep``).

Every way trains the same weights on the same ``--batches`` MolHIV-sized batches (size buckets
padded to their shapes for the captured and compiled ways, as the trainer deals them), warmed up
(``--warmup`` passes over the batches: capture, compilation, whose time is reported) and timed over
``--repeats`` passes with the device synchronised at the end of each pass only. Imported by
``compute_paths --step-modes``, ``gpu_speed --step-modes`` and ``gpu_checks`` (all in this folder).

Run:  python -m benchmarks.checks.step_modes --device cuda [--presets gradformer/molhiv grpe/tiny] [--modes ...]
"""
from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.common import molecules as M  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors  # noqa: E402
from dgl_graphtx.datasets.buckets import PaddedCollate, SizeBuckets, molecule_sizes  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402
from dgl_graphtx.training.adamw import adamw  # noqa: E402
from dgl_graphtx.training.fast_steps import CapturedStep, CompiledStep  # noqa: E402
from dgl_graphtx.training.train_step import TrainStep  # noqa: E402
from dgl_graphtx.training.trainer import masked_loss  # noqa: E402

MODES = ("eager", "no-sync", "captured", "compiled")
COLUMNS = [("preset", "preset"), ("mode", "step"), ("batch", "batch"), ("ms_step", "ms/step"), ("graphs_s", "graphs/s"),
           ("setup_s", "capture/compile s"), ("note", "")]


def molecules(count: int, smiles: Optional[str], moses_dir: Path) -> List[str]:
    """``count`` MolHIV-sized molecules (20-30 heavy atoms): ``smiles`` file, MOSES, or ZINC-like ones."""
    if smiles:
        return [line.split(",")[0].strip() for line in Path(smiles).read_text().splitlines() if line.strip()][:count]
    try:
        pool = M.moses_smiles(moses_dir, 8 * count, seed=0)
        return [s for s in pool if 20 <= M.heavy_atoms(s) <= 30][:count]
    except Exception:  # no wheel and no network
        return M.zinc_like_smiles(count, min_atoms=20, max_atoms=30)


def legacy_step(model: torch.nn.Module, task: str) -> Callable:
    """The step as the trainer ran it before: per-parameter AdamW, the loss and the gradient norm
    read back each step, a clipping call with clipping off."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(batch) -> float:
        loss = masked_loss(task, model(batch.graph, batch.relation_graph)[:, : batch.labels.shape[1]], batch.labels, batch.mask)
        optimizer.zero_grad(set_to_none=True)
        if not bool(torch.isfinite(loss.detach())):
            return math.nan
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(model.parameters()), math.inf)
        if bool(torch.isfinite(norm)):
            optimizer.step()
        return float(loss.detach())

    return step


def run(preset_name: str, modes: Sequence[str], device: torch.device, smiles: Sequence[str], batch_size: int,
        batches: int = 8, warmup: int = 2, repeats: int = 5, buckets: int = 2, **overrides: object) -> List[Dict[str, object]]:
    """Rows (one per mode) of ``preset_name`` (``variant/preset``, its model settings with
    ``overrides``) on ``batches`` batches of ``smiles``; the padded ways deal them into ``buckets``."""
    variant, name = preset_name.split("/")
    preset = get_preset(variant, name, **overrides)
    labels = torch.randn(len(smiles), preset.model.num_tasks)
    if preset.model.task != "regression":
        labels = (labels > 0).float()
    data = MoleculeDataset(list(smiles), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    groups = [list(range(i * batch_size, (i + 1) * batch_size)) for i in range(min(batches, len(data) // batch_size))]
    plain = [collate_molecule_tensors(data.__getitems__(g)).to(device) for g in groups]
    padded_collate = PaddedCollate(SizeBuckets.of(*molecule_sizes(data), batch_size, buckets))
    by_size = sorted(range(len(data)), key=lambda i: int(data.graphs.num_nodes[i]))
    padded = [padded_collate(data.__getitems__(by_size[i * batch_size:(i + 1) * batch_size])).to(device) for i in range(len(groups))]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rows = []
    for mode in modes:
        if mode == "captured" and device.type != "cuda":
            rows.append({"preset": preset_name, "mode": mode, "batch": batch_size, "note": "needs CUDA"})
            continue
        torch.manual_seed(0)
        model = build_model(preset.model).to(device).train()

        def loss(output, batch, rows=None):
            return masked_loss(preset.model.task, output[:, : batch.labels.shape[1]], batch.labels, batch.mask)

        if mode == "eager":
            step: Callable = legacy_step(model, preset.model.task)
        else:
            optimizer = adamw([{"params": list(model.parameters())}], 1e-4, 0.0, device)
            step = TrainStep(model, loss, list(model.parameters()), optimizer)
            step = {"no-sync": step, "captured": CapturedStep, "compiled": CompiledStep}[mode](step) if mode != "no-sync" else step
        inputs = padded if mode in ("captured", "compiled") else plain
        start = time.perf_counter()
        for _ in range(warmup):
            for batch in inputs:
                step(batch)
        sync()
        setup = time.perf_counter() - start
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for batch in inputs:
                step(batch)
            sync()
            times.append((time.perf_counter() - start) / len(inputs))
        ms = 1e3 * sorted(times)[len(times) // 2]
        rows.append({"preset": preset_name, "mode": mode, "batch": batch_size, "ms_step": round(ms, 2),
                     "graphs_s": round(batch_size / ms * 1e3, 1), "setup_s": round(setup, 1) if mode in ("captured", "compiled") else "",
                     "note": "padded size buckets" if mode in ("captured", "compiled") else ""})
        print(rows[-1], flush=True)
    return rows


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--presets", nargs="+", default=["gradformer/molhiv", "gradformer/default", "grpe/tiny", "moire/2d"])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smiles", help="SMILES file of MolHIV-sized molecules")
    parser.add_argument("--moses-dir", type=Path, default=Path(__file__).resolve().parents[2] / ".cache" / "moses")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    smiles = molecules(args.batch_size * args.batches, args.smiles, args.moses_dir)
    rows = [row for preset in args.presets for row in run(preset, args.modes, device, smiles, args.batch_size, args.batches,
                                                            repeats=args.repeats)]
    widths = {key: max(len(title), *(len(str(r.get(key, ""))) for r in rows)) for key, title in COLUMNS}
    print("  ".join(title.ljust(widths[key]) for key, title in COLUMNS))
    for row in rows:
        print("  ".join(str(row.get(key, "")).ljust(widths[key]) for key, _ in COLUMNS))


if __name__ == "__main__":
    main()
