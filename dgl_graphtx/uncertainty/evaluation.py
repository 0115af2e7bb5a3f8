"""Calibrate a trained model's uncertainty on its calibration molecules and measure it on the test set."""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch

from .calibration import Calibration, check_spread, fit_regression_calibration, fit_temperature
from .config import UncertaintyConfig
from .inference import MoleculeModelLike, predict_with_uncertainty
from .metrics import binary_nll, spearman_rho, uncertainty_metrics

#: Yields the batches (:class:`~dgl_graphtx.datasets.MoleculeBatch`) of one dataset, in order.
Batches = Callable[[], Iterable]


class UncertainPredictions(NamedTuple):
    """Predictions ``[M, T]`` with their (calibrated) std and interval bounds, each ``None`` when
    the method or calibration gives none."""

    mean: np.ndarray
    std: Optional[np.ndarray]
    lo: Optional[np.ndarray] = None
    hi: Optional[np.ndarray] = None


def predict_batches(model: MoleculeModelLike, batches: Iterable, device: torch.device, config: UncertaintyConfig,
                    temperature: Optional[Sequence[float]] = None) -> UncertainPredictions:
    """Means and stds of :func:`predict_with_uncertainty` over all ``batches``, concatenated."""
    means: List[np.ndarray] = []
    stds: List[np.ndarray] = []
    for batch in batches:
        batch = batch.to(device)
        out = predict_with_uncertainty(model, batch.graph, batch.relation_graph, config.method, config.mc_samples, temperature)
        means.append(out.mean.double().cpu().numpy())
        if out.std is not None:
            stds.append(out.std.double().cpu().numpy())
    return UncertainPredictions(np.concatenate(means), np.concatenate(stds) if stds else None)


@torch.no_grad()
def predict_logits(model: MoleculeModelLike, batches: Iterable, device: torch.device) -> np.ndarray:
    """Deterministic (eval-mode) outputs ``[M, T]`` in training space: logits for classification."""
    was_training = model.training
    model.eval()
    try:
        return np.concatenate([model(b.graph.to(device), b.relation_graph.to(device)).double().cpu().numpy() for b in batches])
    finally:
        model.train(was_training)


def fit_calibration(model: MoleculeModelLike, batches: Batches, labels: np.ndarray, device: torch.device,
                    config: UncertaintyConfig, similarity: Optional[np.ndarray] = None,
                    names: Optional[Sequence[str]] = None) -> Tuple[Calibration, UncertainPredictions]:
    """Temperatures (classification) or z-scale and conformal quantiles (regression) fitted on the
    calibration ``labels`` ``[M, T]`` and the model's predictions of the same ``batches``; and
    those predictions, calibrated. With the molecules' ``similarity`` to the training part
    (regression), also per-bin quantiles (:mod:`~dgl_graphtx.uncertainty.mondrian`); ``names``:
    the targets', for messages."""
    if model.config.task == "classification":
        logits = predict_logits(model, batches(), device)
        temperatures = [fit_temperature(logits[:, t], labels[:, t]) for t in range(labels.shape[1])]
        calibration = Calibration(config.method, config.coverage, temperature=temperatures)
        predicted = predict_batches(model, batches(), device, config, temperatures)
        if predicted.std is not None:
            check_spread(config.method, labels, predicted.std, "classification", names)
        return calibration, predicted
    predicted = predict_batches(model, batches(), device, config)
    calibration = fit_regression_calibration(config.method, labels, predicted.mean, predicted.std, config.coverage, similarity, names)
    return calibration, calibrated(model.config.task, predicted, calibration, similarity)


def calibrated(task: str, predicted: UncertainPredictions, calibration: Optional[Calibration],
               similarity: Optional[np.ndarray] = None) -> UncertainPredictions:
    """Regression predictions with the calibration's std scale and intervals applied (others
    unchanged); ``similarity`` to the training part picks per-bin quantiles where the calibration has them."""
    if calibration is None or task == "classification":
        return predicted
    std, lo, hi = calibration.apply(predicted.mean, predicted.std, similarity)
    return UncertainPredictions(predicted.mean, std, lo, hi)


