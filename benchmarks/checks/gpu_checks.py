"""Correctness of the GPU paths on a real device: what the CPU tests cannot show.

1. **float32 agreement on CUDA.** For every preset of the catalogue, the same weights run on
   FreeSolv and MolHIV-sized molecules twice: in float64 on the CPU along DGL's kernels (the
   reference) and in float32 on the device along the tensor path, in training mode without
   dropout (BatchNorm normalises with the batch's statistics, as in training: in ``eval()`` an
   untrained BatchNorm is the identity and a 10-layer network's activations grow to ~1e9). Reports
   ``|out - ref| / |ref|`` for the outputs and for the gradient of every parameter (one vector),
   and the largest difference between two identical device runs (CUDA's atomic adds in
   ``index_add_``/``scatter_reduce`` sum in no fixed order). The same weights and molecules then
   run in float64 on the device's tensor path: the larger of its output and gradient errors
   against the CPU reference separates the path (which should agree to ~1e-15) from float32
   rounding.
2. **A training run on the device, predicted on the CPU.** ``dgl-graphtx train`` on FreeSolv
   with ``--device cuda`` (compute ``auto``: tensors), then ``Predictor`` on the CPU (DGL's
   kernels) and on the device over the same molecules: the largest prediction difference.
3. **Pretraining on the device** (``--pretrain-smiles FILE``): ``dgl-graphtx pretrain --objective
   both`` (descriptors and masked atoms, the masked-atom heads trained beside the model) on the
   first ``--pretrain-molecules`` of a SMILES file with ``--device cuda``: seconds per epoch,
   molecules/s, held-out descriptor R2 and masked-atom accuracy; then check 2 fine-tuned from
   that backbone (``--from-pretrained``).

Run on a GPU machine:  python -m benchmarks.checks.gpu_checks [--pretrain-smiles FILE]
Smoke check anywhere:  python -m benchmarks.checks.gpu_checks --device cpu --quick
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.common.molecules import MOSES_SIZE, freesolv_smiles, heavy_atoms  # noqa: E402
from benchmarks.common.report import format_table  # noqa: E402

from dgl_graphtx.datasets import FREESOLV_TARGET, MoleculeDataset, collate_molecule_tensors, collate_molecules, freesolv_path  # noqa: E402
from dgl_graphtx.inference import Predictor  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402

CONFIGS = [("grpe", "tiny"), ("grpe", "standard"), ("moire", "2d"), ("moire", "3d"), ("moire", "3d-energy"), ("gradformer", "default"),
           ("gradformer", "molhiv"), ("vanilla", "tiny"), ("graphormer", "tiny")]


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double().cpu() - b.double().cpu()).norm() / b.double().cpu().norm().clamp_min(1e-300))


def _flat_grads(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def _pass(model: torch.nn.Module, batch, targets: torch.Tensor):
    model.zero_grad(set_to_none=True)
    out = model(batch.graph, batch.relation_graph)
    torch.nn.functional.mse_loss(out, targets).backward()
    return out.detach(), _flat_grads(model).detach()


def agreement(variant: str, preset_name: str, smiles: Sequence[str], device: torch.device) -> Dict[str, object]:
    preset = get_preset(variant, preset_name, dropout=0.0, attn_dropout=0.0)
    data = MoleculeDataset(list(smiles), torch.randn(len(smiles), 1), featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    samples = [data[i] for i in range(len(data))]
    targets = torch.randn(len(samples), preset.model.num_tasks)
    torch.manual_seed(0)
    model = build_model(preset.model).train()
    ref_out, ref_grad = _pass(model.double(), _double(collate_molecules(samples)), targets.double())
    model = model.float().to(device)
    batch = collate_molecule_tensors(samples).to(device)
    out1, grad1 = _pass(model, batch, targets.to(device))
    out2, grad2 = _pass(model, batch, targets.to(device))
    out64, grad64 = _pass(model.double(), _double(collate_molecule_tensors(samples)).to(device), targets.double().to(device))
    return {"config": f"{variant}-{preset_name}", "molecules": len(samples),
            "out_rel": _relative(out1, ref_out), "grad_rel": _relative(grad1, ref_grad),
            "rerun_out_max": float((out1 - out2).abs().max()), "rerun_grad_max": float((grad1 - grad2).abs().max()),
            "f64_rel": max(_relative(out64, ref_out), _relative(grad64, ref_grad))}


def _double(batch):
    for graph in (batch.graph, batch.relation_graph):
        for store in (graph.ndata, graph.edata):
            for key in list(store.keys()):
                if store[key].is_floating_point():
                    store[key] = store[key].double()
    return batch


CLI = [sys.executable, "-c", "import sys; from dgl_graphtx.cli import main; sys.exit(main())"]


def _run_cli(arguments: Sequence[str]) -> Tuple[float, str]:
    """Run ``dgl-graphtx ARGUMENTS``: wall seconds and ``""``, or the failure's last lines."""
    start = time.perf_counter()
    proc = subprocess.run([*CLI, *arguments, "--no-progress", "-q"], capture_output=True, text=True)
    problem = f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}" if proc.returncode else ""
    return time.perf_counter() - start, problem


