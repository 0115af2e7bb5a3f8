"""Metrics of each target on its own, next to the mean over targets that
:func:`~dgl_graphtx.training.metrics.compute_metrics` gives (RMSE/MAE/R2 or ROC-AUC/AP), and the console
lines that show them."""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

from .metrics import compute_metrics


def per_target_metrics(task: str, y_true: np.ndarray, y_pred: np.ndarray, names: Sequence[str],
                       num_classes: int = 2) -> Dict[str, Dict[str, float]]:
    """``{target: {metric: value}}``: each target's column scored alone (NaN where undefined);
    a ``multiclass`` target's predictions are its ``num_classes`` probability columns.

    Example:
        >>> y = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, np.nan]])
        >>> p = np.array([[1.0, 1.0], [2.0, 1.0], [5.0, 9.0]])
        >>> m = per_target_metrics("regression", y, p, ["a", "b"])
        >>> round(m["a"]["rmse"], 4), round(m["a"]["mae"], 4), m["b"]["mae"]
        (1.1547, 0.6667, 1.0)
    """
    y_true, y_pred = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    width = num_classes if task == "multiclass" else 1
    return {name: compute_metrics(task, y_true[:, [t]], y_pred[:, t * width:(t + 1) * width]) for t, name in enumerate(names)}


def per_target_lines(per_target: Dict[str, Dict[str, float]], indent: str = "  ") -> List[str]:
    """Console lines ``  <target>: rmse 0.5000, mae ...`` (none for a single target, whose
    metrics are the mean already).

    Example:
        >>> per_target_lines({"a": {"rmse": 0.5}, "b": {"rmse": float("nan")}})
        ['  a: rmse 0.5000', '  b: rmse n/a']
    """
    if len(per_target) < 2:
        return []
    return [f"{indent}{name}: {format_metrics(values)}" for name, values in per_target.items()]


def format_metrics(metrics: Dict[str, float]) -> str:
    """``{"rmse": 1.0}`` -> ``"rmse 1.0000"``; undefined (NaN) metrics show as ``n/a``.

    Example:
        >>> format_metrics({"rmse": 1.0, "mae": 0.5, "r2": float("nan")})
        'rmse 1.0000, mae 0.5000, r2 n/a'
    """
    return ", ".join(f"{k} {v:.4f}" if np.isfinite(v) else f"{k} n/a" for k, v in metrics.items())
