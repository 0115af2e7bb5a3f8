"""Conformal quantiles, CV+ intervals and the spread of one run's coverage, each against a
hand-worked example, a naive implementation and a simulation of what they promise."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dgl_graphtx.uncertainty import Calibration, conformal_quantile, coverage_spread, cv_plus_intervals
from dgl_graphtx.uncertainty.conformal import conformal_rank, out_of_fold_scores


def naive_quantile(scores, coverage):
    """The k-th smallest of the scores, k = ceil((n + 1) coverage), written out by counting."""
    values = sorted(s for s in scores if not math.isnan(s))
    k = math.ceil((len(values) + 1) * coverage - 1e-9)
    return values[k - 1] if k <= len(values) else math.inf


def naive_cv_plus(fold_means, fold_stds, scores, folds, coverage):
    """Barber et al.'s CV+ interval, one molecule at a time, with sorted lists."""
    n = len(scores)
    k = math.ceil((n + 1) * coverage - 1e-9)
    lo, hi = [], []

    def half(score, f, m):  # an infinite score gives an infinite half-width, whatever the std
        return math.inf if math.isinf(score) else score * (1 if fold_stds is None else fold_stds[f, m])

    for m in range(fold_means.shape[1]):
        upper = sorted(fold_means[f, m] + half(s, f, m) for s, f in zip(scores, folds))
        lower = sorted(fold_means[f, m] - half(s, f, m) for s, f in zip(scores, folds))
        hi.append(upper[k - 1] if k <= n else math.inf)
        lo.append(lower[n - k] if k <= n else -math.inf)  # the floor(alpha (n + 1))-th smallest
    return np.array(lo), np.array(hi)


# -- split-conformal quantile ------------------------------------------------------------------
def test_an_infinite_score_counts_as_the_largest():
    # a calibration molecule with std 0 and a non-zero residual has score inf: dropping it would
    # make the quantile too small. 10 scores at coverage 0.9: the 10th smallest, which is inf.
    scores = np.array([0.5] * 8 + [1.0, np.inf])
    assert conformal_quantile(scores, 0.9) == math.inf
    assert conformal_quantile(np.append(scores, np.nan), 0.9) == math.inf  # a missing label is not a score


def test_ties_keep_the_order_statistic():
    # 5 scores, coverage 0.5: k = ceil(6 * 0.5) = 3; the 3rd smallest of 1, 1, 1, 1, 2 is 1
    assert conformal_quantile(np.array([1.0, 2.0, 1.0, 1.0, 1.0]), 0.5) == 1.0
    assert conformal_rank(5, 0.5) == 3


@pytest.mark.parametrize("seed", range(5))
def test_quantile_matches_the_naive_count(seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.exponential(size=rng.integers(1, 40)), 1)  # rounded: ties
    scores[rng.random(len(scores)) < 0.1] = np.nan
    for coverage in (0.5, 0.8, 0.9, 0.95):
        assert conformal_quantile(scores, coverage) == naive_quantile(scores.tolist(), coverage)


def test_unbounded_intervals_stay_unbounded_where_the_std_is_zero():
    calibration = Calibration("mve", 0.9, z_scale=[1.0], conformal=[math.inf], normalised=True)
    _, lo, hi = calibration.apply(np.array([[1.0], [2.0]]), np.array([[0.0], [0.5]]))
    assert lo.tolist() == [[-math.inf], [-math.inf]] and hi.tolist() == [[math.inf], [math.inf]]


def test_out_of_fold_scores_by_hand():
    scores = out_of_fold_scores(np.array([1.0, 3.0, np.nan, 2.0, 5.0]), np.array([0.0, 0.0, 0.0, 2.0, 1.0]),
                                np.array([2.0, 0.0, 1.0, 0.0, 4.0]))
    assert scores[0] == 0.5 and scores[1] == math.inf and math.isnan(scores[2]) and scores[3] == 0.0 and scores[4] == 1.0


# -- CV+ ------------------------------------------------------------------------------------------
def test_cv_plus_by_hand():
    # two fold models predict the new molecule 0 and 10 (stds 1 and 2); scores 1, 2 (fold 0) and 3, 4
    # (fold 1). Coverage 0.6, n = 4: k = ceil(5 * 0.6) = 3.
    # upper values: 0 + 1*1, 0 + 2*1, 10 + 3*2, 10 + 4*2 = 1, 2, 16, 18 -> the 3rd smallest is 16
    # lower values: 0 - 1, 0 - 2, 10 - 6, 10 - 8 = -1, -2, 4, 2 -> the (n + 1 - k) = 2nd smallest is -1
    lo, hi = cv_plus_intervals(np.array([[0.0], [10.0]]), np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1]), 0.6,
                               fold_stds=np.array([[1.0], [2.0]]))
    assert lo.tolist() == [-1.0] and hi.tolist() == [16.0]


