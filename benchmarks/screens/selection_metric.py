"""Screen: which validation metric chooses a classification network's best epoch (issue 40, after version 5).

The default watches the validation ROC-AUC (the first of ``--metrics``): the best epoch and its
checkpoint are the epoch of highest validation ROC-AUC, on about 100 molecules. The fingerprint
kernel's blend weight is then chosen on the same molecules by log-loss (version 5). Candidates:

  A  today's default: the best epoch by validation ROC-AUC (``--metrics rocauc,ap,logloss``).
  B  the best epoch by validation log-loss (``--metrics logloss,rocauc,ap``), as chemprop watches
     its validation loss: a smoother criterion than a rank statistic on ~100 molecules, and the
     network it keeps is the one whose probabilities the log-odds blend reads best.

Both are trained here with the suite's command (split files of ``.cache/suite/splits``, 50 epochs,
one thread), the same library, the same seeds.

RULE, fixed before any result (development half: BACE and BBBP at seeds 0-2, 6 pairs; relative error
= (1 - test ROC-AUC) / A's on the same pair): B becomes the default for classification if its mean
relative error is below 0.99 and its mean test log-loss is not above A's. The test half (ClinTox,
HIV) is scored only after the choice.

  python -m benchmarks.screens.selection_metric train|score     (-> .cache/screen/selection/)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SPLITS = REPO / ".cache/suite/splits"
FEATURIZED = REPO / ".cache/suite/featurized"
WORK = REPO / ".cache/screen/selection"
VARIANTS = {"A": "rocauc,ap,logloss", "B": "logloss,rocauc,ap"}
HALVES = {"dev": ("BACE", "BBBP"), "test": ("ClinTox", "HIV")}
SEEDS = (0, 1, 2)


def train_one(variant: str, name: str, seed: int) -> Path:
    run = WORK / variant / name / f"seed{seed}" / "run"
    if (run / "metrics.json").exists():
        return run
    if run.exists():
        subprocess.run(["rm", "-rf", str(run)], check=True)
    run.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "dgl_graphtx", "train", str(SPLITS / name / f"seed{seed}" / "data.csv"), "--targets", "target",
           "--split-col", "split", "--epochs", "50", "--seed", str(seed), "--out", str(run), "--no-progress", "--threads", "1",
           "--cache-dir", str(FEATURIZED), "--task", "classification", "--metrics", VARIANTS[variant]]
    start = time.time()
    with open(run.parent / "train.log", "w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True, cwd=REPO)
    print(f"trained {variant} {name} seed {seed} in {time.time() - start:.0f} s", flush=True)
    return run


def score(half: str) -> None:
    from scipy.stats import wilcoxon

    rows = []
    for name in HALVES[half]:
        for seed in SEEDS:
            got = {v: json.loads((WORK / v / name / f"seed{seed}" / "run" / "metrics.json").read_text()) for v in VARIANTS}
            test = {v: got[v]["test"] for v in VARIANTS}
            rows.append((name, seed, test["A"]["rocauc"], test["B"]["rocauc"], test["A"]["logloss"], test["B"]["logloss"],
                         got["A"].get("best_epoch"), got["B"].get("best_epoch")))
            print(f"{name} seed {seed}: ROC-AUC A {rows[-1][2]:.4f} B {rows[-1][3]:.4f}; log-loss A {rows[-1][4]:.4f} "
                  f"B {rows[-1][5]:.4f}; best epoch A {rows[-1][6]} B {rows[-1][7]}")
    table = np.array([r[2:6] for r in rows], dtype=float)
    relative = (1 - table[:, 1]) / (1 - table[:, 0])
    print(f"{half}: mean relative error B/A {relative.mean():.4f} (better {int((relative < 1).sum())}, worse "
          f"{int((relative > 1).sum())}; Wilcoxon p {wilcoxon(relative - 1).pvalue if np.any(relative != 1) else 1:.2f}); "
          f"mean ROC-AUC A {table[:, 0].mean():.4f} B {table[:, 1].mean():.4f}; mean log-loss A {table[:, 2].mean():.4f} "
          f"B {table[:, 3].mean():.4f}")
    for name in HALVES[half]:
        mine = [r for r in rows if r[0] == name]
        print(f"  {name}: ROC-AUC A {np.mean([r[2] for r in mine]):.4f} B {np.mean([r[3] for r in mine]):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("train", "score"))
    parser.add_argument("--half", choices=tuple(HALVES), default="dev")
    args = parser.parse_args()
    if args.action == "train":
        for name in HALVES[args.half]:
            for seed in SEEDS:
                for variant in VARIANTS:
                    train_one(variant, name, seed)
    score(args.half)


if __name__ == "__main__":
    main()
