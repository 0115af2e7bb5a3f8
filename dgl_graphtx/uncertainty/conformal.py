"""Conformal intervals and what they promise.

- split conformal (Vovk et al. 2005; Lei et al. 2018): with ``n`` calibration scores (``|r| /
  std`` or ``|r|``) of molecules that neither trained nor chose the model, ``q`` is their
  ``k``-th smallest, ``k = ceil((n + 1) coverage)``; for exchangeable data ``mean +/- q std``
  covers a new label with probability in ``[k / (n + 1), k / (n + 1) + 1 / (n + 1))`` (the upper
  bound without ties).
- CV+ (Barber, Candes, Ramdas & Tibshirani 2021, "Predictive inference with the jackknife+"; the
  cross-conformal predictor of Vovk 2015 is contained in it): every molecule calibrates once,
  with its out-of-fold score against the model of the fold that left it out; the interval of a
  new molecule is ``[q-{mu_k(i)(x) - R_i s_k(i)(x)}, q+{mu_k(i)(x) + R_i s_k(i)(x)}]`` over the
  ``n`` molecules, ``q+`` the ``k``-th smallest, ``q-`` the ``(n + 1 - k)``-th smallest. With
  ``K`` folds it covers with probability at least ``1 - 2 alpha - min(2 (1 - 1/K) / (n/K + 1),
  (1 - K/n) / (K + 1))`` (their theorem 4, ``alpha = 1 - coverage``), and close to ``coverage``
  in practice.
- :func:`coverage_spread`: the coverage of one calibrated run is itself random; given the
  calibration set it is ``Beta(k, n + 1 - k)``, and measured on ``m`` test molecules
  ``BetaBinomial(m, k, n + 1 - k) / m`` (Vovk 2012; Angelopoulos & Bates 2023, section 3.2).

Scores that are NaN (missing labels) are left out; infinite scores (a zero std with a non-zero
residual) count, as the largest.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple

import numpy as np
from scipy.stats import beta, betabinom

from ..errors import ConfigError

#: Most ``n_calibration x molecules`` values sorted at once by :func:`cv_plus_intervals`.
CV_PLUS_BLOCK = 4_000_000


def conformal_rank(n: int, coverage: float) -> int:
    """``ceil((n + 1) coverage)``: the rank of the conformal quantile among ``n`` scores (above
    ``n``: the quantile is infinite).

    Example:
        >>> conformal_rank(19, 0.9), conformal_rank(9, 0.9), conformal_rank(8, 0.9)
        (18, 9, 9)
    """
    return math.ceil((n + 1) * coverage - 1e-9)


def needed_scores(coverage: float) -> int:
    """The fewest scores with a finite conformal quantile at ``coverage``: ``ceil(coverage / (1 - coverage))``.

    Example:
        >>> needed_scores(0.9), needed_scores(0.8)
        (9, 4)
    """
    return math.ceil(coverage / (1 - coverage) - 1e-9)


def conformal_quantile(scores: np.ndarray, coverage: float) -> float:
    """The ``ceil((n + 1) coverage)``-th smallest of the ``n`` non-NaN ``scores`` (``inf`` when
    that rank exceeds ``n``: too few calibration molecules for this coverage). An infinite score
    counts as the largest; ties are kept (the coverage is then at least ``k / (n + 1)``).

    Example:
        >>> conformal_quantile(np.arange(1.0, 11.0), 0.8)  # ceil(11 * 0.8) = 9th of 1..10
        9.0
        >>> conformal_quantile(np.array([1.0, np.inf, 2.0, np.nan] + [0.5] * 8), 0.9)  # 10 scores: the 10th
        inf
    """
    values = np.sort(np.asarray(scores, float)[~np.isnan(scores)])
    rank = conformal_rank(len(values), coverage)
    return float(values[rank - 1]) if 1 <= rank <= len(values) else math.inf


def out_of_fold_scores(labels: np.ndarray, means: np.ndarray, stds: Optional[np.ndarray] = None) -> np.ndarray:
    """Conformal scores ``|y - mean| / std`` (``|y - mean|`` without ``std``); NaN where the
    label is missing, ``inf`` where a zero std meets a non-zero residual, 0 where both are zero.

    Example:
        >>> out_of_fold_scores(np.array([1.0, 3.0, np.nan, 2.0]), np.array([0.0, 0.0, 0.0, 2.0]), np.array([2.0, 0.0, 1.0, 0.0]))
        array([0.5, inf, nan, 0. ])
    """
    residuals = np.abs(np.asarray(labels, float) - np.asarray(means, float))
    if stds is None:
        return residuals
    stds = np.asarray(stds, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = residuals / stds
    return np.where((stds == 0) & (residuals == 0), 0.0, scores)


def cv_plus_intervals(fold_means: np.ndarray, scores: np.ndarray, score_folds: np.ndarray, coverage: float,
                      fold_stds: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """CV+ intervals ``(lo, hi)`` ``[M]`` of ``M`` new molecules for one target.

    Args:
        fold_means: ``[K, M]``: each fold model's prediction of every new molecule.
        scores: ``[n]``: every calibration molecule's out-of-fold score (:func:`out_of_fold_scores`
            against the model of its fold); NaN scores (missing labels) are left out.
        score_folds: ``[n]``: the fold (0 .. K-1) whose model scored each molecule.
        coverage: the target coverage ``1 - alpha``.
        fold_stds: ``[K, M]``: each fold model's std of every new molecule, for normalised scores.

    With ``k = ceil((n + 1) coverage)``, ``hi`` is the ``k``-th smallest of
    ``fold_means[f_i] + scores_i * fold_stds[f_i]`` over the ``n`` molecules and ``lo`` the
    ``(n + 1 - k)``-th smallest of ``fold_means[f_i] - scores_i * fold_stds[f_i]``; both are
    infinite when ``k > n``.

    Example:
        >>> means = np.array([[0.0], [10.0]])  # two fold models, one new molecule
        >>> lo, hi = cv_plus_intervals(means, np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1]), 0.6)
        >>> float(lo[0]), float(hi[0])  # k = 3: hi from {1, 2, 13, 14}, lo the 2nd of {-1, -2, 7, 6}
        (-1.0, 13.0)
    """
    fold_means = np.atleast_2d(np.asarray(fold_means, float))
    scores = np.asarray(scores, float)
    score_folds = np.asarray(score_folds)
    if scores.shape != score_folds.shape or scores.ndim != 1:
        raise ConfigError(f"CV+ needs one fold per score, got {scores.shape} scores and {score_folds.shape} folds")
    if fold_stds is not None and np.shape(fold_stds) != fold_means.shape:
        raise ConfigError(f"CV+ fold stds {np.shape(fold_stds)} do not match the fold predictions {fold_means.shape}")
    keep = ~np.isnan(scores)
    scores, score_folds = scores[keep], score_folds[keep].astype(int)
    if len(scores) and not (0 <= score_folds.min() and score_folds.max() < len(fold_means)):
        raise ConfigError(f"CV+ scores name folds {sorted(set(score_folds.tolist()))} but there are {len(fold_means)} fold models")
    n, molecules = len(scores), fold_means.shape[1]
    k = conformal_rank(n, coverage)
    if k > n:
        return np.full(molecules, -math.inf), np.full(molecules, math.inf)
    lo, hi = np.empty(molecules), np.empty(molecules)
    block = max(1, CV_PLUS_BLOCK // max(n, 1))
    infinite = np.isinf(scores)[:, None]
    for start in range(0, molecules, block):
        columns = slice(start, start + block)
        centre = fold_means[score_folds, columns]  # [n, block]
        with np.errstate(invalid="ignore"):  # an infinite score stays infinite, even where a std is 0
            spread = np.where(infinite, math.inf, scores[:, None] * (fold_stds[score_folds, columns] if fold_stds is not None else 1.0))
        hi[columns] = np.partition(centre + spread, k - 1, axis=0)[k - 1]
        lo[columns] = np.partition(centre - spread, n - k, axis=0)[n - k]
    return lo, hi


class CoverageSpread(NamedTuple):
    """What one conformal run's coverage should look like for exchangeable data: its ``mean``,
    standard deviation ``sd`` and central 90% range ``[low, high]``."""

    mean: float
    sd: float
    low: float
    high: float


def coverage_spread(n_calibration: int, coverage: float, n_test: Optional[int] = None) -> CoverageSpread:
    """The spread of the coverage of one split-conformal run calibrated on ``n_calibration``
    molecules: ``Beta(k, n + 1 - k)`` for new molecules, ``BetaBinomial(n_test, k, n + 1 - k) /
    n_test`` as measured on ``n_test`` test molecules (``k = ceil((n + 1) coverage)``; ``mean``
    1, ``sd`` 0 when ``k > n``, the interval being infinite).

    Example:
        >>> spread = coverage_spread(99, 0.9)  # k = 90 of n + 1 = 100
        >>> round(spread.mean, 3), round(spread.sd, 3)
        (0.9, 0.03)
        >>> round(coverage_spread(99, 0.9, n_test=100).sd, 3)  # the test set's own binomial noise adds to it
        0.042
    """
    k = conformal_rank(n_calibration, coverage)
    if k > n_calibration:
        return CoverageSpread(1.0, 0.0, 1.0, 1.0)
    a, b = k, n_calibration + 1 - k
    if n_test is None:
        law = beta(a, b)
        return CoverageSpread(float(law.mean()), float(law.std()), float(law.ppf(0.05)), float(law.ppf(0.95)))
    counts = betabinom(n_test, a, b)
    return CoverageSpread(float(counts.mean()) / n_test, float(counts.std()) / n_test,
                          float(counts.ppf(0.05)) / n_test, float(counts.ppf(0.95)) / n_test)
