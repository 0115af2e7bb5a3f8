"""Splits by position in chemical space: k-means clusters of fingerprints, and Kennard-Stone."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
from rdkit import Chem, DataStructs, rdBase
from rdkit.Chem import rdFingerprintGenerator

from ..errors import ConfigError
from .splits import DEFAULT_FRACTIONS, Split, _sizes, assign_groups

#: Distances of :func:`kennard_stone_order`: Jaccard (1 - Tanimoto, for bit fingerprints) or Euclidean.
METRICS = ("jaccard", "euclidean")


def morgan_fingerprints(smiles: Sequence[str], radius: int = 2, size: int = 2048) -> np.ndarray:
    """Morgan (ECFP-like) bit fingerprints ``[N, size]`` as 0/1 ``uint8``; an unparsable SMILES
    gets an all-zero row.

    Example:
        >>> fp = morgan_fingerprints(["CCO", "c1ccccc1"], size=64)
        >>> fp.shape, fp.dtype.name, bool(fp[0].any())
        ((2, 64), 'uint8', True)
    """
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=size)
    out = np.zeros((len(smiles), size), dtype=np.uint8)
    with rdBase.BlockLogs():
        for index, smi in enumerate(smiles):
            mol = Chem.MolFromSmiles(smi)
            if mol is not None:
                DataStructs.ConvertToNumpyArray(generator.GetFingerprint(mol), out[index])
    return out


#: Kennard-Stone keeps all pairwise distances (float32): up to this many rows (about 1.6 GB).
MAX_KENNARD_STONE_ROWS = 20000


def pairwise_distances(features: np.ndarray, metric: str = "euclidean", block: int = 2048) -> np.ndarray:
    """All pairwise distances ``[N, N]`` (float32), computed in row blocks with matrix products:
    Euclidean, or Jaccard (1 - Tanimoto; 0 between two empty rows) of 0/1 rows.

    Example:
        >>> pairwise_distances(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0]]), "jaccard").round(3).tolist()
        [[0.0, 0.5, 1.0], [0.5, 0.0, 1.0], [1.0, 1.0, 0.0]]
    """
    if metric not in METRICS:
        raise ConfigError(f"Kennard-Stone metric must be one of {METRICS}, got {metric!r}")
    x = np.asarray(features, dtype=np.float64)
    if metric == "jaccard" and not np.isin(x, (0.0, 1.0)).all():
        raise ConfigError("the jaccard distance needs 0/1 features (bit fingerprints); use metric='euclidean'")
    norms = (x * x).sum(1)
    out = np.empty((len(x), len(x)), dtype=np.float32)
    for start in range(0, len(x), block):
        product = x[start:start + block] @ x.T
        if metric == "euclidean":
            out[start:start + block] = np.sqrt(np.maximum(norms[start:start + block, None] + norms[None, :] - 2 * product, 0.0))
        else:
            union = norms[start:start + block, None] + norms[None, :] - product
            out[start:start + block] = np.where(union > 0, 1.0 - product / np.where(union > 0, union, 1.0), 0.0)
    np.fill_diagonal(out, 0.0)
    return out


def kennard_stone_order(features: np.ndarray, metric: str = "euclidean") -> List[int]:
    """Kennard-Stone selection order of the rows of ``features``: first the two rows farthest
    apart (the lower index first), then repeatedly the row whose distance to its nearest
    selected row is largest. Ties go to the lowest index, so the order is deterministic.
    Memory grows with the square of the rows (see :data:`MAX_KENNARD_STONE_ROWS`).

    Example:
        >>> kennard_stone_order(np.array([[0.0], [1.0], [4.0], [10.0]]))
        [0, 3, 2, 1]
    """
    n = len(features)
    if n > MAX_KENNARD_STONE_ROWS:
        raise ConfigError(f"Kennard-Stone keeps all pairwise distances and handles up to {MAX_KENNARD_STONE_ROWS} "
                          f"molecules, got {n}; use the kmeans or scaffold split")
    if n < 3:
        return list(range(n))
    distances = pairwise_distances(features, metric)
    first, second = divmod(int(np.argmax(distances)), n)  # row-major: the first maximal pair
    order = [min(first, second), max(first, second)]
    nearest = np.minimum(distances[first], distances[second]).astype(np.float64)
    nearest[order] = -np.inf
    for _ in range(n - 2):
        pick = int(np.argmax(nearest))
        order.append(pick)
        nearest = np.minimum(nearest, distances[pick])
        nearest[pick] = -np.inf
    return order


def kennard_stone_split(features: np.ndarray, fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS,
                        metric: str = "euclidean") -> Split:
    """Kennard-Stone split: the first rows of :func:`kennard_stone_order` (which span the space)
    are the training part, the next ones validation, the last (the most interior) test.
    Deterministic: no seed.

    Example:
        >>> kennard_stone_split(np.array([[0.0], [1.0], [4.0], [10.0]]), (0.5, 0.25, 0.25))
        Split(train=[0, 3], valid=[2], test=[1])
    """
    n_train, n_valid = _sizes(len(features), fractions)
    order = kennard_stone_order(features, metric)
    return Split(sorted(order[:n_train]), sorted(order[n_train:n_train + n_valid]), sorted(order[n_train + n_valid:]))


def kmeans_clusters(features: np.ndarray, seed: int = 0, n_clusters: int = 10) -> np.ndarray:
    """The k-means cluster (0 .. ``n_clusters - 1``) of every row of ``features`` (scikit-learn
    ``KMeans`` seeded with ``seed``, ``n_init=10``).

    Example:
        >>> kmeans_clusters(np.array([[0.0], [0.1], [9.0]]), n_clusters=2).tolist() in ([0, 0, 1], [1, 1, 0])
        True
    """
    from sklearn.cluster import KMeans

    if not 1 <= n_clusters <= len(features):
        raise ConfigError(f"the k-means split makes {n_clusters} clusters of the molecules, and there are {len(features)}: give at "
                          f"least {n_clusters} molecules, or choose another --split")
    return KMeans(n_clusters=n_clusters, random_state=seed, n_init=10).fit_predict(np.asarray(features, dtype=np.float32))


def kmeans_split(features: np.ndarray, fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS, seed: int = 0,
                 n_clusters: int = 10) -> Split:
    """k-means split: rows are clustered (scikit-learn ``KMeans`` seeded with ``seed``), and whole
    clusters, largest first, fill train, then validation, then test (as chemprop does).

    Example:
        >>> x = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [9.0]])
        >>> kmeans_split(x, (0.5, 0.34, 0.16), n_clusters=3)
        Split(train=[0, 1, 2], valid=[3, 4], test=[5])
    """
    n_train, n_valid = _sizes(len(features), fractions)
    labels = kmeans_clusters(features, seed, n_clusters)
    groups = [np.flatnonzero(labels == c).tolist() for c in range(n_clusters)]
    groups = sorted((g for g in groups if g), key=lambda g: (-len(g), g[0]))
    return assign_groups(groups, n_train, n_valid)
