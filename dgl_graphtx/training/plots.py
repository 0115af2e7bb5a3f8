"""Plots people look at: learning curves and parity plots (PNG).

Figures are matplotlib :class:`~matplotlib.figure.Figure` objects made without ``pyplot``: drawing
needs no display, and importing this module leaves the caller's backend (a notebook's, say) as it is.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence, Union

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..atomic_io import atomic_path

PathLike = Union[str, Path]


def _save_figure(fig: Figure, path: Path) -> None:
    """Save atomically (format from the file suffix)."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format=path.suffix.lstrip(".") or "png")


def plot_learning_curve(history: pd.DataFrame, metric: str, path: PathLike) -> Path:
    """Training loss and the validation ``metric`` per epoch, side by side.

    Example:
        >>> import tempfile
        >>> h = pd.DataFrame({"epoch": [1, 2], "train_loss": [1.0, 0.5], "valid_rmse": [2.0, 1.5]})
        >>> plot_learning_curve(h, "rmse", tempfile.mkdtemp() + "/curve.png").name
        'curve.png'
    """
    fig = learning_curve_figure(history, metric)
    path = Path(path)
    _save_figure(fig, path)
    return path


def learning_curve_figure(history: pd.DataFrame, metric: str) -> Figure:
    """The figure of :func:`plot_learning_curve`, its epoch axes ticked at whole epochs.

    Example:
        >>> h = pd.DataFrame({"epoch": [1, 2], "train_loss": [1.0, 0.5], "valid_rmse": [2.0, 1.5]})
        >>> fig = learning_curve_figure(h, "rmse")
        >>> [t for t in fig.axes[0].get_xticks().tolist() if 1 <= t <= 2]
        [1.0, 2.0]
    """
    fig = Figure(figsize=(9, 3.5))
    axes = fig.subplots(1, 2)
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].plot(history["epoch"], history["train_loss"], label="train loss")
    axes[0].set(xlabel="epoch", ylabel="loss (standardised)", yscale="log", title="training loss")
    column = f"valid_{metric}"
    if column in history:
        axes[1].plot(history["epoch"], history[column], color="tab:orange")
        if history[column].notna().any():  # e.g. ROC-AUC is undefined on a one-class validation set
            best = history[column].idxmin() if metric in ("rmse", "mae") else history[column].idxmax()
            axes[1].axvline(history["epoch"][best], color="grey", linestyle=":", label=f"best epoch {history['epoch'][best]}")
            axes[1].legend()
    axes[1].set(xlabel="epoch", ylabel=metric, title=f"validation {metric}")
    fig.tight_layout()
    return fig


def plot_parity(y_true: Sequence[float], y_pred: Sequence[float], path: PathLike, title: str = "", unit: str = "") -> Path:
    """Predicted vs. measured scatter with the identity line and RMSE in the legend.

    Example:
        >>> import tempfile
        >>> plot_parity([1, 2, 3], [1.1, 1.9, 3.2], tempfile.mkdtemp() + "/parity.png").suffix
        '.png'
    """
    path = Path(path)
    y, p = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    keep = ~(np.isnan(y) | np.isnan(p))
    y, p = y[keep], p[keep]
    rmse = float(np.sqrt(np.mean((y - p) ** 2))) if len(y) else float("nan")
    lo, hi = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
    fig = Figure(figsize=(4.5, 4.5))
    ax = fig.subplots()
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.scatter(y, p, s=12, alpha=0.7, label=f"RMSE {rmse:.3f} {unit}".rstrip())
    label = f" ({unit})" if unit else ""
    ax.set(xlabel=f"measured{label}", ylabel=f"predicted{label}", title=title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    _save_figure(fig, path)
    return path
