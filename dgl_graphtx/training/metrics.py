"""Evaluation metrics: OGB's Evaluator where it applies (RMSE, ROC-AUC, AP), plus MAE and R^2.

Missing labels are NaN in ``y_true`` and ignored per task, as OGB does.
"""
from __future__ import annotations

import math
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from ogb.graphproppred import Evaluator

from ..errors import ConfigError

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
    """Metrics for ``task`` (``regression`` or ``classification``); undefined ones are NaN
    (:func:`metric_notes` says why), without numpy warnings."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return regression_metrics(y_true, y_pred) if task == "regression" else classification_metrics(y_true, y_pred)


def _names(names: Optional[Sequence[str]], count: int) -> List[str]:
    return list(names) if names is not None else [f"target {t}" for t in range(count)]


def check_binary_labels(y_true: np.ndarray, names: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`ConfigError` unless every observed (non-NaN) label is 0 or 1.

    Classification targets are binary per task. Two other class values (say -1/1 or 'yes'/'no')
    must be mapped to 0/1 by the user, since which one is "positive" is theirs to decide.

    Example:
        >>> check_binary_labels(np.array([[0.0], [1.0], [np.nan]]))
        >>> check_binary_labels(np.array([[-11.0], [0.0]]), ["logS"])
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: classification needs labels 0 or 1, but target 'logS' has 1 other value(s) (e.g. -11.0 in row 0); map your two classes to 0/1, or train with task 'regression'
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    for t, name in enumerate(_names(names, y_true.shape[1])):
        column = y_true[:, t]
        bad = np.flatnonzero(~np.isnan(column) & (column != 0.0) & (column != 1.0))
        if len(bad):
            raise ConfigError(
                f"classification needs labels 0 or 1, but target {name!r} has {len(bad)} other value(s) "
                f"(e.g. {column[bad[0]]} in row {bad[0]}); map your two classes to 0/1, or train with task 'regression'"
            )


def metric_notes(task: str, y_true: np.ndarray, names: Optional[Sequence[str]] = None) -> List[str]:
    """Why metrics are undefined (NaN) for ``y_true``, in words: targets without labels, or with
    one class only (classification) or fewer than two distinct values (R^2).

    Example:
        >>> metric_notes("classification", np.array([[1.0], [1.0]]), ["active"])
        ["target 'active': only class 1 among 2 labelled molecules, so ROC-AUC and AP are undefined"]
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    notes = []
    for t, name in enumerate(_names(names, y_true.shape[1])):
        labelled = y_true[~np.isnan(y_true[:, t]), t]
        if not len(labelled):
            notes.append(f"target {name!r}: no labelled molecules, so no metric can be computed")
        elif task == "classification" and len(np.unique(labelled)) < 2:
            notes.append(f"target {name!r}: only class {labelled[0]:g} among {len(labelled)} labelled molecules, "
                         "so ROC-AUC and AP are undefined")
        elif task == "regression" and len(np.unique(labelled)) < 2:
            notes.append(f"target {name!r}: fewer than two distinct labels among {len(labelled)}, so R^2 is undefined")
    return notes


def json_safe(metrics: Dict[str, float]) -> Dict[str, Optional[float]]:
    """Metrics with NaN / infinite values as ``None`` (JSON has no NaN or Infinity).

    Example:
        >>> json_safe({"rmse": float("inf"), "mae": 0.5})
        {'rmse': None, 'mae': 0.5}
    """
    return {k: (float(v) if math.isfinite(v) else None) for k, v in metrics.items()}
