"""Post-hoc calibration on the calibration molecules (ones that neither trained nor chose the
model: see :mod:`dgl_graphtx.uncertainty.conformal`): z-scaling and split-conformal intervals for
regression, temperature scaling for classification.

- z-scaling (Levi et al. 2022): one factor ``s`` per target multiplies every predicted std; the
  ``s`` minimising the Gaussian NLL of the residuals ``r`` is ``sqrt(mean(r^2 / std^2))``.
- split-conformal intervals (Vovk et al.; Lei et al. 2018): with scores ``|r| / std`` (normalised,
  when a std exists) or ``|r|``, ``q`` is the ``ceil((n + 1) coverage)``-th smallest of the ``n``
  calibration scores and the interval is ``mean +/- q * std`` (or ``+/- q``); for exchangeable data
  it covers a new label with probability at least ``coverage``.
- temperature scaling (Guo et al. 2017): logits divided by the ``T`` minimising the calibration
  cross-entropy.
"""
from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import minimize_scalar

from ..errors import ConfigError
from .conformal import conformal_quantile, needed_scores, out_of_fold_scores
from .methods import uncertainty_method
from .mondrian import SimilarityBins, fit_similarity_bins

logger = logging.getLogger("dgl_graphtx")


def fit_z_scale(residuals: np.ndarray, std: np.ndarray) -> float:
    """The factor ``s`` on ``std`` that minimises the Gaussian NLL of ``residuals``:
    ``sqrt(mean(r^2 / std^2))`` over finite entries with ``std > 0``.

    Example:
        >>> fit_z_scale(np.array([2.0, -2.0]), np.array([1.0, 1.0]))
        2.0
    """
    r, s = np.asarray(residuals, float), np.asarray(std, float)
    keep = np.isfinite(r) & np.isfinite(s) & (s > 0)
    if not keep.any():
        raise ConfigError("z-scaling needs at least one calibration label with a finite, positive std")
    return float(np.sqrt(np.mean((r[keep] / s[keep]) ** 2)))


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    """The temperature ``T`` in ``[0.05, 20]`` minimising the binary cross-entropy of
    ``sigmoid(logits / T)`` against 0/1 ``labels`` (NaN labels ignored).

    Example:
        >>> z = np.linspace(-4, 4, 9); y = (z > 0).astype(float)
        >>> fit_temperature(z, y) < 0.2  # separable: sharper is better
        True
    """
    z, y = np.asarray(logits, float), np.asarray(labels, float)
    keep = np.isfinite(z) & np.isfinite(y)
    z, y = z[keep], y[keep]
    if not len(z):
        raise ConfigError("temperature scaling needs at least one calibration label")

    def nll(log_t: float) -> float:
        x = z / math.exp(log_t)
        return float(np.mean(np.logaddexp(0.0, x) - y * x))  # BCE with logits, stable

    found = minimize_scalar(nll, bounds=(math.log(0.05), math.log(20.0)), method="bounded", options={"xatol": 1e-6})
    return float(math.exp(found.x))


