"""How good an uncertainty is: Gaussian NLL, miscalibration area, interval coverage and width,
and the Spearman rank correlation of the predicted std with the absolute error."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
from scipy.stats import norm, spearmanr

#: Expected proportions at which the calibration curve is evaluated.
CURVE_POINTS = 101


def calibration_curve(residuals: np.ndarray, std: np.ndarray, points: int = CURVE_POINTS):
    """``(expected, observed)``: for central Gaussian intervals of probability ``p`` on a grid of
    ``points`` in ``[0, 1]``, the fraction of ``|residual| / std`` inside ``Phi^-1((1 + p) / 2)``.

    Example:
        >>> p, seen = calibration_curve(np.array([0.1, -3.0]), np.ones(2), points=3)
        >>> p.tolist(), seen.tolist()
        ([0.0, 0.5, 1.0], [0.0, 0.5, 1.0])
    """
    expected = np.linspace(0.0, 1.0, points)
    z = np.abs(np.asarray(residuals, float)) / np.asarray(std, float)
    bounds = norm.ppf((1.0 + expected) / 2.0)  # 0 ... inf
    observed = (z[None, :] <= bounds[:, None]).mean(1)
    return expected, observed


def miscalibration_area(residuals: np.ndarray, std: np.ndarray, points: int = CURVE_POINTS) -> float:
    """Area between the calibration curve and the diagonal (trapezoid rule over ``points``
    expected proportions): 0 for a calibrated Gaussian, up to 0.5.

    Example:
        >>> rng = np.random.default_rng(0); r = rng.normal(size=20000)
        >>> miscalibration_area(r, np.ones_like(r)) < 0.01, round(miscalibration_area(r, np.full_like(r, 1e-6)), 1)
        (True, 0.5)
    """
    expected, observed = calibration_curve(residuals, std, points)
    gap = np.abs(observed - expected)
    return float(np.sum((gap[1:] + gap[:-1]) / 2 * np.diff(expected)))


def gaussian_nll_mean(residuals: np.ndarray, std: np.ndarray) -> float:
    """Mean Gaussian negative log-likelihood of ``residuals`` under ``N(0, std^2)``.

    Example:
        >>> round(gaussian_nll_mean(np.array([1.0]), np.array([1.0])), 4)
        1.4189
    """
    var = np.asarray(std, float) ** 2
    return float(np.mean(0.5 * (np.log(2 * np.pi * var) + np.asarray(residuals, float) ** 2 / var)))


def spearman_rho(uncertainty: np.ndarray, abs_error: np.ndarray) -> float:
    """Spearman rank correlation (NaN when either side is constant or fewer than 3 values).

    Example:
        >>> round(spearman_rho(np.array([1.0, 2, 3, 4]), np.array([0.1, 0.3, 0.2, 0.9])), 6)
        0.8
    """
    u, e = np.asarray(uncertainty, float), np.asarray(abs_error, float)
    if len(u) < 3 or np.ptp(u) == 0 or np.ptp(e) == 0:
        return float("nan")
    return float(spearmanr(u, e)[0])


def uncertainty_metrics(labels: np.ndarray, mean: np.ndarray, std: Optional[np.ndarray] = None,
                        lo: Optional[np.ndarray] = None, hi: Optional[np.ndarray] = None) -> Dict[str, float]:
    """Uncertainty metrics of one target's predictions (NaN labels ignored): with ``std``,
    ``nll``, ``miscalibration_area`` and ``spearman`` (std vs |error|); with an interval,
    ``coverage`` (fraction of labels in ``[lo, hi]``) and ``width`` (mean ``hi - lo``).

    Example:
        >>> y = np.array([0.0, 1.0, 2.0, 3.0]); m = np.zeros(4)
        >>> out = uncertainty_metrics(y, m, lo=m - 1.5, hi=m + 1.5)
        >>> out["coverage"], out["width"]
        (0.5, 3.0)
    """
    keep = np.isfinite(labels) & np.isfinite(mean)
    y, m = labels[keep], mean[keep]
    out: Dict[str, float] = {}
    if std is not None:
        s = std[keep]
        out.update(nll=gaussian_nll_mean(y - m, s), miscalibration_area=miscalibration_area(y - m, s),
                   spearman=spearman_rho(s, np.abs(y - m)))
    if lo is not None and hi is not None:
        low, high = lo[keep], hi[keep]
        out.update(coverage=float(np.mean((y >= low) & (y <= high))), width=float(np.mean(high - low)))
    return out


def binary_nll(labels: np.ndarray, probabilities: np.ndarray, bound: float = 1e-12) -> float:
    """Mean binary cross-entropy of 0/1 ``labels`` (NaN ignored) under ``probabilities``, kept
    within ``bound`` of 0 and 1 (one certain mistake is a large loss, not an infinite one).

    Example:
        >>> round(binary_nll(np.array([1.0, 0.0, np.nan]), np.array([0.5, 0.5, 0.9])), 4)
        0.6931
    """
    keep = np.isfinite(labels) & np.isfinite(probabilities)
    p = np.clip(probabilities[keep], bound, 1 - bound)
    y = labels[keep]
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
