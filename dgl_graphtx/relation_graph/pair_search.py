"""Sparse pair search for relation graphs: hop-bounded balls over bonds, and radius neighbours in 3-D.

Both searches cost time and memory in proportion to the pairs they find, never ``N^2``:

* :func:`hop_balls` runs one breadth-first search per node, bounded at ``depth`` hops, over the
  sparse (undirected) adjacency, many sources at once as sparse frontier matrices. On an
  undirected graph the neighbours of the nodes first reached at hop ``d`` lie at hops ``d - 1``,
  ``d`` or ``d + 1``, so the next frontier is ``frontier @ A`` minus the two last frontiers: no
  "visited" set, and work proportional to the pairs within ``depth`` hops.
* :func:`radius_pairs` asks scipy's k-d tree for the pairs within a distance.
"""
from __future__ import annotations

from typing import Iterator, Tuple

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

#: Breadth-first searches run for this many source nodes at a time (bounds the frontier memory).
SOURCES_PER_CHUNK = 2048

# cKDTree compares distances in its own arithmetic; asking for a hair more and filtering with
# numpy's norm keeps exactly the pairs ``np.linalg.norm(pos[i] - pos[j]) <= radius``.
_RADIUS_SLACK = 1e-9


def undirected_adjacency(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> sp.csr_matrix:
    """Symmetric 0/1 adjacency (int32 CSR) of the edges ``src -> dst``, self loops dropped.

    Example:
        >>> undirected_adjacency(3, np.array([0, 1]), np.array([1, 1])).toarray()
        array([[0, 1, 0],
               [1, 0, 0],
               [0, 0, 0]], dtype=int32)
    """
    off_diagonal = src != dst
    s, d = src[off_diagonal], dst[off_diagonal]
    adj = sp.csr_matrix(
        (np.ones(2 * len(s), dtype=np.int32), (np.concatenate([s, d]), np.concatenate([d, s]))),
        shape=(num_nodes, num_nodes),
    )
    adj.data[:] = 1  # duplicate edges were summed
    return adj


def hop_balls(
    adjacency: sp.csr_matrix, depth: int, chunk: int = SOURCES_PER_CHUNK
) -> Iterator[Tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """All pairs at most ``depth`` hops apart, with their exact hop counts, by source chunk.

    Yields ``(start, stop, source, target, hops)`` for the sources ``start <= source < stop``
    (int64 arrays, unordered); every pair ``(s, s)`` comes with hop count 0.

    Example:
        >>> adj = undirected_adjacency(4, np.array([0, 1, 2]), np.array([1, 2, 3]))  # a path
        >>> [(int(s), int(t), int(h)) for *_, src, tgt, hop in hop_balls(adj, 2)
        ...  for s, t, h in zip(src, tgt, hop) if s == 0]
        [(0, 0, 0), (0, 1, 1), (0, 2, 2)]
    """
    n = adjacency.shape[0]
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        sources = np.arange(start, stop, dtype=np.int64)
        rows = np.arange(stop - start)
        current = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, sources)), shape=(len(rows), n))
        previous = sp.csr_matrix((len(rows), n), dtype=np.int32)
        found_src, found_tgt, found_hops = [sources], [sources], [np.zeros(len(rows), dtype=np.int64)]
        for hop in range(1, depth + 1):
            reached = current @ adjacency
            reached.data[:] = 1
            reached = reached - reached.multiply(current + previous)  # drop hops hop-1 and hop-2
            reached.eliminate_zeros()
            if reached.nnz == 0:
                break
            coo = reached.tocoo()
            found_src.append(coo.row.astype(np.int64) + start)
            found_tgt.append(coo.col.astype(np.int64))
            found_hops.append(np.full(coo.nnz, hop, dtype=np.int64))
            previous, current = current, reached.tocsr()
        yield start, stop, np.concatenate(found_src), np.concatenate(found_tgt), np.concatenate(found_hops)


def radius_pairs(pos: np.ndarray, radius: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ordered pairs ``(i, j)``, ``i != j``, with ``||pos_i - pos_j|| <= radius``, and their distances.

    Example:
        >>> i, j, d = radius_pairs(np.array([[0.0, 0, 0], [1.5, 0, 0], [5.0, 0, 0]]), 2.0)
        >>> i.tolist(), j.tolist(), d.tolist()
        ([0, 1], [1, 0], [1.5, 1.5])
    """
    pos = np.asarray(pos, dtype=np.float64)
    found = cKDTree(pos).query_pairs(radius * (1.0 + _RADIUS_SLACK), output_type="ndarray").astype(np.int64)
    a, b = found[:, 0], found[:, 1]
    dist = np.linalg.norm(pos[a] - pos[b], axis=-1)
    within = dist <= radius
    a, b, dist = a[within], b[within], dist[within]
    return np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([dist, dist])
