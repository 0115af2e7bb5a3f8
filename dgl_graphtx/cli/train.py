"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List, Sequence

from ..datasets import MoleculeDataset, is_store, load_store
from ..distributed import BACKENDS, DistributedConfig, DistributedContext, launch_local, process_hooks
from ..errors import GraphTxError
from ..experiment import train_and_evaluate
from ..models import get_preset
from ..training import TrainConfig
from .common import add_train_options, format_metrics, split_targets


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command to ``sub``."""
    train = sub.add_parser("train", help="train a model on a CSV or SDF file", description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.")
    train.add_argument("data", help="CSV (one SMILES column + targets), SDF (targets as SD properties), or a store written by 'featurize'")
    train.add_argument("--targets", required=True, help="comma-separated target column / SD property names")
    train.add_argument("--smiles-col", default="smiles", help="SMILES column of a CSV (default: smiles)")
    train.add_argument("--out", required=True, help="output folder")
    add_train_options(train)
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt (a fresh start if there is none)")
    scale = train.add_argument_group("distributed training (see docs/scaling.md)")
    scale.add_argument("--nproc", type=int, default=1, help="processes on this machine, started with torchrun's elastic launcher (default: 1)")
    scale.add_argument("--backend", choices=BACKENDS, default="auto", help="torch.distributed backend (auto: nccl on CUDA, gloo on CPU)")
    scale.add_argument("--dist-timeout", type=float, default=600.0, help="seconds a process waits for the others before the job fails (default: 600)")
    train.set_defaults(func=run)


def without_option(argv: Sequence[str], option: str) -> List[str]:
    """``argv`` without ``option VALUE`` / ``option=VALUE``.

    Example:
        >>> without_option(["train", "x.csv", "--nproc", "2", "--epochs=3"], "--nproc")
        ['train', 'x.csv', '--epochs=3']
    """
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token == option:
            skip = True
        elif not token.startswith(option + "="):
            out.append(token)
    return out


def load_dataset(path: Path, targets, args, preset) -> MoleculeDataset:
    """The labelled dataset of ``path`` (CSV, SDF or a featurized store) featurized for ``preset``."""
    if is_store(path):
        dataset = load_store(path)
        if dataset.target_names != list(targets):
            raise GraphTxError(f"store {path} holds targets {dataset.target_names}, not {list(targets)}; use --targets {','.join(dataset.target_names)}")
        return dataset
    kwargs = dict(featurizer=preset.featurizer, relation=preset.relation, cache_dir=args.cache_dir, progress=not args.no_progress)
    if path.suffix.lower() in (".sdf", ".sd"):
        return MoleculeDataset.from_sdf(path, targets, **kwargs)
    return MoleculeDataset.from_csv(path, args.smiles_col, targets, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args`` (in this process, or in ``--nproc`` processes)."""
    path = Path(args.data)
    if not (path.is_file() or is_store(path)):
        raise GraphTxError(f"data file not found: {path} (nor a complete store written by 'dgl-graphtx featurize')")
    if args.nproc != 1:
        return launch_local(args.nproc, without_option(args.argv, "--nproc"))
    targets = split_targets(args.targets)
    preset = get_preset(args.model, args.preset, num_tasks=len(targets), task=args.task, atom_features=args.atom_features)
    with process_hooks(args.device, DistributedConfig(args.backend, args.dist_timeout)) as hooks:
        if hooks.world_size > 1 and args.cache_dir is None:  # featurize once, on rank 0
            args.cache_dir = str(Path(args.out) / "cache")
        args.no_progress = args.no_progress or not hooks.is_main
        with hooks.main_first():
            dataset = load_dataset(path, targets, args, preset)
        device = str(hooks.device) if isinstance(hooks, DistributedContext) else args.device
        config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                             seed=args.seed, device=device, progress=not args.no_progress)
        result = train_and_evaluate(dataset, preset, config, split=args.split, out_dir=args.out, hooks=hooks, resume=args.resume)
        if hooks.is_main:
            print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
            print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}")
            print(f"checkpoint: {Path(args.out) / 'best.pt'}")
    return 0
