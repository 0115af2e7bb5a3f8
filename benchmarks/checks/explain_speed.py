"""How fast are per-atom explanations? Molecules explained per second on the CPU by the default model
(Gradformer, its preset; the weights do not change the speed), for FreeSolv-sized molecules (the
embedded set, 8.7 heavy atoms on average) and drug-sized ones (MOSES, 21.6), at several step counts:

- ``explain``: integrated gradients over featurized molecules, batched as ``Predictor`` batches them
  (``batch_size`` copies per pass: 256 / steps molecules), the rate the explanation itself adds;
- ``predict``: the plain forward pass over the same featurized molecules, for scale;
- end to end: ``Predictor.predict`` and ``Predictor.explain`` from SMILES, featurization included
  (which both pay, and which dominates).

MOSES SMILES come from the ``molsets`` wheel (``pip download --no-deps molsets -d .cache/moses``,
fetched when absent; ``--no-moses`` skips them).

Run:  OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.checks.explain_speed --threads 1
      .venv/bin/python -m benchmarks.checks.explain_speed --quick          (smoke run)
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import torch

from benchmarks.common import molecules as M
from benchmarks.common import report as R

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import EdgeBudgetBatchSampler
from dgl_graphtx.datasets.featurized import featurize_and_pack
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.predictor import BATCH_EDGES, BATCH_SIZE
from dgl_graphtx.insight import integrated_gradients, repeated_batch
from dgl_graphtx.models import build_model, get_preset

REPO = Path(__file__).resolve().parents[2]


def rate(run, count: int, repeats: int) -> float:
    """Molecules per second of ``run()`` (best of ``repeats`` after one warm-up call)."""
    run()
    best = min(_seconds(run) for _ in range(repeats))
    return count / best


def _seconds(run) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def model_rates(predictor: Predictor, smiles: List[str], steps_list: List[int], repeats: int) -> Dict[str, float]:
    """``predict`` and ``explain`` (per step count) rates over featurized molecules."""
    done = featurize_and_pack(predictor.featurizer, smiles)
    model = predictor.model
    count = len(done.rows)

    def batches(copies: int):
        return EdgeBudgetBatchSampler(done.relations.num_edges, max(1, BATCH_SIZE // copies), BATCH_EDGES // copies)

    def predict() -> None:
        for batch in batches(1):
            model.predict(*repeated_batch(done.graphs, done.relations, batch))

    out = {"predict": rate(predict, count, repeats)}
    for steps in steps_list:
        def explain(steps: int = steps) -> None:
            for batch in batches(steps):
                integrated_gradients(model, *repeated_batch(done.graphs, done.relations, batch, steps), steps=steps)

        out[f"explain, {steps} steps"] = rate(explain, count, repeats)
    return out


def end_to_end(predictor: Predictor, smiles: List[str]) -> Dict[str, float]:
    """``Predictor.predict`` and ``Predictor.explain`` from SMILES (featurization included)."""
    return {"predict from SMILES": len(smiles) / _seconds(lambda: predictor.predict(smiles)),
            "explain from SMILES (4 steps)": len(smiles) / _seconds(lambda: predictor.explain(smiles))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=2000, help="molecules per set")
    parser.add_argument("--steps", default="2,3,4,8,16")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-moses", action="store_true")
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses", help="folder holding the molsets wheel")
    parser.add_argument("--csv", type=Path, help="where the table goes (default: benchmarks/results/explain_speed.csv)")
    parser.add_argument("--quick", action="store_true", help="200 FreeSolv molecules, 4 steps, one repeat")
    args = parser.parse_args(argv)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.quick:
        args.molecules, args.steps, args.repeats, args.no_moses = 200, "4", 1, True
    preset = get_preset("gradformer")
    torch.manual_seed(0)
    path = save_checkpoint(Path(tempfile.mkdtemp()) / "default.pt", build_model(preset.model),
                           CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
    predictor = Predictor(path, device="cpu")
    sets = {"FreeSolv": M.repeat_to(M.freesolv_smiles()[0], args.molecules)[:args.molecules]}
    if not args.no_moses:
        sets["MOSES"] = M.moses_smiles(args.moses_dir, args.molecules, seed=0)
    steps_list = [int(s) for s in args.steps.split(",")]
    env = R.environment()
    rows = []
    for name, smiles in sets.items():
        atoms = sum(M.heavy_atoms(s) for s in smiles) / len(smiles)
        found = {**model_rates(predictor, smiles, steps_list, args.repeats), **end_to_end(predictor, smiles)}
        rows.extend({"molecules": f"{name} ({atoms:.1f} heavy atoms)", "what": what, "per_s": value} for what, value in found.items())
    print(R.environment_line(env))
    print(R.markdown_table(rows, [("molecules", "molecules"), ("what", "what"), ("per_s", "molecules/s")]))
    print(R.load_note())
    print(f"CSV written to {R.write_csv(args.csv or R.default_csv('explain_speed', args.quick), rows, env)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