@dataclass
class Calibration:
    """Calibration fitted on the calibration molecules, per target; stored in checkpoints as a plain dict.

    Attributes:
        method: the uncertainty method it was fitted for.
        coverage: coverage of the conformal intervals.
        z_scale: factor on each target's std (regression with a std).
        conformal: each target's conformal quantile ``q`` (regression).
        normalised: whether ``q`` is in units of std (else of the target).
        temperature: each target's temperature (classification).
        similarity_bins: per-bin quantiles by similarity to the training part (Mondrian, see
            :mod:`~dgl_graphtx.uncertainty.mondrian`), used in place of ``conformal`` for
            molecules whose similarity is known.

    Example:
        >>> c = Calibration("mve", 0.9, z_scale=[2.0], conformal=[1.5], normalised=True)
        >>> std, lo, hi = c.apply(np.array([[1.0]]), np.array([[0.5]]))
        >>> std.tolist(), lo.tolist(), hi.tolist()
        ([[1.0]], [[-0.5]], [[2.5]])
    """

    method: str
    coverage: float
    z_scale: Optional[List[float]] = None
    conformal: Optional[List[float]] = None
    normalised: bool = False
    temperature: Optional[List[float]] = None
    similarity_bins: Optional[SimilarityBins] = None

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict (``weights_only``-safe)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> Optional["Calibration"]:
        """Inverse of :meth:`to_dict` (``None`` stays ``None``; a dict from before the similarity
        bins has none)."""
        if data is None:
            return None
        bins = data.get("similarity_bins")
        return cls(**{**data, "similarity_bins": SimilarityBins(**bins) if bins is not None else None})

    def apply(self, mean: np.ndarray, std: Optional[np.ndarray], similarity: Optional[np.ndarray] = None
              ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
        """Calibrated ``(std, lo, hi)`` ``[M, T]`` for regression predictions (``None`` where not
        fitted); with similarity bins and each molecule's ``similarity`` ``[M]`` to the training
        part, a molecule's quantile is its bin's (the plain one where the similarity is NaN)."""
        if std is not None and self.z_scale is not None:
            std = std * np.asarray(self.z_scale)
        if self.conformal is None:
            return std, None, None
        quantile = np.broadcast_to(np.asarray(self.conformal, float), mean.shape)
        if self.similarity_bins is not None and similarity is not None:
            known = np.isfinite(similarity)[:, None]
            quantile = np.where(known, self.similarity_bins.quantiles(np.nan_to_num(similarity)), quantile)
        with np.errstate(invalid="ignore"):  # inf * 0 stays inf
            half = np.where(np.isinf(quantile), np.inf, quantile * (std if self.normalised else 1.0))
        return std, mean - half, mean + half


def no_spread_advice(task: str) -> str:
    """What to do when the networks' spread (an ensemble's members, MC dropout) is 0 because the
    fingerprint kernel carries the whole prediction: the mve head is for regression only.

    Example:
        >>> no_spread_advice("regression"), no_spread_advice("classification")
        ('train with --kernel none, or use --uncertainty mve', 'train with --kernel none')
    """
    return "train with --kernel none" + (", or use --uncertainty mve" if task == "regression" else "")


def _no_spread(method: str, target: str, task: str = "regression") -> str:
    """Why ``method`` cannot be calibrated on ``target`` when it predicts no spread on any
    calibration label, and, for the spread of networks (an ensemble's members, MC dropout), what to do."""
    source = uncertainty_method(method).std
    instead = no_spread_advice(task)
    why = {"members": ": the ensemble's members agree exactly, as they do when the fingerprint kernel carries every "
                      f"member's prediction (network weight 0); {instead}",
           "dropout": ": the dropout passes agree exactly, as they do when the fingerprint kernel carries the whole "
                      f"prediction (network weight 0); {instead}"}.get(source, "")
    return (f"the {method} uncertainty predicts no spread (std 0 or missing) on any calibration label of target "
            f"{target}, so it cannot be calibrated{why}")


def check_spread(method: str, labels: np.ndarray, std: np.ndarray, task: str, names: Optional[Sequence[str]] = None) -> None:
    """Raise :class:`~dgl_graphtx.errors.ConfigError` for the first target whose ``std`` is 0 or
    missing on every labelled calibration molecule (what :func:`fit_z_scale` refuses for
    regression; a classification's spread is checked here, as it has no z-scale).

    Example:
        >>> check_spread("mc_dropout", np.array([[0.0], [1.0]]), np.array([[0.1], [0.0]]), "classification")
        >>> check_spread("mc_dropout", np.array([[0.0], [1.0]]), np.zeros((2, 1)), "classification", ["active"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: the mc_dropout uncertainty predicts no spread ... of target 'active', ...; train with --kernel none
    """
    for t in range(labels.shape[1]):
        s = std[:, t]
        if not (np.isfinite(labels[:, t]) & np.isfinite(s) & (s > 0)).any():
            raise ConfigError(_no_spread(method, repr(names[t]) if names is not None else str(t), task))


def fit_regression_calibration(method: str, labels: np.ndarray, mean: np.ndarray, std: Optional[np.ndarray],
                               coverage: float, similarity: Optional[np.ndarray] = None,
                               names: Optional[Sequence[str]] = None) -> Calibration:
    """z-scaling (when ``std`` is given) and conformal quantiles per target from calibration
    ``labels``, ``mean`` and ``std`` ``[M, T]`` (NaN labels ignored); the conformal scores use the
    z-scaled std when the method's conformal scores are normalised (its ``scores`` in
    :data:`~dgl_graphtx.uncertainty.methods.UNCERTAINTY_METHODS`). With the calibration
    molecules' ``similarity`` ``[M]`` to the training part, the same scores also give per-bin
    quantiles (:func:`~dgl_graphtx.uncertainty.mondrian.fit_similarity_bins`). ``names``: the
    targets', for messages (default: their positions).

    Example:
        >>> rng = np.random.default_rng(0); y = rng.normal(size=(2000, 1)) * 3
        >>> c = fit_regression_calibration("mve", y, np.zeros_like(y), np.ones_like(y), 0.9)
        >>> round(c.z_scale[0], 1), round(c.conformal[0], 1)  # q ~ 1.645 after scaling
        (3.0, 1.6)
    """
    normalised = std is not None and uncertainty_method(method).scores == "normalised"
    scales, scores = [], []
    for t in range(labels.shape[1]):
        scaled = None
        if std is not None:
            try:
                scales.append(fit_z_scale(labels[:, t] - mean[:, t], std[:, t]))
            except ConfigError:  # no calibration label with spread
                raise ConfigError(_no_spread(method, repr(names[t]) if names is not None else str(t))) from None
            scaled = std[:, t] * scales[-1] if normalised else None
        scores.append(out_of_fold_scores(labels[:, t], mean[:, t], scaled))
    quantiles = [conformal_quantile(target_scores, coverage) for target_scores in scores]
    if not all(math.isfinite(q) for q in quantiles):
        logger.warning("conformal intervals at coverage %g need at least %d calibration labels per target; with fewer "
                       "they are unbounded (lo=-inf, hi=inf): use a larger --calibration-share or file, or a lower "
                       "--coverage", coverage, needed_scores(coverage))
    bins = fit_similarity_bins(similarity, np.stack(scores, axis=1), coverage) if similarity is not None else None
    return Calibration(method, coverage, scales if std is not None else None, quantiles, normalised, similarity_bins=bins)
