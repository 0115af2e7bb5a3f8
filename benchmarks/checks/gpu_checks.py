"""Correctness and speed of the GPU paths on a real device: what the CPU tests cannot show.
The one prepared script a session with a lent GPU runs first; ``--checks`` chooses (all by default).

* ``agreement``: every preset's same weights on FreeSolv and MolHIV-sized molecules in float64 on
  the CPU along DGL's kernels (the reference), in float32 on the device along the tensor path
  (twice) and in float64 on the device, in training mode without dropout (an untrained BatchNorm
  in ``eval()`` is the identity and a 10-layer network's activations grow to ~1e9): relative
  errors of the outputs and of the gradient of all parameters, the largest difference between the
  two float32 runs (CUDA's atomic adds sum in no fixed order), and the float64 run's larger error,
  which separates the path (~1e-15) from float32 rounding.
* ``train``: ``dgl-graphtx train`` on FreeSolv on the device, then ``Predictor`` on the CPU and on
  the device: the largest prediction difference.
* ``pretrain`` (with ``--pretrain-smiles FILE``): ``dgl-graphtx pretrain --objective both`` on the
  device (seconds per epoch, molecules/s, held-out descriptor R2, masked-atom accuracy), then
  ``train`` fine-tuned from that backbone.
* ``fast`` (issue 43; MolHIV-sized molecules from ``--smiles FILE`` or the molsets wheel): (a) no
  host sync in the eager steps of four presets and the replays of their captured steps under
  ``torch.cuda.set_sync_debug_mode("error")``; (b) graphs/s of each step mode
  (``training_steps.time_modes``; ``--compile`` adds the MolHIV recipe compiled); (c) one
  MolHIV-size epoch (33,000 molecules, batch 32, captured steps through the trainer; goal 10 s),
  the eager one from a tenth, and the time the loop waits in ``next(loader)``; (d) prediction
  molecules/s of the tiny presets (the model on featurized batches of 1,024, eager and replayed
  from CUDA graphs, and ``Predictor``, replaying and eager, with their largest difference);
  (e) a MOSES pretraining epoch estimated from the shipped backbone's captured step. Tables go
  to ``--out`` (default ``benchmarks/results/gpu_fast_steps.md``).

Run on a GPU machine:  python -m benchmarks.checks.gpu_checks [--pretrain-smiles FILE] [--smiles MOSES_FILE]
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
from torch.utils.data import Subset

from benchmarks.checks import inference_speed
from benchmarks.checks import training_steps as S
from benchmarks.common import check
from benchmarks.common.molecules import MOSES_SIZE, freesolv_smiles, heavy_atoms, sized_smiles
from benchmarks.common.report import RESULTS_DIR, format_table, markdown_table

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import FREESOLV_TARGET, MoleculeDataset, collate_molecule_tensors, collate_molecules, freesolv_path
from dgl_graphtx.datasets.featurized import featurize_and_pack
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.training import TrainConfig, Trainer
from dgl_graphtx.training.fast_steps import CapturedStep
from dgl_graphtx.training.step_tally import StepTally

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


def sync_free(device: torch.device, smiles: Sequence[str]) -> List[Dict[str, object]]:
    """Check 4a: the steps of four presets under ``set_sync_debug_mode("error")`` (eager, and the
    captured step's replays), after a first step outside it."""
    rows = []
    for preset_name in S.PRESETS_TIMED:
        preset = get_preset(*preset_name.split("/"))
        plain, padded = S.prepared(preset, smiles[:64], 32, 2, 1, device)
        results = {}
        for mode, batches in (("eager", plain), ("captured", padded)):
            torch.manual_seed(0)
            step = S.trainer_step(build_model(preset.model).to(device).train(), preset, device)
            run, tally = CapturedStep(step) if mode == "captured" and device.type == "cuda" else step, StepTally(device, 8)
            run(batches[0])  # the optimizer's state, the capture
            try:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.set_sync_debug_mode("error")
                for batch in batches * 2:
                    result = run(batch)
                    tally.add(result.loss, result.grad_norm, result.skipped, result.loss_not_finite, 32)
                results[mode] = "no host sync in 4 steps"
            except RuntimeError as err:
                results[mode] = f"sync: {str(err).splitlines()[0][:120]}"
            finally:
                if device.type == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
        rows.append({"preset": preset_name, **results})
        print(rows[-1], flush=True)
    return rows


def molhiv_epoch(device: torch.device, smiles: Sequence[str], molecules: int = 33_000) -> Dict[str, object]:
    """Check 4c: one epoch of the ``molhiv`` recipe over ``molecules`` (the distinct ``smiles``
    repeated) through the trainer with captured steps; the eager step's epoch from a tenth of it."""
    preset = get_preset("gradformer", "molhiv")
    data = MoleculeDataset(list(smiles), torch.randint(0, 2, (len(smiles), 1)).float(), featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    rows = {}
    runs = [("captured", molecules)] if device.type == "cuda" else []
    for mode, count in runs + [("eager", molecules // 10)]:
        subset = Subset(data, [i % len(data) for i in range(count)])
        config = TrainConfig.from_recipe(preset.train, epochs=1, progress=False, device=str(device), step_mode=mode,
                                         warmup_epochs=0)
        loader = iter(Trainer(build_model(preset.model), config).loader(subset, shuffle=True, padded=mode != "eager"))
        next(loader)  # the workers started
        start, batches = time.perf_counter(), 0
        for _ in zip(range(200), loader):
            batches += 1
        rows[f"next(loader), {mode}"] = f"{1e3 * (time.perf_counter() - start) / max(batches, 1):.2f} ms/batch"
        torch.manual_seed(0)
        start = time.perf_counter()
        Trainer(build_model(preset.model), config).fit(subset)
        seconds = time.perf_counter() - start
        rows[mode if count == molecules else f"{mode} (from a tenth)"] = f"{seconds * molecules / count:.1f} s"
        print(f"molhiv epoch, {mode} steps: {count} molecules in {seconds:.1f} s ({count / seconds:.0f} graphs/s)", flush=True)
    return {"check": f"MolHIV-size epoch ({molecules} molecules, batch 32, molhiv recipe)",
            "result": ", ".join(f"{what} {value}" for what, value in rows.items()) + " (goal: 10 s)"}


def prediction_rates(device: torch.device, smiles: Sequence[str]) -> List[Dict[str, object]]:
    """Check 4d: molecules/s of the tiny presets, the model alone (featurized batches of 1,024: each
    pass eager, and replayed from the CUDA graph recorded for its padded shape) and ``Predictor`` end
    to end, replaying and eager; the largest difference of their predictions."""
    rows = []
    for preset_name in ("grpe/tiny", "gradformer/default", "vanilla/tiny"):
        preset = get_preset(*preset_name.split("/"))
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as tmp:
            path = save_checkpoint(Path(tmp) / "m.pt", build_model(preset.model), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
            replaying, eager = (Predictor(path, device=str(device), batch_size=1024, capture=capture) for capture in (True, False))
            model_rate = inference_speed.model_rates(eager, smiles[:2048], [], 5)["predict"]
            done = featurize_and_pack(replaying.featurizer, list(smiles[:2048]))
            batches = list(replaying._batches(done))

            def replay() -> None:
                for batch in batches:
                    replaying._replayed(done, batch)
            replay()
            replayed_rate = len(done.rows) / min(inference_speed.seconds(replay) for _ in range(5))
            some = list(smiles[:4096])
            tables = {}
            for name, predictor in (("replaying", replaying), ("eager", eager)):
                predictor.predict(some[:256])  # warm: the shapes recorded, the kernels loaded
                start = time.perf_counter()
                tables[name] = predictor.predict(some)
                tables[name + " s"] = time.perf_counter() - start
        difference = float((tables["replaying"]["y_pred"] - tables["eager"]["y_pred"]).abs().max())
        rows.append({"preset": preset_name, "model molecules/s": round(model_rate), "replayed molecules/s": round(replayed_rate),
                     "Predictor molecules/s": round(len(some) / tables["replaying s"]),
                     "Predictor eager molecules/s": round(len(some) / tables["eager s"]), "max |replayed - eager|": f"{difference:.1e}"})
        print(rows[-1], flush=True)
    return rows


def fast_steps(device: torch.device, smiles: Sequence[str], out: Path, quick: bool, compile_step: bool = False) -> None:
    """Check 4 (module docstring), its tables printed and written to ``out``."""
    sections = []
    rows = sync_free(device, smiles)
    sections.append(("No host sync (set_sync_debug_mode('error'))", rows))
    modes = [m for m in S.MODES if m != "compiled"]
    timing = [row for preset in S.PRESETS_TIMED[: 1 if quick else 4]
              for row in S.time_modes(preset, modes, device, smiles, 32, batches=4 if quick else 8, repeats=3 if quick else 5)]
    if compile_step:  # one compiled shape: the compile time is what it costs
        timing += S.time_modes("gradformer/molhiv", ["compiled"], device, smiles, 32, batches=8, repeats=5, buckets=1)
    sections.append(("Training steps (batch 32, MolHIV-sized)", timing))
    backbone = S.time_modes("gradformer/default", ["captured" if device.type == "cuda" else "no-sync"], device, smiles, 64,
                            batches=4 if quick else 8, num_tasks=194)
    rate = float(backbone[0]["graphs_s"])
    sections.append(("MOSES pretraining epoch, shipped backbone's size (gradformer default, 194 targets, batch 64)",
                     [{"graphs/s": rate, "estimated epoch (1,584,663 molecules)": f"{MOSES_SIZE / rate / 60:.1f} min (goal: 3 min)"}]))
    epoch = molhiv_epoch(device, smiles, 3300 if quick else 33_000)
    sections.append(("MolHIV-size epoch", [epoch]))
    sections.append(("Prediction (inference_mode, batches of 1,024)", prediction_rates(device, smiles)))
    text = [f"### {title}\n\n{markdown_table(table, [(k, k) for k in dict.fromkeys(k for row in table for k in row)])}\n"
            for title, table in sections]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text) + "\n")
    print("\n".join(text), flush=True)


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="two presets, 8 molecules, 1 epoch")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--pretrain-smiles", type=Path, default=None, help="SMILES file for check 3 (default: skip it)")
    parser.add_argument("--pretrain-molecules", type=int, default=10_000)
    parser.add_argument("--pretrain-epochs", type=int, default=3)
    parser.add_argument("--checks", nargs="+", default=["fast", "agreement", "train", "pretrain"],
                        choices=["fast", "agreement", "train", "pretrain"])
    check.molecule_options(parser)  # MolHIV-sized molecules of the fast-step checks
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "gpu_fast_steps.md")
    parser.add_argument("--compile", action="store_true", help="also time the MolHIV recipe's compiled step (inductor: minutes)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if "fast" in args.checks:
        smiles = sized_smiles(256 if args.quick else 2000, 20, 30, args.smiles, args.moses_dir)[0]
        fast_steps(device, smiles, args.out, args.quick, args.compile)
    small = freesolv_smiles()[0]
    large = [s for s in freesolv_smiles()[0] if heavy_atoms(s) >= 12]
    count = 8 if args.quick else 64
    rows = []
    for variant, preset in (CONFIGS[:2] if args.quick else CONFIGS) if "agreement" in args.checks else []:
        for name, pool in (("FreeSolv", small), ("12+ atoms", large)):
            row = agreement(variant, preset, pool[:count], device)
            rows.append(dict(row, molecules=f"{row['molecules']} {name}"))
            print(row, flush=True)
    columns = [("config", "config"), ("molecules", "molecules"), ("out_rel", "output rel. err"),
               ("grad_rel", "gradient rel. err"), ("rerun_out_max", "rerun max |d out|"), ("rerun_grad_max", "rerun max |d grad|"),
               ("f64_rel", "float64 on device: max rel. err")]
    if rows:
        print(format_table(rows, columns))
    if "train" in args.checks:
        with tempfile.TemporaryDirectory() as work:
            result = train_and_predict(args.device, 1 if args.quick else args.epochs, Path(work))
        print(f"{result['check']}: {result['result']}", flush=True)
    if args.pretrain_smiles and "pretrain" in args.checks:
        with tempfile.TemporaryDirectory() as work:
            result = pretrain_on_device(args.device, args.pretrain_smiles, 64 if args.quick else args.pretrain_molecules,
                                        1 if args.quick else args.pretrain_epochs, Path(work))
        print(f"{result['check']}: {result['result']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
