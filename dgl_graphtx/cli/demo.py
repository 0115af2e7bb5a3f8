"""``dgl-graphtx demo``: GRPE-Tiny on the embedded FreeSolv data, then a few predictions."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..datasets import freesolv
from ..experiment import train_and_evaluate
from ..models import get_preset
from ..predict import Predictor
from ..training import TrainConfig
from .common import bounded, print_table

DEMO_SMILES = ["CCO", "c1ccccc1", "CC(=O)OC1=CC=CC=C1C(=O)O", "ClC(Cl)(Cl)Cl", "C1CC"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` sub-command to ``sub``."""
    demo = sub.add_parser("demo", help="train a small GRPE on the embedded FreeSolv data, then predict")
    demo.add_argument("--out", default="demo_run", help="output folder, replaced on each run (default: demo_run)")
    demo.add_argument("--epochs", type=bounded(int, 1), default=60)
    demo.add_argument("--seed", type=bounded(int, 0, 2**32 - 1), default=0)
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Train, report the test RMSE, predict :data:`DEMO_SMILES`."""
    print("dgl_graphtx demo: GRPE-Tiny on FreeSolv (642 molecules, hydration free energy, kcal/mol)")
    preset = get_preset("grpe", "tiny")
    dataset = freesolv(as_dataset=True, featurizer=preset.featurizer, relation=preset.relation,
                       cache_dir=Path(args.out) / "cache", progress=True)
    config = TrainConfig(epochs=args.epochs, batch_size=32, lr=1e-3, warmup_epochs=3, seed=args.seed, progress=True)
    result = train_and_evaluate(dataset, preset, config, split="random", out_dir=args.out, overwrite=True)
    print(f"test RMSE {result.test_metrics['rmse']:.3f} kcal/mol, MAE {result.test_metrics['mae']:.3f} "
          f"(best epoch {result.train.best_epoch}; {len(result.split.test)} test molecules)")
    print(f"learning curve: {Path(args.out) / 'learning_curve.png'}")
    table = Predictor(Path(args.out) / "best.pt").predict(DEMO_SMILES)
    print("predictions (kcal/mol):")
    print_table(table)
    return 0
