"""Mondrian conformal intervals by similarity to the training part (Vovk et al. 2005, ch. 4;
``uncertainty.calibration_bins = "similarity"``): the calibration molecules are cut into
:data:`SIMILARITY_BINS` equal-count bins of their nearest-neighbour Tanimoto similarity to the
training molecules (edges: the similarity terciles of the calibration molecules), and each bin
gets its own conformal quantile, by the same finite-sample rank as the plain quantile
(:func:`~dgl_graphtx.uncertainty.conformal.conformal_quantile`) among the bin's scores. A new
molecule takes the quantile of the bin its similarity falls in, so that molecules unlike the
training set get the wider intervals their larger errors need (coverage holds per bin for data
exchangeable within it, rather than only on average over all molecules).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, List

import numpy as np

from ..errors import ConfigError
from .conformal import conformal_quantile, needed_scores

logger = logging.getLogger("dgl_graphtx")

#: Equal-count bins of similarity the calibration molecules are cut into (as measured in docs/uncertainty.md).
SIMILARITY_BINS = 3


@dataclass
class SimilarityBins:
    """Per-bin conformal quantiles, stored in a :class:`~dgl_graphtx.uncertainty.Calibration`.

    Attributes:
        edges: the ``bins - 1`` inner edges; bin ``b`` holds similarities in ``[edges[b-1], edges[b])``.
        conformal: ``[bins][targets]`` conformal quantiles (``inf``: too few scores in the bin).
        counts: ``[bins][targets]`` labelled calibration molecules in each bin.

    Example:
        >>> bins = SimilarityBins(edges=[0.3, 0.6], conformal=[[3.0], [2.0], [1.0]], counts=[[9], [9], [9]])
        >>> bins.bin_of(np.array([0.1, 0.3, 0.9])).tolist(), bins.quantiles(np.array([0.1, 0.9])).tolist()
        ([0, 1, 2], [[3.0], [1.0]])
    """

    edges: List[float]
    conformal: List[List[float]]
    counts: List[List[int]]

    def bin_of(self, similarity: np.ndarray) -> np.ndarray:
        """The bin of each similarity (``[M]`` int; NaN falls in the last bin, so check finiteness first)."""
        return np.digitize(np.asarray(similarity, float), self.edges)

    def quantiles(self, similarity: np.ndarray) -> np.ndarray:
        """``[M, T]``: each molecule's per-target quantile, from its bin."""
        return np.asarray(self.conformal, float)[self.bin_of(similarity)]


def check_bin_sizes(labelled: List[int], coverage: float, bins: int = SIMILARITY_BINS) -> None:
    """Refuse calibration sets too small for ``bins`` bins to each hold the
    :func:`~dgl_graphtx.uncertainty.conformal.needed_scores` a finite quantile at ``coverage``
    needs; ``labelled``: the labelled calibration molecules per target.

    Example:
        >>> check_bin_sizes([27], 0.9)
        >>> check_bin_sizes([26], 0.9)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: --calibration-bins similarity at coverage 0.9 needs at least 27 labelled calibration molecules ...
    """
    least = bins * needed_scores(coverage)
    if min(labelled, default=0) < least:
        raise ConfigError(f"--calibration-bins similarity at coverage {coverage:g} needs at least {least} labelled calibration "
                          f"molecules per target ({bins} bins of {needed_scores(coverage)}), got {min(labelled, default=0)}; "
                          "raise --calibration-share, give a larger --calibration file, or use the plain calibration")


def fit_similarity_bins(similarity: np.ndarray, scores: np.ndarray, coverage: float, bins: int = SIMILARITY_BINS) -> SimilarityBins:
    """Bins of the calibration molecules' ``similarity`` ``[M]`` (equal-count: its quantiles at
    ``1/bins, ..., (bins-1)/bins``) and each bin's conformal quantile of the ``scores`` ``[M, T]``
    (NaN scores, missing labels, left out). A bin with fewer scores than the coverage needs (ties
    can unbalance the bins) gets an infinite quantile, as the plain rule does, with a warning.

    Example:
        >>> similarity = np.repeat([0.2, 0.5, 0.8], 10) + np.tile(np.arange(10) / 100, 3)
        >>> scores = (np.repeat([30.0, 20.0, 10.0], 10) + np.tile(np.arange(10), 3))[:, None]
        >>> fitted = fit_similarity_bins(similarity, scores, 0.9)  # each bin: the 10th of its 10 scores
        >>> [round(e, 3) for e in fitted.edges], fitted.conformal, fitted.counts
        ([0.43, 0.66], [[39.0], [29.0], [19.0]], [[10], [10], [10]])
    """
    similarity, scores = np.asarray(similarity, float), np.asarray(scores, float)
    edges = [float(e) for e in np.quantile(similarity, np.arange(1, bins) / bins)]
    fitted = SimilarityBins(edges, [], [])
    where = fitted.bin_of(similarity)
    for b in range(bins):
        inside = scores[where == b]
        fitted.conformal.append([conformal_quantile(inside[:, t], coverage) for t in range(scores.shape[1])])
        fitted.counts.append([int(np.sum(~np.isnan(inside[:, t]))) for t in range(scores.shape[1])])
    if not np.isfinite(fitted.conformal).all():
        logger.warning("a similarity bin holds fewer than the %d calibration labels a finite quantile at coverage %g needs "
                       "(counts per bin %s); its intervals are unbounded: use a larger calibration part",
                       needed_scores(coverage), coverage, fitted.counts)
    return fitted


def coverage_by_bin(bins: SimilarityBins, similarity: np.ndarray, labels: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    names: List[str]) -> Dict[str, List[Dict[str, Any]]]:
    """Per target name and similarity bin: the labelled molecules (``[M]`` ``similarity``,
    ``labels`` / ``lo`` / ``hi`` ``[M, T]``), the share their intervals cover and the mean width
    (``None`` for an empty bin), e.g. for the test part in ``metrics.json``.

    Example:
        >>> bins = SimilarityBins(edges=[0.5], conformal=[[2.0], [1.0]], counts=[[9], [9]])
        >>> y, lo, hi = np.array([[0.0], [3.0], [0.0]]), np.full((3, 1), -1.0), np.ones((3, 1))
        >>> coverage_by_bin(bins, np.array([0.2, 0.8, 0.9]), y, lo, hi, ["y"])["y"][1]
        {'bin': 1, 'from': 0.5, 'to': 1.0, 'molecules': 2, 'coverage': 0.5, 'width': 2.0}
    """
    where = bins.bin_of(similarity)
    bounds = [0.0, *bins.edges, 1.0]
    out: Dict[str, List[Dict[str, Any]]] = {}
    for t, name in enumerate(names):
        rows = []
        for b in range(len(bins.conformal)):
            inside = (where == b) & np.isfinite(similarity) & np.isfinite(labels[:, t])
            count = int(inside.sum())
            covered = (labels[inside, t] >= lo[inside, t]) & (labels[inside, t] <= hi[inside, t])
            rows.append({"bin": b, "from": bounds[b], "to": bounds[b + 1], "molecules": count,
                         "coverage": float(covered.mean()) if count else None,
                         "width": float(np.mean(hi[inside, t] - lo[inside, t])) if count else None})
        out[name] = rows
    return out
