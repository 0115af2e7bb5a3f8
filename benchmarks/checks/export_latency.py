"""The exported files of the default model (``dgl-graphtx export``): their size, how far their
predictions are from the checkpoint's, and how fast they run on the CPU.

The default model (Gradformer, its preset; or ``--checkpoint``) is exported to ``.pt2`` and, where
the ``onnx`` extra is installed, ``.onnx``. On ``--molecules`` molecules (MOSES, drug-sized, from the
``molsets`` wheel; ``--freesolv`` for the embedded set):

- the largest difference between the files' predictions (portable featurizer, the exported
  program run by torch or ONNX Runtime) and the checkpoint's (``Predictor``: the library's
  featurizer, DGL's kernels);
- latency of the model alone on featurized molecules, one molecule and a batch of 256 (median
  of repeated calls): the checkpoint's forward pass (DGL path), the ``.pt2`` program, ONNX Runtime;
- featurization: the library's featurizer against the portable one, molecules per second.

Run in an environment with the onnx extra to include ONNX (it is optional):
    python3 -m venv .venv-onnx && echo "$PWD/.venv/lib/python3.11/site-packages" > .venv-onnx/lib/python3.11/site-packages/base.pth
    .venv-onnx/bin/pip install onnx onnxscript onnxruntime
    OMP_NUM_THREADS=1 PYTHONPATH=$PWD .venv-onnx/bin/python -m benchmarks.checks.export_latency
      .venv/bin/python -m benchmarks.checks.export_latency --quick                        (smoke run, FreeSolv)
"""
from __future__ import annotations

import argparse
import importlib.util
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import torch

from benchmarks.common import molecules as M
from benchmarks.common import report as R

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets.featurized import featurize_and_pack
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference import portable
from dgl_graphtx.inference.export import ONNX_PACKAGES, export_model
from dgl_graphtx.insight import repeated_batch
from dgl_graphtx.models import build_model, get_preset

REPO = Path(__file__).resolve().parents[2]


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``run()`` in milliseconds, after two warm-up calls."""
    run(), run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def featurization_rates(predictor: Predictor, settings: portable.Settings, smiles: List[str]) -> Dict[str, float]:
    """Molecules per second of the library's featurizer and of the portable one."""
    start = time.perf_counter()
    featurize_and_pack(predictor.featurizer, smiles)
    library = len(smiles) / (time.perf_counter() - start)
    start = time.perf_counter()
    [portable.featurize(s, settings) for s in smiles]
    return {"library": library, "portable": len(smiles) / (time.perf_counter() - start)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, help="a trained model (default: the default preset, untrained)")
    parser.add_argument("--molecules", type=int, default=10_000)
    parser.add_argument("--freesolv", action="store_true", help="FreeSolv molecules (repeated to --molecules) instead of MOSES")
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses", help="folder holding the molsets wheel")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--csv", type=Path, help="where the table goes (default: benchmarks/results/export_latency.csv)")
    parser.add_argument("--quick", action="store_true", help="500 FreeSolv molecules, 5 repeats")
    args = parser.parse_args(argv)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    if args.quick:
        args.molecules, args.freesolv, args.repeats = 500, True, 5
    folder = Path(tempfile.mkdtemp())
    checkpoint = args.checkpoint
    if checkpoint is None:
        torch.manual_seed(0)
        preset = get_preset("gradformer")
        meta = CheckpointMeta(preset.featurizer, preset.relation, ["y"])
        checkpoint = save_checkpoint(folder / "best.pt", build_model(preset.model), meta)
    smiles = (M.repeat_to(M.freesolv_smiles()[0], args.molecules)[:args.molecules] if args.freesolv
              else M.moses_smiles(args.moses_dir, args.molecules, seed=0))
    predictor = Predictor(checkpoint, device="cpu")
    expected = predictor.predict(smiles).iloc[:, 2].to_numpy()  # the first target's predictions
    formats = [".pt2"] + ([".onnx"] if all(importlib.util.find_spec(p) for p in ONNX_PACKAGES) else [])
    done = featurize_and_pack(predictor.featurizer, smiles[:256])
    one, batch = (repeated_batch(done.graphs, done.relations, positions) for positions in ([0], list(range(256))))
    scale = float(np.nanmax(np.abs(expected)))  # the largest prediction, for the differences' scale
    rows = [{"file": "checkpoint (Predictor, DGL path)", "size_mb": Path(checkpoint).stat().st_size / 1e6, "max_diff": 0.0, "scale": scale,
             "one_ms": median_ms(lambda: predictor.model.predict(*one), args.repeats),
             "batch_ms": median_ms(lambda: predictor.model.predict(*batch), args.repeats)}]
    for suffix in formats:
        exported = export_model(checkpoint, folder / f"model{suffix}")
        model = portable.load(exported.path)
        found = model.predict(smiles)[model.columns[0]]
        inputs = [portable.batch([portable.featurize(s, model.settings) for s in part]) for part in (smiles[:1], smiles[:256])]
        rows.append({"file": f"model{suffix} ({'torch.export' if suffix == '.pt2' else 'ONNX Runtime'})",
                     "size_mb": exported.size / 1e6, "max_diff": float(np.nanmax(np.abs(found - expected))), "scale": scale,
                     "one_ms": median_ms(lambda: model.run(inputs[0]), args.repeats),
                     "batch_ms": median_ms(lambda: model.run(inputs[1]), args.repeats)})
    rates = featurization_rates(predictor, portable.load(folder / "model.pt2").settings, smiles[:1000])
    kind = "FreeSolv" if args.freesolv else "MOSES"
    env = R.environment()
    print(R.environment_line(env))
    print(f"\n{len(smiles):,} {kind} molecules ({sum(M.heavy_atoms(s) for s in smiles) / len(smiles):.1f} heavy atoms on average)\n")
    print(R.markdown_table(rows, [("file", "model"), ("size_mb", "size (MB)"), ("max_diff", "largest difference"),
                                  ("one_ms", "1 molecule (ms)"), ("batch_ms", "256 molecules (ms)")]))
    print(f"\nfeaturization (1,000 molecules): library {rates['library']:.0f} molecules/s, portable {rates['portable']:.0f} molecules/s")
    print(R.load_note())
    print(f"CSV written to {R.write_csv(args.csv or R.default_csv('export_latency', args.quick), rows, env)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
