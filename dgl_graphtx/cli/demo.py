"""``dgl-graphtx demo``: ``dgl-graphtx train`` with its defaults on the embedded FreeSolv data, then
a few predictions."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict, List

from ..datasets import FREESOLV_TARGET, freesolv_path
from ..inference import Predictor
from ..runs.config import apply_threads, resolve_run_config
from ..runs.from_config import train_from_config
from ..training import TrainConfig
from .common import print_table, setting_type
from .run_report import print_run

DEMO_SMILES = ["CCO", "c1ccccc1", "CC(=O)OC1=CC=CC=C1C(=O)O", "ClC(Cl)(Cl)Cl", "C1CC"]


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` sub-command to ``sub``."""
    demo = sub.add_parser("demo", help="run 'train' with its defaults on the embedded FreeSolv data, then predict")
    demo.add_argument("--out", default="demo_run", help="output folder, replaced on each run (default: demo_run)")
    demo.add_argument("--epochs", type=setting_type("train.epochs"), default=None,
                      help="override train's default epoch count (for a quick look)")
    demo.add_argument("--seed", type=setting_type("train.seed"), default=TrainConfig.seed)
    demo.set_defaults(func=run)


def train_flags(args: argparse.Namespace) -> Dict[str, Any]:
    """The settings the demo gives ``train``: data, target and seed, nothing else of train's
    defaults changed (``--epochs`` only when the user gives one).

    Example:
        >>> sorted(train_flags(argparse.Namespace(out="demo_run", epochs=None, seed=0)))
        ['data.path', 'data.targets', 'train.seed']
    """
    flags: Dict[str, Any] = {"data.path": str(freesolv_path()), "data.targets": [FREESOLV_TARGET], "train.seed": args.seed}
    return {**flags, **({"train.epochs": args.epochs} if args.epochs is not None else {})}


def train_argv(args: argparse.Namespace) -> List[str]:
    """The ``train`` command line of :func:`train_flags`, shown to the user.

    Example:
        >>> train_argv(argparse.Namespace(out="demo_run", epochs=None, seed=0))[-5:]
        ['expt', '--out', 'demo_run', '--overwrite', '--seed=0']
    """
    argv = ["train", str(freesolv_path()), "--targets", FREESOLV_TARGET, "--out", str(args.out), "--overwrite", f"--seed={args.seed}"]
    return argv + ([f"--epochs={args.epochs}"] if args.epochs is not None else [])


def run(args: argparse.Namespace) -> int:
    """Train as ``dgl-graphtx train`` does by default, then predict :data:`DEMO_SMILES`."""
    print("dgl_graphtx demo: 'dgl-graphtx train' with its defaults on FreeSolv "
          "(642 molecules, hydration free energy, kcal/mol, random 80/10/10 split)")
    print("  " + " ".join(train_argv(args)))
    config = apply_threads(resolve_run_config(flags=train_flags(args)))
    result = train_from_config(config, args.out, overwrite=True)
    assert result is not None, "the demo trains in this one process, which reports"
    print_run(result, config, Path(args.out))
    print(f"learning curve: {Path(args.out) / 'learning_curve.png'}")
    table = Predictor(Path(args.out) / "best.pt").predict(DEMO_SMILES)
    print("predictions (kcal/mol):")
    print_table(table)
    return 0