def train_and_predict(device: str, epochs: int, work: Path, extra: Sequence[str] = ()) -> Dict[str, object]:
    out = work / "run"
    seconds, problem = _run_cli(["train", str(freesolv_path()), "--targets", FREESOLV_TARGET, "--out", str(out),
                                 "--device", device, "--epochs", str(epochs), *extra])
    if problem:
        return {"check": "train on device", "result": problem}
    smiles = freesolv_smiles()[0]
    on_cpu = Predictor(out / "best.pt", device="cpu").predict(smiles)
    on_device = Predictor(out / "best.pt", device=device).predict(smiles)
    column = [c for c in on_cpu.columns if c.endswith("_pred") or c == FREESOLV_TARGET][0]
    diff = float((on_cpu[column] - on_device[column]).abs().max())
    trained = f"train{''.join(' ' + e for e in extra)} {epochs} epochs on {device} ({seconds:.0f} s)"
    return {"check": f"{trained}, predict {len(smiles)} on cpu and {device}",
            "result": f"max |cpu - {device}| = {diff:.2e}"}


def pretrain_on_device(device: str, smiles_file: Path, molecules: int, epochs: int, work: Path) -> Dict[str, object]:
    """Check 3: pretrain with both objectives on the device, then fine-tune from the backbone."""
    out = work / "pretrained"
    seconds, problem = _run_cli(["pretrain", str(smiles_file), "--subset", str(molecules), "--objective", "both",
                                 "--out", str(out), "--device", device, "--epochs", str(epochs),
                                 "--workers", str(min(8, os.cpu_count() or 1)),
                                 "--set", "train.warmup_epochs=1"])
    if problem:
        return {"check": "pretrain on device", "result": problem}
    card = json.loads((out / "card.json").read_text())
    epoch_seconds = [float(row["seconds"]) for row in csv.DictReader((out / "log.csv").open())]
    per_epoch = statistics.median(epoch_seconds)
    trained = card["corpus"]["train"]
    result = {"check": f"pretrain --objective both, {card['corpus']['molecules']} molecules x {epochs} epochs on "
                       f"{device} ({seconds:.0f} s wall, descriptors {card['descriptor_time_s']:.0f} s)",
              "result": f"{per_epoch:.1f} s/epoch ({trained / per_epoch:,.0f} molecules/s; MOSES' 1.58M: "
                        f"{MOSES_SIZE / trained * per_epoch / 60:.0f} min/epoch), held-out descriptor R2 "
                        f"{card['heldout_r2']:.3f}, masked-atom accuracy {card['heldout_element_accuracy']:.3f}"}
    print(f"{result['check']}: {result['result']}", flush=True)
    return train_and_predict(device, 5, work, extra=["--from-pretrained", str(out)])


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="two presets, 8 molecules, 1 epoch")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--pretrain-smiles", type=Path, default=None, help="SMILES file for check 3 (default: skip it)")
    parser.add_argument("--pretrain-molecules", type=int, default=10_000)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    small = freesolv_smiles()[0]
    large = [s for s in freesolv_smiles()[0] if heavy_atoms(s) >= 12]
    count = 8 if args.quick else 64
    rows = []
    for variant, preset in CONFIGS[:2] if args.quick else CONFIGS:
        for name, pool in (("FreeSolv", small), ("12+ atoms", large)):
            row = agreement(variant, preset, pool[:count], device)
            rows.append(dict(row, molecules=f"{row['molecules']} {name}"))
            print(row, flush=True)
    columns = [("config", "config"), ("molecules", "molecules"), ("out_rel", "output rel. err"),
               ("grad_rel", "gradient rel. err"), ("rerun_out_max", "rerun max |d out|"), ("rerun_grad_max", "rerun max |d grad|"),
               ("f64_rel", "float64 on device: max rel. err")]
    print(format_table(rows, columns))
    with tempfile.TemporaryDirectory() as work:
        result = train_and_predict(args.device, 1 if args.quick else args.epochs, Path(work))
    print(f"{result['check']}: {result['result']}", flush=True)
    if args.pretrain_smiles:
        with tempfile.TemporaryDirectory() as work:
            result = pretrain_on_device(args.device, args.pretrain_smiles, 64 if args.quick else args.pretrain_molecules,
                                        1 if args.quick else args.pretrain_epochs, Path(work))
        print(f"{result['check']}: {result['result']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
