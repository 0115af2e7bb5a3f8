"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..datasets import MoleculeDataset
from ..errors import GraphTxError
from ..experiment import train_and_evaluate
from ..models import get_preset
from ..run_folder import RunFolder
from ..training import TrainConfig
from .common import add_train_options, format_metrics, split_targets


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command to ``sub``."""
    train = sub.add_parser("train", help="train a model on a CSV or SDF file", description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.")
    train.add_argument("data", help="CSV (one SMILES column + targets) or SDF (targets as SD properties)")
    train.add_argument("--targets", required=True, help="comma-separated target column / SD property names")
    train.add_argument("--smiles-col", default="smiles", help="SMILES column of a CSV (default: smiles)")
    train.add_argument("--out", required=True, help="output folder (refused if it already holds a run, unless --overwrite)")
    train.add_argument("--overwrite", action="store_true", help="replace the run already in --out (its files are deleted first)")
    add_train_options(train)
    train.set_defaults(func=run)


def load_dataset(path: Path, targets, args, preset) -> MoleculeDataset:
    """The labelled dataset of ``path`` (CSV or SDF) featurized for ``preset``."""
    kwargs = dict(featurizer=preset.featurizer, relation=preset.relation, cache_dir=args.cache_dir, progress=not args.no_progress)
    if path.suffix.lower() in (".sdf", ".sd"):
        return MoleculeDataset.from_sdf(path, targets, **kwargs)
    return MoleculeDataset.from_csv(path, args.smiles_col, targets, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args``."""
    path = Path(args.data)
    if not path.is_file():
        raise GraphTxError(f"data file not found: {path}")
    targets = split_targets(args.targets)
    preset = get_preset(args.model, args.preset, num_tasks=len(targets), task=args.task, atom_features=args.atom_features)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                         seed=args.seed, device=args.device, progress=not args.no_progress,
                         on_nonfinite=args.on_nonfinite)
    with RunFolder(args.out, args.overwrite) as run:  # output checked and locked before any work
        dataset = load_dataset(path, targets, args, preset)
        result = train_and_evaluate(dataset, preset, config, split=args.split, out_dir=run)
    print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
    print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}")
    for note in result.test_notes:
        print(f"note: {note}")
    print(f"checkpoint: {Path(args.out) / 'best.pt'}")
    return 0