@pytest.mark.parametrize("normalised", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_cv_plus_matches_the_naive_implementation(seed, normalised):
    rng = np.random.default_rng(seed)
    k, n, m = 5, int(rng.integers(10, 60)), 17
    means = rng.normal(size=(k, m))
    stds = rng.uniform(0.1, 2.0, size=(k, m)) if normalised else None
    scores = np.round(rng.exponential(size=n), 1)
    folds = rng.integers(0, k, size=n)
    for coverage in (0.5, 0.9):
        lo, hi = cv_plus_intervals(means, scores, folds, coverage, stds)
        expected_lo, expected_hi = naive_cv_plus(means, stds, scores, folds, coverage)
        np.testing.assert_allclose(lo, expected_lo)
        np.testing.assert_allclose(hi, expected_hi)


def test_cv_plus_in_blocks_equals_all_at_once(monkeypatch):
    import dgl_graphtx.uncertainty.conformal as conformal

    rng = np.random.default_rng(3)
    args = (rng.normal(size=(3, 50)), rng.exponential(size=30), rng.integers(0, 3, size=30), 0.8, rng.uniform(0.5, 1, (3, 50)))
    whole = cv_plus_intervals(*args)
    monkeypatch.setattr(conformal, "CV_PLUS_BLOCK", 64)  # two molecules per block
    np.testing.assert_array_equal(cv_plus_intervals(*args)[0], whole[0])
    np.testing.assert_array_equal(cv_plus_intervals(*args)[1], whole[1])


def test_cv_plus_with_too_few_scores_or_an_infinite_one():
    means, stds = np.array([[0.0, 1.0], [2.0, 3.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])
    lo, hi = cv_plus_intervals(means, np.array([1.0, 2.0, 3.0]), np.array([0, 1, 0]), 0.9, stds)  # k = 4 > n = 3
    assert np.isneginf(lo).all() and np.isposinf(hi).all()
    # an infinite score stays infinite even against a zero std; NaN scores are left out
    scores = np.array([0.1, 0.2, np.inf, np.nan, 0.3])
    lo, hi = cv_plus_intervals(means, scores, np.array([0, 1, 0, 1, 1]), 0.75, stds)  # n = 4, k = 4: the largest
    assert np.isposinf(hi).all() and np.isneginf(lo).all()
    lo, hi = cv_plus_intervals(means, scores, np.array([0, 1, 0, 1, 1]), 0.5, stds)  # k = 3 of 4
    expected = naive_cv_plus(means, stds, [0.1, 0.2, np.inf, 0.3], [0, 1, 0, 1], 0.5)
    np.testing.assert_array_equal(lo, expected[0])
    np.testing.assert_array_equal(hi, expected[1])


def test_cv_plus_covers_new_labels_in_simulated_cross_validations():
    # K-fold CV+ with least-squares lines on heteroscedastic data: coverage of a new label is at
    # least 1 - 2 alpha in theory and close to 1 - alpha in practice (Barber et al. 2021, table 1).
    rng = np.random.default_rng(0)
    trials, n, folds, coverage = 1500, 40, 5, 0.9
    hits = []
    for _ in range(trials):
        x = rng.uniform(-2, 2, size=n + 1)
        y = 1.5 * x + rng.normal(size=n + 1) * (0.5 + np.abs(x))
        fold = np.arange(n) % folds
        means, scores = np.empty((folds, 1)), np.empty(n)
        for f in range(folds):
            slope, intercept = np.polyfit(x[:n][fold != f], y[:n][fold != f], 1)
            scores[fold == f] = np.abs(y[:n][fold == f] - (slope * x[:n][fold == f] + intercept))
            means[f, 0] = slope * x[n] + intercept
        lo, hi = cv_plus_intervals(means, scores, fold, coverage)
        hits.append(lo[0] <= y[n] <= hi[0])
    rate = np.mean(hits)
    assert rate >= 1 - 2 * (1 - coverage)
    assert abs(rate - coverage) < 4 * math.sqrt(coverage * (1 - coverage) / trials) + 0.01


# -- the spread of one run's coverage --------------------------------------------------------------
def test_coverage_spread_by_hand():
    # n = 19, coverage 0.9: k = 18, Beta(18, 2): mean 0.9, variance 18 * 2 / (20^2 * 21)
    spread = coverage_spread(19, 0.9)
    assert spread.mean == pytest.approx(0.9) and spread.sd == pytest.approx(math.sqrt(36 / (400 * 21)))
    assert coverage_spread(5, 0.9) == (1.0, 0.0, 1.0, 1.0)  # k = 6 > n: unbounded intervals cover everything


def test_coverage_spread_matches_simulated_split_conformal_runs():
    rng = np.random.default_rng(1)
    n, m, runs = 49, 60, 20_000
    calibration = np.abs(rng.normal(size=(runs, n)))
    quantiles = np.sort(calibration, axis=1)[:, conformal_rank(n, 0.9) - 1]
    covered = (np.abs(rng.normal(size=(runs, m))) <= quantiles[:, None]).mean(1)
    spread = coverage_spread(n, 0.9, n_test=m)
    assert covered.mean() == pytest.approx(spread.mean, abs=0.002)
    assert covered.std() == pytest.approx(spread.sd, rel=0.03)
    assert np.mean(covered < spread.low) == pytest.approx(0.05, abs=0.02)  # a discrete law: about 5% below its 5% point
    assert spread.mean == pytest.approx(stats.beta(45, 5).mean())
