"""Kennard-Stone and k-means splits, and cross-validation folds."""
import itertools

import numpy as np
import pytest

from dgl_graphtx.datasets import cv_splits, kennard_stone_order, kennard_stone_split, kmeans_split, morgan_fingerprints
from dgl_graphtx.datasets.freesolv import freesolv
from dgl_graphtx.errors import ConfigError


def naive_kennard_stone(points):
    """Textbook Kennard-Stone with a full distance matrix."""
    d = np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(-1))
    i, j = np.unravel_index(np.argmax(d), d.shape)
    order = [min(i, j), max(i, j)]
    while len(order) < len(points):
        rest = [k for k in range(len(points)) if k not in order]
        order.append(max(rest, key=lambda k: (d[k, order].min(), -k)))
    return order


def test_kennard_stone_by_hand_on_a_square_with_a_centre():
    # corners of a 4x3 rectangle, its centre, and a point near corner (0, 0)
    points = np.array([[0, 0], [4, 0], [0, 3], [4, 3], [2, 1.5], [0.5, 0]], dtype=float)
    # farthest pair: the diagonals (0,3) and (1,2), both 5 apart: the first found, (0, 3), wins.
    # nearest-selected distances then: 1 -> 3, 2 -> 3, 4 -> 2.5, 5 -> 0.5; tie 1/2 goes to 1;
    # next: 2 (3 from 0), then 4 (2.5), then 5 (0.5)
    assert kennard_stone_order(points) == [0, 3, 1, 2, 4, 5]
    assert kennard_stone_split(points, (0.5, 1 / 3, 1 / 6)) == ([0, 1, 3], [2, 4], [5])


def test_kennard_stone_matches_a_naive_implementation():
    points = np.random.default_rng(0).normal(size=(25, 3))
    assert kennard_stone_order(points) == naive_kennard_stone(points)


def test_kennard_stone_jaccard_on_bits():
    bits = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0]], dtype=np.uint8)
    # Jaccard: d(0,1)=1 (first maximal pair); then 2: min(1/3, 3/4)=1/3, 3: min(1/2, 1)=1/2 -> 3 first
    assert kennard_stone_order(bits, metric="jaccard") == [0, 1, 3, 2]


@pytest.fixture(scope="module")
def fingerprints():
    return morgan_fingerprints(freesolv()["smiles"][:80].tolist())


def test_kmeans_split_is_seeded_disjoint_and_complete(fingerprints):
    first = kmeans_split(fingerprints, seed=3, n_clusters=6)
    assert kmeans_split(fingerprints, seed=3, n_clusters=6) == first
    parts = [set(p) for p in first]
    assert all(not a & b for a, b in itertools.combinations(parts, 2))
    assert set().union(*parts) == set(range(len(fingerprints)))
    assert len(first.train) <= 64 and first.train


def test_kmeans_split_keeps_clusters_together():
    rng = np.random.default_rng(1)
    centres = np.array([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0]])
    sizes = [12, 5, 3]
    x = np.concatenate([c + rng.normal(size=(n, 2)) for c, n in zip(centres, sizes)])
    split = kmeans_split(x, (0.6, 0.25, 0.15), seed=0, n_clusters=3)
    assert split == (list(range(12)), list(range(12, 17)), list(range(17, 20)))
    with pytest.raises(ConfigError, match="makes 10 clusters of the molecules, and there are 5: give at least 10 molecules"):
        kmeans_split(x[:5])  # the probe: "needs between 1 and 5 clusters ..., got 10", a count the user cannot set


@pytest.mark.parametrize("kind", ["random", "scaffold", "group"])
def test_cv_folds_test_every_molecule_exactly_once(kind):
    smiles = freesolv()["smiles"][:60].tolist()
    groups = [s[:2] for s in smiles]
    splits = cv_splits(kind, 4, seed=2, n=len(smiles), smiles=smiles, groups=groups)
    tested = sorted(i for s in splits for i in s.test)
    assert tested == list(range(len(smiles)))
    for s in splits:
        assert sorted(s.train + s.valid + s.test) == list(range(len(smiles)))
        assert not set(s.train) & set(s.valid) and s.train and s.valid
    if kind == "group":  # a group never spans two test folds
        fold_of = {g: {k for k, s in enumerate(splits) for i in s.test if groups[i] == g} for g in groups}
        assert all(len(f) == 1 for f in fold_of.values())


def test_cv_needs_three_folds():
    with pytest.raises(ConfigError, match="--cv K >= 3"):
        cv_splits("random", 2, n=10)
