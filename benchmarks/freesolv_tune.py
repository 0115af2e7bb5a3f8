"""Hyperparameter search for benchmarks/freesolv.py on VALIDATION data only.

For each candidate setting of a model, trains on the training part of the random splits of the
given seeds and reports the mean validation RMSE; the test parts are never touched. The chosen
settings are then written into the RUNS table of freesolv.py by hand.

    python benchmarks/freesolv_tune.py --model grpe --preset tiny --seeds 0 1 2 \
        --grid dropout=0.1,0.2,0.3 atom_features=ogb,canonical
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import sys
import time
from pathlib import Path
from typing import Dict, List

import pandas as pd
from torch.utils.data import Subset

from dgl_graphtx.datasets import freesolv
from dgl_graphtx.datasets import make_split
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.training import Trainer, TrainConfig, seed_everything

TRAIN_KEYS = {f for f in TrainConfig.__dataclass_fields__}


def parse_grid(items: List[str]) -> Dict[str, List[object]]:
    grid = {}
    for item in items:
        key, _, values = item.partition("=")
        grid[key] = [_number(v) for v in values.split(",")]
    return grid


def _number(text: str) -> object:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def validate(model: str, preset: str, setting: Dict[str, object], seed: int, base: Dict[str, object], cache_dir: Path) -> float:
    train_kw = {**base, **{k: v for k, v in setting.items() if k in TRAIN_KEYS}}
    model_kw = {k: v for k, v in setting.items() if k not in TRAIN_KEYS and k != "atom_features" and "." not in k}
    p = get_preset(model, preset, atom_features=setting.get("atom_features", "ogb"), **model_kw)
    for key, value in setting.items():  # nested options, e.g. gradformer.mode=decay
        if "." in key:
            group, name = key.split(".", 1)
            options = dataclasses.replace(getattr(p.model, group), **{name: value})
            p = dataclasses.replace(p, model=dataclasses.replace(p.model, **{group: options}))
    ds = freesolv(as_dataset=True, featurizer=p.featurizer, relation=p.relation, cache_dir=cache_dir, progress=False)
    split = make_split(ds, "random", (0.8, 0.1, 0.1), seed)
    seed_everything(seed)
    trainer = Trainer(build_model(p.model), TrainConfig(seed=seed, progress=False, **train_kw))
    return trainer.fit(Subset(ds, split.train), Subset(ds, split.valid)).best_metrics["rmse"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--preset", default=None)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--grid", nargs="+", default=[],
                        help="key=v1,v2: TrainConfig or ModelConfig fields, atom_features, or nested options such as gradformer.mode")
    parser.add_argument("--base", nargs="*", default=["epochs=200", "batch_size=32", "lr=0.0005", "warmup_epochs=5", "patience=60"])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/freesolv_tune.csv"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    base = {k: v[0] for k, v in parse_grid(args.base).items()}
    grid = parse_grid(args.grid)
    rows = []
    for values in itertools.product(*grid.values()) if grid else [()]:
        setting = dict(zip(grid, values))
        for seed in args.seeds:
            start = time.perf_counter()
            rmse = validate(args.model, args.preset, setting, seed, base, args.out.parent / "cache")
            rows.append({"model": args.model, "preset": args.preset, **setting, "seed": seed, "valid_rmse": rmse})
            print(f"{setting} seed {seed}: valid RMSE {rmse:.3f} ({(time.perf_counter() - start) / 60:.1f} min)", flush=True)
    frame = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, mode="a", header=not args.out.exists(), index=False)
    keys = list(grid) or ["model"]
    print(frame.groupby(keys)["valid_rmse"].agg(["mean", "std", "count"]).sort_values("mean").round(3).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
