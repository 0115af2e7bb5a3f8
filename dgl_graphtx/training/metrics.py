"""Evaluation metrics: OGB's Evaluator where it applies (RMSE, ROC-AUC, AP), plus MAE and R^2, the
log-loss of binary classification, and accuracy, macro-F1 and one-vs-rest ROC-AUC for multiclass
targets.

Missing labels are NaN in ``y_true`` and ignored per task, as OGB does.
"""
from __future__ import annotations

import math
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from ogb.graphproppred import Evaluator

from ..errors import ConfigError
from ..models.kernel import PROBABILITY_BOUNDS
from ..uncertainty.metrics import binary_nll

#: Metric used for model selection and early stopping per task type, and its direction.
PRIMARY_METRIC: Dict[str, Tuple[str, str]] = {"regression": ("rmse", "min"), "classification": ("rocauc", "max"),
                                              "multiclass": ("accuracy", "max")}
#: Metrics each task reports (all of them unless ``TrainConfig.metrics`` chooses).
TASK_METRICS: Dict[str, Tuple[str, ...]] = {"regression": ("rmse", "mae", "r2"), "classification": ("rocauc", "ap", "logloss"),
                                            "multiclass": ("accuracy", "f1", "rocauc")}
#: Whether a lower (``min``) or higher (``max``) value of a metric is better.
METRIC_DIRECTION: Dict[str, str] = {"rmse": "min", "mae": "min", "r2": "max", "rocauc": "max", "ap": "max",
                                    "logloss": "min", "accuracy": "max", "f1": "max"}

# OGB evaluators are keyed by dataset; these datasets use the metric we want.
_OGB_DATASET_FOR_METRIC = {"rocauc": "ogbg-molhiv", "ap": "ogbg-molpcba"}


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
    """``rmse`` (per task, as OGB's evaluator), ``mae`` and ``r2``, each averaged over the tasks
    that have labels (a task without any would make OGB's mean NaN, and with it the choice of the
    best epoch and early stopping).

    Example:
        >>> m = regression_metrics(np.array([[1.0], [2.0], [np.nan]]), np.array([[1.5], [2.5], [9.0]]))
        >>> m["rmse"], m["mae"]
        (0.5, 0.5)
        >>> regression_metrics(np.array([[1.0, np.nan], [2.0, np.nan]]), np.array([[1.5, 0.0], [2.5, 0.0]]))["rmse"]
        0.5
    """
    y_true, y_pred = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    return {
        "rmse": _per_task(lambda y, p: float(np.sqrt(((y - p) ** 2).mean())), y_true, y_pred),
        "mae": _per_task(lambda y, p: float(np.abs(y - p).mean()), y_true, y_pred),
        "r2": _per_task(_r2, y_true, y_pred),
    }


def classification_metrics(y_true: np.ndarray, y_prob: np.ndarray) -> Dict[str, float]:
    """``rocauc`` and ``ap`` (OGB), averaged over tasks that have both classes (NaN if none), and
    ``logloss`` (binary cross-entropy, probabilities kept within :data:`PROBABILITY_BOUNDS`),
    averaged over tasks that have labels.

    Example:
        >>> m = classification_metrics(np.array([[0.0], [1.0], [1.0]]), np.array([[0.1], [0.8], [0.7]]))
        >>> m["rocauc"], round(m["logloss"], 4)
        (1.0, 0.2284)
    """
    y_true, y_prob = np.asarray(y_true, dtype=np.float64), np.asarray(y_prob, dtype=np.float64)
    return {"rocauc": _ogb("rocauc", y_true, y_prob), "ap": _ogb("ap", y_true, y_prob),
            "logloss": _per_task(lambda y, p: binary_nll(y, p, PROBABILITY_BOUNDS[0]), y_true, y_prob)}


def _multiclass_task(y: np.ndarray, p: np.ndarray) -> Tuple[float, float, float]:
    """Accuracy, macro-F1 over the classes labelled or predicted (as sklearn's default), and the
    mean of each labelled class's ROC-AUC against the rest on its own probability column (sklearn's
    one-vs-rest when every class is labelled; NaN when fewer than two are)."""
    from sklearn.metrics import f1_score, roc_auc_score

    predicted = p.argmax(1)
    accuracy = float((predicted == y).mean())
    f1 = float(f1_score(y, predicted, average="macro", zero_division=0))
    present = np.unique(y)
    if len(present) < 2:
        return accuracy, f1, math.nan
    return accuracy, f1, float(np.mean([roc_auc_score(y == k, p[:, k]) for k in present]))


def multiclass_metrics(y_true: np.ndarray, y_prob: np.ndarray) -> Dict[str, float]:
    """``accuracy``, macro ``f1`` and one-vs-rest ``rocauc`` (over the classes present), averaged
    over tasks; ``y_true`` holds class indices ``[M, T]`` (NaN: missing), ``y_prob`` the class
    probabilities ``[M, T * K]`` (each target's ``K`` side by side).

    Example:
        >>> m = multiclass_metrics(np.array([[0.0], [1.0], [2.0], [2.0]]),
        ...                        np.array([[.8, .1, .1], [.2, .7, .1], [.1, .2, .7], [.6, .3, .1]]))
        >>> m["accuracy"], round(m["f1"], 4)
        (0.75, 0.7778)
    """
    y_true, y_prob = np.asarray(y_true, dtype=np.float64), np.asarray(y_prob, dtype=np.float64)
    k = y_prob.shape[1] // max(y_true.shape[1], 1)
    values = []
    for t in range(y_true.shape[1]):
        labelled = ~np.isnan(y_true[:, t])
        if labelled.any():
            values.append(_multiclass_task(y_true[labelled, t].astype(np.int64), y_prob[labelled, t * k:(t + 1) * k]))
    if not values:
        return {"accuracy": math.nan, "f1": math.nan, "rocauc": math.nan}
    accuracy, f1, rocauc = (np.asarray(v) for v in zip(*values))
    finite = rocauc[np.isfinite(rocauc)]
    return {"accuracy": float(accuracy.mean()), "f1": float(f1.mean()),
            "rocauc": float(finite.mean()) if len(finite) else math.nan}


