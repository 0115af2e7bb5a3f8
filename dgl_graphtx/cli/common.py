"""Helpers shared by the ``dgl-graphtx`` sub-commands: option groups, target lists, table output."""
from __future__ import annotations

import argparse
from typing import Dict, List

import pandas as pd

MODELS = ("grpe", "moire", "gradformer", "vanilla", "graphormer")


def split_targets(text: str) -> List[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``.

    Example:
        >>> split_targets("logS, logP")
        ['logS', 'logP']
    """
    return [t.strip() for t in text.split(",") if t.strip()]


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """Model, split and optimisation options of ``train`` (and of commands that train)."""
    parser.add_argument("--model", choices=MODELS, default="grpe", help="attention variant (default: grpe)")
    parser.add_argument("--preset", default=None, help="preset of the model, with its paper's training recipe (list: dgl-graphtx presets); default: the model's first")
    parser.add_argument("--atom-features", choices=("ogb", "canonical"), default="ogb", help="atom/bond featurizer (default: ogb)")
    parser.add_argument("--task", choices=("regression", "classification"), default="regression")
    parser.add_argument("--split", choices=("random", "scaffold"), default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=None, help="default: the preset's recipe")
    parser.add_argument("--batch-size", type=int, default=None, help="default: the preset's recipe")
    parser.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the preset's recipe)")
    parser.add_argument("--patience", type=int, default=0, help="early-stopping patience in epochs (0: off)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    parser.add_argument("--cache-dir", default=None, help="folder caching featurized molecules")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def print_table(frame: pd.DataFrame) -> None:
    """Print a prediction table; molecules without an error show an empty ``error`` cell."""
    with pd.option_context("display.max_rows", 200, "display.width", 160, "display.max_colwidth", 60):
        print(frame.fillna({"error": ""}).to_string(index=False))


def format_metrics(metrics: Dict[str, float]) -> str:
    """``{"rmse": 1.0}`` -> ``"rmse 1.0000"``.

    Example:
        >>> format_metrics({"rmse": 1.0, "mae": 0.5})
        'rmse 1.0000, mae 0.5000'
    """
    return ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
