"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Dict

from ..datasets import MoleculeDataset, qm9
from ..errors import GraphTxError
from ..experiment import train_and_evaluate
from ..models import get_preset
from ..training import TrainConfig
from .common import add_train_options, format_metrics, split_targets


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command to ``sub``."""
    train = sub.add_parser("train", help="train a model on a CSV or SDF file, or on QM9", description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.")
    train.add_argument("data", help="CSV (one SMILES column + targets), SDF (targets as SD properties), or 'qm9' (DFT geometries; needs dgl_graphtx[qm9])")
    train.add_argument("--targets", required=True, help="comma-separated target column / SD property names")
    train.add_argument("--smiles-col", default="smiles", help="SMILES column of a CSV (default: smiles)")
    train.add_argument("--out", required=True, help="output folder")
    train.add_argument("--subset", type=int, default=None, help="qm9 only: train on this many molecules drawn with --seed")
    add_train_options(train)
    train.set_defaults(func=run)


def load_dataset(path: Path, targets, args, preset) -> MoleculeDataset:
    """The labelled dataset of ``path`` (CSV or SDF, or the name ``qm9``) featurized for ``preset``."""
    kwargs = dict(featurizer=preset.featurizer, relation=preset.relation, cache_dir=args.cache_dir, progress=not args.no_progress)
    if str(path) == "qm9":
        return qm9(as_dataset=True, targets=targets, subset=args.subset, seed=args.seed, **kwargs)
    if args.subset is not None:
        raise GraphTxError("--subset applies to the qm9 data source only")
    if path.suffix.lower() in (".sdf", ".sd"):
        return MoleculeDataset.from_sdf(path, targets, **kwargs)
    return MoleculeDataset.from_csv(path, args.smiles_col, targets, **kwargs)


def explicit_recipe_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The training-recipe flags given on the command line (``None`` means "the preset's").

    Example:
        >>> explicit_recipe_options(argparse.Namespace(epochs=None, batch_size=8, lr=None))
        {'batch_size': 8}
    """
    given = {"epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr}
    return {key: value for key, value in given.items() if value is not None}


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args``."""
    path = Path(args.data)
    if args.data != "qm9" and not path.is_file():
        raise GraphTxError(f"data file not found: {path}")
    targets = split_targets(args.targets)
    preset = get_preset(args.model, args.preset, num_tasks=len(targets), task=args.task, atom_features=args.atom_features)
    dataset = load_dataset(path, targets, args, preset)
    config = TrainConfig.from_recipe(preset.train, **explicit_recipe_options(args), patience=args.patience,
                                     seed=args.seed, device=args.device, progress=not args.no_progress)
    result = train_and_evaluate(dataset, preset, config, split=args.split, out_dir=args.out)
    print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
    print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}")
    print(f"checkpoint: {Path(args.out) / 'best.pt'}")
    return 0
