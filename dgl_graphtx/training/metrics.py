"""Evaluation metrics: OGB's Evaluator where it applies (RMSE, ROC-AUC, AP), plus MAE and R^2.

Missing labels are NaN in ``y_true`` and ignored per task, as OGB does.
"""
from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np
from ogb.graphproppred import Evaluator

#: Metric used for model selection and early stopping per task type, and its direction.
PRIMARY_METRIC: Dict[str, Tuple[str, str]] = {"regression": ("rmse", "min"), "classification": ("rocauc", "max")}

# OGB evaluators are keyed by dataset; these datasets use the metric we want.
_OGB_DATASET_FOR_METRIC = {"rmse": "ogbg-molfreesolv", "rocauc": "ogbg-molhiv", "ap": "ogbg-molpcba"}


def _ogb(metric: str, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    evaluator = Evaluator(_OGB_DATASET_FOR_METRIC[metric])
    evaluator.num_tasks = y_true.shape[1]  # the metric itself is per-task averaged
    try:
        return float(evaluator.eval({"y_true": y_true, "y_pred": y_pred})[metric])
    except RuntimeError:  # OGB raises when no task has both classes
        return math.nan


def _per_task(fn, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    values = []
    for t in range(y_true.shape[1]):
        labeled = ~np.isnan(y_true[:, t])
        if labeled.any():
            values.append(fn(y_true[labeled, t], y_pred[labeled, t]))
    return float(np.mean(values)) if values else math.nan


def _r2(y: np.ndarray, p: np.ndarray) -> float:
    total = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - p) ** 2).sum()) / total if total > 0 else math.nan


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> Dict[str, float]:
    """``rmse`` (OGB), ``mae`` and ``r2``, each averaged over tasks.

    Example:
        >>> m = regression_metrics(np.array([[1.0], [2.0], [np.nan]]), np.array([[1.5], [2.5], [9.0]]))
        >>> m["rmse"], m["mae"]
        (0.5, 0.5)
    """
    y_true, y_pred = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    return {
        "rmse": _ogb("rmse", y_true, y_pred),
        "mae": _per_task(lambda y, p: float(np.abs(y - p).mean()), y_true, y_pred),
        "r2": _per_task(_r2, y_true, y_pred),
    }


def classification_metrics(y_true: np.ndarray, y_prob: np.ndarray) -> Dict[str, float]:
    """``rocauc`` and ``ap`` (OGB), averaged over tasks that have both classes (NaN if none).

    Example:
        >>> classification_metrics(np.array([[0.0], [1.0], [1.0]]), np.array([[0.1], [0.8], [0.7]]))["rocauc"]
        1.0
    """
    y_true, y_prob = np.asarray(y_true, dtype=np.float64), np.asarray(y_prob, dtype=np.float64)
    return {"rocauc": _ogb("rocauc", y_true, y_prob), "ap": _ogb("ap", y_true, y_prob)}


def compute_metrics(task: str, y_true: np.ndarray, y_pred: np.ndarray) -> Dict[str, float]:
    """Metrics for ``task`` (``regression`` or ``classification``)."""
    return regression_metrics(y_true, y_pred) if task == "regression" else classification_metrics(y_true, y_pred)
