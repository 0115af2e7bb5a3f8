"""Mondrian intervals by similarity to the training part: the per-bin quantiles against a
hand-worked example, and the stored record against a ``weights_only`` load."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize.similarity import packed_fingerprints
from dgl_graphtx.uncertainty import Calibration, fit_regression_calibration
from dgl_graphtx.uncertainty.mondrian import check_bin_sizes, coverage_by_bin

# Nine calibration molecules, three per similarity third (given in shuffled order), std 1, residuals
# whose mean square is 4: the z-scale is 2 and the normalised scores are |r| / 2.
SIMILARITY = np.array([0.5, 0.1, 0.9, 0.3, 0.7, 0.4, 0.2, 0.8, 0.6])
RESIDUAL = np.array([2.0, 4.0, 2.0, 0.0, 0.0, 2.0, -2.0, 0.0, -2.0])


def _hand_worked(coverage=0.7):
    labels = RESIDUAL[:, None]
    return fit_regression_calibration("mve", labels, np.zeros_like(labels), np.ones_like(labels), coverage, SIMILARITY)


def test_per_bin_quantiles_match_the_hand_worked_example():
    calibration = _hand_worked()
    # scores by third: low {0.1: 2, 0.2: 1, 0.3: 0}, middle {0.4: 1, 0.5: 1, 0.6: 1}, high {0.7: 0, 0.8: 0, 0.9: 1};
    # at coverage 0.7 the rank is ceil(4 * 0.7) = 3 of 3 in each bin, ceil(10 * 0.7) = 7 of 9 overall
    assert calibration.z_scale == [pytest.approx(2.0)]
    assert calibration.conformal == [pytest.approx(1.0)]  # sorted 0 0 0 1 1 1 1 1 2: the 7th
    bins = calibration.similarity_bins
    assert bins.edges == pytest.approx([0.1 + 8 / 3 * 0.1, 0.1 + 16 / 3 * 0.1])  # the terciles 0.367 and 0.633
    assert bins.conformal == [[pytest.approx(2.0)], [pytest.approx(1.0)], [pytest.approx(1.0)]]
    assert bins.counts == [[3], [3], [3]]
    # a new molecule (mean 0, raw std 1, so std 2 after z-scaling) takes its bin's quantile; an unknown similarity the plain one
    std, lo, hi = calibration.apply(np.zeros((4, 1)), np.ones((4, 1)), np.array([0.2, 0.5, 0.95, np.nan]))
    assert std[:, 0].tolist() == pytest.approx([2.0] * 4)
    assert hi[:, 0].tolist() == pytest.approx([4.0, 2.0, 2.0, 2.0]) and lo[:, 0].tolist() == pytest.approx([-4.0, -2.0, -2.0, -2.0])
    assert calibration.apply(np.zeros((1, 1)), np.ones((1, 1)))[2][0, 0] == pytest.approx(2.0)  # no similarity: plain


def test_a_bin_too_small_for_the_coverage_is_unbounded(caplog):
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        calibration = _hand_worked(coverage=0.8)  # ceil(4 * 0.8) = 4 > 3 molecules per bin
    assert np.isinf(calibration.similarity_bins.conformal).all() and "similarity bin" in caplog.text
    _, lo, hi = calibration.apply(np.zeros((1, 1)), np.ones((1, 1)), np.array([0.5]))
    assert np.isinf(hi).all() and np.isinf(lo).all()
    check_bin_sizes([27], 0.9)
    with pytest.raises(ConfigError, match="needs at least 27 labelled calibration molecules per target"):
        check_bin_sizes([40, 26], 0.9)


def test_coverage_by_bin_counts_each_third():
    calibration = _hand_worked()
    similarity = np.array([0.1, 0.2, 0.5, 0.9, np.nan])
    labels = np.array([[5.0], [0.0], [1.0], [3.0], [0.0]])
    lo, hi = np.full((5, 1), -1.0), np.full((5, 1), 2.0)
    rows = coverage_by_bin(calibration.similarity_bins, similarity, labels, lo, hi, ["y"])["y"]
    assert [(r["molecules"], r["coverage"], r["width"]) for r in rows] == [(2, 0.5, 3.0), (1, 1.0, 3.0), (1, 0.0, 3.0)]


def test_the_bins_and_fingerprints_survive_a_weights_only_load(tmp_path):
    calibration = _hand_worked()
    fingerprints = torch.from_numpy(packed_fingerprints(["CCO", "c1ccccc1"]))
    torch.save({"calibration": calibration.to_dict(), "training_fingerprints": fingerprints}, tmp_path / "c.pt")
    loaded = torch.load(tmp_path / "c.pt", weights_only=True)
    assert Calibration.from_dict(loaded["calibration"]) == calibration
    assert torch.equal(loaded["training_fingerprints"], fingerprints)
    old = {k: v for k, v in calibration.to_dict().items() if k != "similarity_bins"}  # a calibration stored before the bins
    assert Calibration.from_dict(old).similarity_bins is None


def test_each_bin_covers_as_promised_where_the_plain_interval_does_not():
    # errors grow as similarity falls (sd 1 + 3 (1 - s)) while the model's std stays 1: over 1,000
    # simulated calibration sets of 90 molecules, each bin's intervals cover new molecules of that bin
    # at about ceil(31 * 0.9) / 31 = 0.903 (30 scores a bin), the plain interval the least similar third far less often
    rng = np.random.default_rng(29)
    covered = {"mondrian": np.zeros(3), "plain": np.zeros(3)}
    counts = np.zeros(3)
    for _ in range(1000):
        similarity = rng.uniform(size=120)
        labels = (rng.normal(size=120) * (1 + 3 * (1 - similarity)))[:, None]
        mean, std = np.zeros_like(labels), np.ones_like(labels)
        calibration = fit_regression_calibration("mve", labels[:90], mean[:90], std[:90], 0.9, similarity[:90])
        where = calibration.similarity_bins.bin_of(similarity[90:])
        counts += np.bincount(where, minlength=3)
        for name, known in (("mondrian", similarity[90:]), ("plain", None)):
            _, lo, hi = calibration.apply(mean[90:], std[90:], known)
            inside = (labels[90:, 0] >= lo[:, 0]) & (labels[90:, 0] <= hi[:, 0])
            covered[name] += np.bincount(where, weights=inside, minlength=3)
    mondrian, plain = covered["mondrian"] / counts, covered["plain"] / counts
    # between k / (n + 1) = 28 / 31 and (k + 1) / (n + 1) = 29 / 31, less 3 binomial sds (0.003 over ~10,000 molecules a bin)
    assert ((mondrian > 28 / 31 - 0.01) & (mondrian < 29 / 31)).all(), mondrian
    assert plain[0] < 0.85 and plain[2] > 0.95
