"""Inference speed of the default model: explanations, and the exported files, in two parts
(``--parts``) on FreeSolv-sized molecules (the embedded set, 8.7 heavy atoms) and drug-sized ones
(MOSES from the molsets wheel, 21.6; ``--sets`` chooses):

* ``explain`` (docs/insight.md): molecules per second of the forward pass (``predict``) and of
  integrated gradients at each of ``--steps`` over featurized molecules, batched as ``Predictor``
  batches them (``batch_size`` copies per pass), best of ``--repeats`` after a warm-up; then
  ``Predictor.predict`` and ``Predictor.explain`` from SMILES, featurization included.
* ``export`` (docs/export.md): the model exported to ``.pt2`` and, with the onnx extra installed,
  ``.onnx``: file sizes; the largest difference between the files' predictions (portable
  featurizer, the exported program) and the checkpoint's (``Predictor``); the model alone on one
  molecule and on 256 (median of ``--repeats`` calls after two warm-up calls); the library's
  featurizer against the portable one (molecules/s of 1,000). Target: difference <= 1e-5.

The model: ``--checkpoint``, else the default preset with random weights (speed does not depend
on them). For ONNX, run in an environment with the onnx extra (``pip install onnx onnxscript
onnxruntime``, e.g. a venv whose ``base.pth`` adds the project's site-packages).

Run:  OMP_NUM_THREADS=1 python -m benchmarks.checks.inference_speed --parts explain --threads 1
      OMP_NUM_THREADS=1 python -m benchmarks.checks.inference_speed --parts export --sets moses --molecules 10000 --checkpoint RUN/best.pt
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np
import torch

from benchmarks.common import check
from benchmarks.common import molecules as M
from benchmarks.common.report import markdown_table

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets.featurized import featurize_and_pack
from dgl_graphtx.inference import Predictor, portable
from dgl_graphtx.inference.export import ONNX_PACKAGES, export_model
from dgl_graphtx.insight import integrated_gradients, repeated_batch
from dgl_graphtx.models import build_model, get_preset

EXPLAIN_COLUMNS = [("molecules", "molecules"), ("what", "what"), ("per_s", "molecules/s")]
EXPORT_COLUMNS = [("molecules", "molecules"), ("file", "model"), ("size_mb", "size (MB)"), ("max_diff", "largest difference"),
                  ("one_ms", "1 molecule (ms)"), ("batch_ms", "256 molecules (ms)")]


def seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``run()`` after two warm-up calls."""
    run(), run()
    return 1000 * statistics.median(seconds(run) for _ in range(repeats))


def model_rates(predictor: Predictor, smiles: Sequence[str], steps_list: Sequence[int], repeats: int) -> Dict[str, float]:
    """Molecules/s of the forward pass and of each step count's explanation over featurized ``smiles``
    (best of ``repeats`` after a warm-up), in ``predictor``'s batches, on its device."""
    done = featurize_and_pack(predictor.featurizer, list(smiles))
    model, count = predictor.model, len(done.rows)

    def passes(steps: int) -> Callable[[], None]:
        def run() -> None:
            for batch in predictor._batches(done, steps):  # as Predictor batches steps copies of each molecule
                graphs = repeated_batch(done.graphs, done.relations, batch, steps, predictor.device, predictor.compute)
                model.predict(*graphs) if steps == 1 else integrated_gradients(model, *graphs, steps=steps)
        return run

    found = {}
    for steps in [1, *steps_list]:
        run = passes(steps)
        run()
        found["predict" if steps == 1 else f"explain, {steps} steps"] = count / min(seconds(run) for _ in range(repeats))
    return found


def explain_rows(predictor: Predictor, name: str, smiles: List[str], args: argparse.Namespace) -> List[Dict[str, object]]:
    found = {**model_rates(predictor, smiles, args.steps, args.repeats or 3),
             "predict from SMILES": len(smiles) / seconds(lambda: predictor.predict(smiles)),
             "explain from SMILES (4 steps)": len(smiles) / seconds(lambda: predictor.explain(smiles))}
    return [{"molecules": name, "what": what, "per_s": value} for what, value in found.items()]