def report_metrics(task: str, labels: np.ndarray, predicted: UncertainPredictions,
                   names: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """Uncertainty metrics per target name: :func:`uncertainty_metrics` for regression; for
    classification the NLL of the (temperature-scaled) probabilities and, with a std, Spearman rho
    of std vs |label - probability|.

    Example:
        >>> y = np.array([[0.0], [1.0], [2.0]]); p = UncertainPredictions(np.zeros((3, 1)), None, -np.ones((3, 1)), np.ones((3, 1)))
        >>> report_metrics("regression", y, p, ["y"])
        {'y': {'coverage': 0.6666666666666666, 'width': 2.0}}
    """
    out: Dict[str, Dict[str, float]] = {}
    for t, name in enumerate(names):
        y, mean, std = labels[:, t], predicted.mean[:, t], _column(predicted.std, t)
        if task == "classification":
            keep = np.isfinite(y)
            metrics = {"nll": binary_nll(y, mean)}
            if std is not None:
                metrics["spearman"] = spearman_rho(std[keep], np.abs(y - mean)[keep])
        else:
            metrics = uncertainty_metrics(y, mean, std, _column(predicted.lo, t), _column(predicted.hi, t))
        out[name] = metrics
    return out


def _column(values: Optional[np.ndarray], target: int) -> Optional[np.ndarray]:
    """Column ``target`` of ``values``, or ``None`` where a method gives no such values."""
    return None if values is None else values[:, target]


def add_uncertainty_columns(table: pd.DataFrame, names: Sequence[str], predicted: UncertainPredictions,
                            after: Callable[[str], str]) -> pd.DataFrame:
    """Insert ``<name>_std``, ``<name>_lo`` and ``<name>_hi`` (those that exist) after the column
    ``after(name)`` of each target (its prediction), in place; returns ``table``.

    Example:
        >>> t = pd.DataFrame({"smiles": ["C"], "y_pred": [1.0], "error": [None]})
        >>> p = UncertainPredictions(np.ones((1, 1)), np.full((1, 1), 0.5), np.zeros((1, 1)), np.full((1, 1), 2.0))
        >>> list(add_uncertainty_columns(t, ["y"], p, lambda name: f"{name}_pred").columns)
        ['smiles', 'y_pred', 'y_std', 'y_lo', 'y_hi', 'error']
    """
    for t, name in enumerate(names):
        position = table.columns.get_loc(after(name)) + 1
        for suffix, values in (("std", predicted.std), ("lo", predicted.lo), ("hi", predicted.hi)):
            if values is not None:
                table.insert(position, f"{name}_{suffix}", values[:, t])
                position += 1
    return table


def json_ready(value):
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN or Infinity).

    Example:
        >>> json_ready({"q": [1.5, float("inf")], "m": {"nll": float("nan")}})
        {'q': [1.5, None], 'm': {'nll': None}}
    """
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _table_column(table: pd.DataFrame, column: str) -> Optional[np.ndarray]:
    """``table[column]`` as floats, or ``None`` where the table has no such column."""
    return table[column].to_numpy(float) if column in table else None


def format_uncertainty(table: pd.DataFrame, names: Sequence[str], coverage: float, predicted: Callable[[str], str]) -> str:
    """One line summarising a test-prediction table with the measured ``<t>``, the prediction
    column ``predicted(t)`` and uncertainty columns: interval coverage and mean width, and
    Spearman rho of std vs |error|, per target.

    Example:
        >>> t = pd.DataFrame({"y": [0.0, 2.0], "y_pred": [0.0, 0.0], "y_lo": [-1.0, -1.0], "y_hi": [1.0, 1.0]})
        >>> format_uncertainty(t, ["y"], 0.9, lambda name: f"{name}_pred")
        'y: 90% interval coverage 0.500, width 2.000'
    """
    parts = []
    for name in names:
        y, m = table[name].to_numpy(float), table[predicted(name)].to_numpy(float)
        std, lo, hi = (_table_column(table, f"{name}_{suffix}") for suffix in ("std", "lo", "hi"))
        metrics = uncertainty_metrics(y, m, std, lo, hi)
        text = []
        if "coverage" in metrics:
            text.append(f"{coverage:.0%} interval coverage {metrics['coverage']:.3f}, width {metrics['width']:.3f}")
        if "spearman" in metrics:
            text.append(f"Spearman rho(std, |error|) {metrics['spearman']:.3f}")
        parts.append(f"{name}: " + ", ".join(text or ["no uncertainty columns"]))
    return "; ".join(parts)
