"""Command-line interface: ``dgl-graphtx {train, predict, evaluate, info, demo}``.

User mistakes (missing files, bad columns, invalid settings, corrupt checkpoints) are printed as
one ``error:`` line without a traceback and exit with status 2.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

from .datasets import MoleculeDataset, freesolv, read_molecule_csv, smiles_column
from .env_info import environment_report
from .errors import GraphTxError
from .experiment import train_and_evaluate
from .models import get_preset
from .predict import Predictor
from .training import TrainConfig, compute_metrics

DEMO_SMILES = ["CCO", "c1ccccc1", "CC(=O)OC1=CC=CC=C1C(=O)O", "ClC(Cl)(Cl)Cl", "C1CC"]
MODELS = ("grpe", "moire", "gradformer", "vanilla", "graphormer")


def _split_targets(text: str) -> List[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _add_train_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", choices=MODELS, default="grpe", help="attention variant (default: grpe)")
    parser.add_argument("--preset", default=None, help="preset of the model: grpe tiny|small, moire 2d|3d, gradformer default, vanilla/graphormer tiny")
    parser.add_argument("--atom-features", choices=("ogb", "canonical"), default="ogb", help="atom/bond featurizer (default: ogb)")
    parser.add_argument("--task", choices=("regression", "classification"), default="regression")
    parser.add_argument("--split", choices=("random", "scaffold"), default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--patience", type=int, default=0, help="early-stopping patience in epochs (0: off)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    parser.add_argument("--cache-dir", default=None, help="folder caching featurized molecules")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(prog="dgl-graphtx", description="Graph transformers (GRPE, MoireGT, Gradformer) for molecules on DGL.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a model on a CSV or SDF file", description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.")
    train.add_argument("data", help="CSV (one SMILES column + targets) or SDF (targets as SD properties)")
    train.add_argument("--targets", required=True, help="comma-separated target column / SD property names")
    train.add_argument("--smiles-col", default="smiles", help="SMILES column of a CSV (default: smiles)")
    train.add_argument("--out", required=True, help="output folder")
    _add_train_options(train)

    predict = sub.add_parser("predict", help="predict SMILES with a checkpoint", description="Predict from SMILES given as arguments or in a CSV; invalid SMILES get NaN and an error message.")
    predict.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    predict.add_argument("--checkpoint", required=True, help="checkpoint written by 'train' (best.pt)")
    predict.add_argument("--input", help="CSV with a SMILES column")
    predict.add_argument("--smiles-col", default="smiles")
    predict.add_argument("--output", help="write the table to this CSV (default: print it)")
    predict.add_argument("--device", default="auto")
    predict.add_argument("--batch-size", type=int, default=256)

    evaluate = sub.add_parser("evaluate", help="metrics of a checkpoint on a labelled CSV")
    evaluate.add_argument("data", help="CSV with the SMILES column and the checkpoint's target columns")
    evaluate.add_argument("--checkpoint", required=True)
    evaluate.add_argument("--smiles-col", default="smiles")
    evaluate.add_argument("--device", default="auto")

    sub.add_parser("info", help="versions and CUDA availability")

    demo = sub.add_parser("demo", help="train a small GRPE on the embedded FreeSolv data, then predict")
    demo.add_argument("--out", default="demo_run", help="output folder (default: demo_run)")
    demo.add_argument("--epochs", type=int, default=60)
    demo.add_argument("--seed", type=int, default=0)
    return parser


def _print_table(frame: pd.DataFrame) -> None:
    """Print a prediction table; molecules without an error show an empty ``error`` cell."""
    with pd.option_context("display.max_rows", 200, "display.width", 160, "display.max_colwidth", 60):
        print(frame.fillna({"error": ""}).to_string(index=False))


def _load_dataset(path: Path, targets: List[str], args, preset):

    kwargs = dict(featurizer=preset.featurizer, relation=preset.relation, cache_dir=args.cache_dir, progress=not args.no_progress)
    if path.suffix.lower() in (".sdf", ".sd"):
        return MoleculeDataset.from_sdf(path, targets, **kwargs)
    return MoleculeDataset.from_csv(path, args.smiles_col, targets, **kwargs)


def cmd_train(args) -> int:

    path = Path(args.data)
    if not path.is_file():
        raise GraphTxError(f"data file not found: {path}")
    targets = _split_targets(args.targets)
    preset = get_preset(args.model, args.preset, num_tasks=len(targets), task=args.task, atom_features=args.atom_features)
    dataset = _load_dataset(path, targets, args, preset)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                         seed=args.seed, device=args.device, progress=not args.no_progress)
    result = train_and_evaluate(dataset, preset, config, split=args.split, out_dir=args.out)
    print(f"best epoch {result.train.best_epoch}; validation: {_fmt(result.train.best_metrics)}")
    print(f"test ({len(result.split.test)} molecules): {_fmt(result.test_metrics)}")
    print(f"checkpoint: {Path(args.out) / 'best.pt'}")
    return 0


def _fmt(metrics) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())


def cmd_predict(args) -> int:

    if bool(args.smiles) == bool(args.input):
        raise GraphTxError("give SMILES as arguments or a CSV with --input (not both)")
    smiles: Sequence[str] = args.smiles
    if args.input:
        frame = read_molecule_csv(args.input, args.smiles_col)
        smiles = smiles_column(frame, args.smiles_col)
    table = Predictor(args.checkpoint, device=args.device, batch_size=args.batch_size).predict(smiles)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.output, index=False)
        print(f"wrote {len(table)} predictions ({int(table['error'].notna().sum())} invalid) to {args.output}")
    else:
        _print_table(table)
    return 0


def cmd_evaluate(args) -> int:

    predictor = Predictor(args.checkpoint, device=args.device)
    frame = read_molecule_csv(args.data, args.smiles_col)
    missing = [t for t in predictor.target_names if t not in frame.columns]
    if missing:
        raise GraphTxError(f"target column(s) {missing} of the checkpoint not in {args.data}")
    table = predictor.predict(smiles_column(frame, args.smiles_col))
    valid = table["error"].isna().to_numpy()
    y_true = frame.loc[valid, predictor.target_names].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    y_pred = table.loc[valid, predictor.target_names].to_numpy(dtype=float)
    metrics = compute_metrics(predictor.model.config.task, y_true, y_pred)
    labelled = int(np.isfinite(y_true).any(axis=1).sum())
    report = {"molecules": int(valid.sum()), "labelled": labelled, "invalid": int((~valid).sum()), **metrics}
    print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in report.items()}, indent=2))
    return 0


def cmd_info(args) -> int:

    for key, value in environment_report().items():
        print(f"{key:14s} {value}")
    return 0


def cmd_demo(args) -> int:

    print("dgl_graphtx demo: GRPE-Tiny on FreeSolv (642 molecules, hydration free energy, kcal/mol)")
    preset = get_preset("grpe", "tiny")
    dataset = freesolv(as_dataset=True, featurizer=preset.featurizer, relation=preset.relation,
                       cache_dir=Path(args.out) / "cache", progress=True)
    config = TrainConfig(epochs=args.epochs, batch_size=32, lr=1e-3, warmup_epochs=3, seed=args.seed, progress=True)
    result = train_and_evaluate(dataset, preset, config, split="random", out_dir=args.out)
    print(f"test RMSE {result.test_metrics['rmse']:.3f} kcal/mol, MAE {result.test_metrics['mae']:.3f} "
          f"(best epoch {result.train.best_epoch}; {len(result.split.test)} test molecules)")
    print(f"learning curve: {Path(args.out) / 'learning_curve.png'}")
    table = Predictor(Path(args.out) / "best.pt").predict(DEMO_SMILES)
    print("predictions (kcal/mol):")
    _print_table(table)
    return 0


COMMANDS = {"train": cmd_train, "predict": cmd_predict, "evaluate": cmd_evaluate, "info": cmd_info, "demo": cmd_demo}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``dgl-graphtx`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except GraphTxError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