def export_rows(checkpoint: Path, name: str, smiles: List[str], args: argparse.Namespace, folder: Path) -> List[Dict[str, object]]:
    predictor, repeats = Predictor(checkpoint, device="cpu"), args.repeats or 30
    expected = predictor.predict(smiles).iloc[:, 2].to_numpy()  # the first target's predictions
    done = featurize_and_pack(predictor.featurizer, smiles[:256])
    one, batch = (repeated_batch(done.graphs, done.relations, positions) for positions in ([0], list(range(len(done.rows)))))
    scale = float(np.nanmax(np.abs(expected)))  # the largest prediction, the differences' scale
    rows = [{"molecules": name, "file": "checkpoint (Predictor, DGL path)", "size_mb": checkpoint.stat().st_size / 1e6, "max_diff": 0.0,
             "one_ms": median_ms(lambda: predictor.model.predict(*one), repeats),
             "batch_ms": median_ms(lambda: predictor.model.predict(*batch), repeats)}]
    onnx = all(importlib.util.find_spec(package) for package in ONNX_PACKAGES)
    for suffix, runner in [(".pt2", "torch.export"), *[(".onnx", "ONNX Runtime")] * onnx]:
        model = portable.load(export_model(checkpoint, folder / f"model{suffix}").path)
        inputs = [portable.batch([portable.featurize(s, model.settings) for s in part]) for part in (smiles[:1], smiles[:256])]
        rows.append({"molecules": name, "file": f"model{suffix} ({runner})", "size_mb": (folder / f"model{suffix}").stat().st_size / 1e6,
                     "max_diff": float(np.nanmax(np.abs(model.predict(smiles)[model.columns[0]] - expected))), "scale": scale,
                     "one_ms": median_ms(lambda: model.run(inputs[0]), repeats),
                     "batch_ms": median_ms(lambda: model.run(inputs[1]), repeats)})
    settings, part = portable.load(folder / "model.pt2").settings, smiles[:1000]
    print(f"{name}: largest prediction {scale:.3g}; featurization of {len(part):,}: library "
          f"{len(part) / seconds(lambda: featurize_and_pack(predictor.featurizer, part)):.0f} molecules/s, portable "
          f"{len(part) / seconds(lambda: [portable.featurize(s, settings) for s in part]):.0f} molecules/s", flush=True)
    return rows


def main(argv: Sequence[str] = None) -> int:
    parser = check.parser(__doc__)
    parser.add_argument("--parts", nargs="+", choices=("explain", "export"), default=["explain", "export"])
    parser.add_argument("--sets", nargs="+", choices=("freesolv", "moses"), default=["freesolv", "moses"])
    parser.add_argument("--molecules", type=int, help="molecules per set (default: explain 2,000, export 10,000)")
    parser.add_argument("--steps", type=int, nargs="+", default=[2, 3, 4, 8, 16], help="step counts of the explanations")
    parser.add_argument("--repeats", type=int, help="timed calls (default: explain 3, best; export 30, median)")
    parser.add_argument("--checkpoint", type=Path, help="a trained model (default: the default preset, untrained)")
    parser.add_argument("--moses-dir", type=Path, default=M.MOSES_DIR, help="folder of the molsets wheel")
    args = parser.parse_args(argv)
    if args.quick:
        args.molecules, args.steps, args.repeats, args.sets = 200, [4], 2, ["freesolv"]
    env, folder = check.start(args, "inference speed"), Path(tempfile.mkdtemp())
    checkpoint = args.checkpoint
    if checkpoint is None:
        torch.manual_seed(0)
        preset = get_preset("gradformer")
        meta = CheckpointMeta(preset.featurizer, preset.relation, ["y"])
        checkpoint = save_checkpoint(folder / "best.pt", build_model(preset.model), meta)
    for part in args.parts:
        count, rows = args.molecules or {"explain": 2000, "export": 10_000}[part], []
        for name in args.sets:
            smiles = M.repeat_to(M.freesolv_smiles()[0], count) if name == "freesolv" else M.moses_smiles(args.moses_dir, count, seed=0)
            label = f"{'FreeSolv' if name == 'freesolv' else 'MOSES'} ({sum(map(M.heavy_atoms, smiles)) / len(smiles):.1f} heavy atoms)"
            rows += (explain_rows(Predictor(checkpoint, device="cpu"), label, smiles, args) if part == "explain"
                     else export_rows(Path(checkpoint), label, smiles, args, folder))
        print(markdown_table(rows, EXPLAIN_COLUMNS if part == "explain" else EXPORT_COLUMNS))
        check.finish("explain_speed" if part == "explain" else "export_latency", args, env, rows,
                     EXPLAIN_COLUMNS if part == "explain" else EXPORT_COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