def resolve_metrics(task: str, names: Sequence[str] = ()) -> Tuple[str, ...]:
    """The metrics to report for ``task``: ``names`` checked (the first is the one early stopping
    and the best checkpoint watch), or all of the task's when empty.

    Example:
        >>> resolve_metrics("regression", ["mae", "rmse"]), resolve_metrics("multiclass")
        (('mae', 'rmse'), ('accuracy', 'f1', 'rocauc'))
    """
    if not names:
        return TASK_METRICS[task]
    unknown = [n for n in names if n not in TASK_METRICS[task]]
    if unknown:
        raise ConfigError(f"metric(s) {unknown} do not apply to {task}; choose from {TASK_METRICS[task]} (--metrics)")
    return tuple(names)


def compute_metrics(task: str, y_true: np.ndarray, y_pred: np.ndarray, names: Sequence[str] = ()) -> Dict[str, float]:
    """Metrics for ``task`` (``regression``, ``classification`` or ``multiclass``), only ``names``
    when given (in that order); undefined ones are NaN (:func:`metric_notes` says why), without
    numpy warnings."""
    functions = {"regression": regression_metrics, "classification": classification_metrics, "multiclass": multiclass_metrics}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        values = functions[task](y_true, y_pred)
    return {name: values[name] for name in resolve_metrics(task, names)}


def check_class_labels(y_true: np.ndarray, num_classes: int, names: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`ConfigError` unless every observed label is a class index 0 .. ``num_classes - 1``.

    Example:
        >>> check_class_labels(np.array([[0.0], [2.0]]), 3)
        >>> check_class_labels(np.array([[0.0], [3.0]]), 3, ["kind"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: multiclass needs labels 0 .. 2 (--num-classes 3), but target 'kind' has 1 other value(s) (e.g. ...
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    for t, name in enumerate(_names(names, y_true.shape[1])):
        column = y_true[:, t]
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~np.isnan(column) & ((column != np.round(column)) | (column < 0) | (column >= num_classes)))
        if len(bad):
            raise ConfigError(
                f"multiclass needs labels 0 .. {num_classes - 1} (--num-classes {num_classes}), but target {name!r} has "
                f"{len(bad)} other value(s) (e.g. {column[bad[0]]} in row {bad[0]}); number the classes from 0 or raise --num-classes"
            )


def _names(names: Optional[Sequence[str]], count: int) -> List[str]:
    return list(names) if names is not None else [f"target {t}" for t in range(count)]


def check_binary_labels(y_true: np.ndarray, names: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`ConfigError` unless every observed (non-NaN) label is 0 or 1.

    Classification targets are binary per task. Two other class values (say -1/1 or 'yes'/'no')
    must be mapped to 0/1 by the user, since which one is "positive" is theirs to decide.

    Example:
        >>> check_binary_labels(np.array([[0.0], [1.0], [np.nan]]))
        >>> check_binary_labels(np.array([[-11.0], [0.0]]), ["logS"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: classification needs labels 0 or 1, but target 'logS' has 1 other value(s) (e.g. -11.0 in row ...
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


def metric_notes(task: str, y_true: np.ndarray, names: Optional[Sequence[str]] = None,
                 labelled_in_input: Optional[Sequence[int]] = None) -> List[str]:
    """Why metrics are undefined (NaN) for ``y_true``, in words: targets without labels, or with
    one class only (classification) or fewer than two distinct values (R^2). ``labelled_in_input``:
    per target, the labelled molecules before those without a prediction were left out, so that a
    target whose labelled molecules all failed is not said to have none.

    Example:
        >>> metric_notes("classification", np.array([[1.0], [1.0]]), ["active"])
        ["target 'active': only class 1 among 2 labelled molecules, so ROC-AUC and AP are undefined"]
        >>> metric_notes("regression", np.empty((0, 1)), ["y"], labelled_in_input=[3])
        ["target 'y': none of its 3 labelled molecules has a prediction (the error column says why), so no metric can be computed"]
    """
    y_true = np.asarray(y_true, dtype=np.float64)
    notes = []
    for t, name in enumerate(_names(names, y_true.shape[1])):
        labelled = y_true[~np.isnan(y_true[:, t]), t]
        if not len(labelled) and labelled_in_input is not None and labelled_in_input[t]:
            notes.append(f"target {name!r}: none of its {labelled_in_input[t]} labelled molecules has a prediction (the error "
                         "column says why), so no metric can be computed")
        elif not len(labelled):
            notes.append(f"target {name!r}: no labelled molecules, so no metric can be computed")
        elif task != "regression" and len(np.unique(labelled)) < 2:
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
