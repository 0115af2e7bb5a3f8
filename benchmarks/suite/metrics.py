"""The one metric code path: every tool's test predictions are scored here, the same way."""
from __future__ import annotations

from typing import Callable, Dict

import numpy as np
from sklearn.metrics import roc_auc_score


def rmse(y: np.ndarray, p: np.ndarray) -> float:
    """Root-mean-square error.

    Example:
        >>> round(rmse(np.array([0.0, 0.0]), np.array([3.0, 4.0])), 4)
        3.5355
    """
    return float(np.sqrt(np.mean((y - p) ** 2)))


def mae(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(np.abs(y - p)))


def rocauc(y: np.ndarray, p: np.ndarray) -> float:
    return float(roc_auc_score(y.astype(int), p))


METRICS: Dict[str, Callable[[np.ndarray, np.ndarray], float]] = {"rmse": rmse, "mae": mae, "rocauc": rocauc}


def score(metric: str, labels: np.ndarray, predictions: np.ndarray) -> float:
    """``metric`` of ``predictions`` against ``labels`` (both 1-D, the test rows in file order)."""
    labels, predictions = np.asarray(labels, dtype=float), np.asarray(predictions, dtype=float)
    if labels.shape != predictions.shape:
        raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
    return METRICS[metric](labels, predictions)


def error(metric: str, value: float) -> float:
    """The metric as an error (lower is better): RMSE and MAE as they are, 1 - ROC-AUC."""
    return 1.0 - value if metric == "rocauc" else value


def relative_improvement(metric: str, a: float, b: float) -> float:
    """How much ``a`` beats ``b``, as a share of ``b``'s error (RMSE, MAE, or 1 - ROC-AUC):
    positive means ``a`` is better, comparable across sets with different metrics.

    Example:
        >>> relative_improvement("rmse", 0.9, 1.0), relative_improvement("rocauc", 0.8, 0.75)
        (0.1, 0.2)
    """
    return round((error(metric, b) - error(metric, a)) / error(metric, b), 12)
