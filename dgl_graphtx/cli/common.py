"""Helpers shared by the ``dgl-graphtx`` sub-commands: option groups, target lists, table output."""
from __future__ import annotations

import argparse
import math
from typing import Callable, Dict, List, Optional

import pandas as pd

from ..devices import resolve_device
from ..errors import ConfigError
from ..validation import check_number, describe_range

MODELS = ("grpe", "moire", "gradformer", "vanilla", "graphormer")


def split_targets(text: str) -> List[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``.

    Example:
        >>> split_targets("logS, logP")
        ['logS', 'logP']
    """
    return [t.strip() for t in text.split(",") if t.strip()]


def bounded(kind: type, low: Optional[float] = None, high: Optional[float] = None, **flags: bool) -> Callable[[str], float]:
    """An argparse ``type`` parsing ``kind`` (int or float) and checking its range at parse time.

    Example:
        >>> bounded(int, 1)("8")
        8
        >>> bounded(float, 0, 10)("nan")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be a finite number in [0, 10], got 'nan'
    """
    allowed = describe_range(low, high, integer=kind is int, **flags)

    def parse(text: str) -> float:
        try:
            return check_number("value", kind(text), low, high, integer=kind is int, **flags)
        except (ValueError, ConfigError):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def device_option(text: str) -> str:
    """An argparse ``type`` for ``--device``: the device must exist now (checked before any work).

    Example:
        >>> device_option("cpu")
        'cpu'
    """
    try:
        resolve_device(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """Model, split and optimisation options of ``train`` (and of commands that train)."""
    parser.add_argument("--model", choices=MODELS, default="grpe", help="attention variant (default: grpe)")
    parser.add_argument("--preset", default=None, help="preset of the model: grpe tiny|small, moire 2d|3d, gradformer default, vanilla/graphormer tiny")
    parser.add_argument("--atom-features", choices=("ogb", "canonical"), default="ogb", help="atom/bond featurizer (default: ogb)")
    parser.add_argument("--task", choices=("regression", "classification"), default="regression")
    parser.add_argument("--split", choices=("random", "scaffold"), default="random")
    parser.add_argument("--seed", type=bounded(int, 0, 2**32 - 1), default=0)
    parser.add_argument("--epochs", type=bounded(int, 1), default=100)
    parser.add_argument("--batch-size", type=bounded(int, 1), default=64)
    parser.add_argument("--lr", type=bounded(float, 0, 10), default=5e-4, help="peak learning rate (default: 5e-4)")
    parser.add_argument("--patience", type=bounded(int, 0), default=0, help="early-stopping patience in epochs (0: off)")
    parser.add_argument("--on-nonfinite", choices=("stop", "skip"), default="stop",
                        help="NaN/inf loss or gradient: stop with an error naming epoch and batch, or skip the step (default: stop)")
    parser.add_argument("--device", type=device_option, default="auto", help="auto, cpu, cuda, cuda:1 ...")
    parser.add_argument("--cache-dir", default=None, help="folder caching featurized molecules")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def print_table(frame: pd.DataFrame) -> None:
    """Print a prediction table; molecules without an error or warning show empty cells there."""
    with pd.option_context("display.max_rows", 200, "display.width", 160, "display.max_colwidth", 60):
        print(frame.fillna({"error": "", "warning": ""}).to_string(index=False))


def format_metrics(metrics: Dict[str, float]) -> str:
    """``{"rmse": 1.0}`` -> ``"rmse 1.0000"``; undefined (NaN) metrics show as ``n/a``.

    Example:
        >>> format_metrics({"rmse": 1.0, "mae": 0.5, "r2": float("nan")})
        'rmse 1.0000, mae 0.5000, r2 n/a'
    """
    return ", ".join(f"{k} {v:.4f}" if math.isfinite(v) else f"{k} n/a" for k, v in metrics.items())
