"""The dense relation-graph builder the library used before sparse construction, kept as a test reference.

It allocates ``N x N`` hop-count (scipy all-pairs breadth-first search), bond and distance tables
and a keep mask, then reads the kept pairs out of them row-major. It depends on numpy / scipy only,
so the sparse builder in ``dgl_graphtx.relation_graph`` is compared against code it does not share.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

SPD_UNREACHABLE, SPD_VIRTUAL = -1, -2


def dense_hops(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """All-pairs hop counts of the undirected graph, -1 where unreachable."""
    adj = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(n, n)).tocsr()
    hops = shortest_path(adj, method="D", directed=False, unweighted=True)
    out = np.full((n, n), SPD_UNREACHABLE, dtype=np.int64)
    finite = np.isfinite(hops)
    out[finite] = hops[finite].astype(np.int64)
    return out


def dense_relation(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    classes: Optional[np.ndarray],
    pos: Optional[np.ndarray],
    vocab,
    mode: str = "complete",
    hops: Optional[int] = None,
    radius: Optional[float] = None,
    virtual_node: bool = False,
) -> Dict[str, np.ndarray]:
    """Edges (``src`` = key, ``dst`` = query) and ``spd`` / ``bond`` / ``dist`` as the dense builder made them."""
    spd = dense_hops(n, src, dst)
    bond = np.full((n, n), vocab.no_edge, dtype=np.int64)
    if len(src):
        bond[dst, src] = np.zeros(len(src), dtype=np.int64) if classes is None else classes
    np.fill_diagonal(bond, vocab.self_pair)
    dist = None if pos is None else np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    keep = np.ones((n, n), dtype=bool)
    if mode == "hops":
        keep = (spd >= 0) & (spd <= hops)
    elif mode == "radius":
        keep = dist <= radius
    np.fill_diagonal(keep, True)
    q, k = np.nonzero(keep)
    out = {"src": k, "dst": q, "spd": spd[q, k], "bond": bond[q, k]}
    if dist is not None:
        out["dist"] = dist[q, k].astype(np.float32)
    if virtual_node:
        atoms = np.arange(n)
        m = 2 * n + 1
        out["src"] = np.concatenate([out["src"], atoms, np.full(n, n), [n]])
        out["dst"] = np.concatenate([out["dst"], np.full(n, n), atoms, [n]])
        out["spd"] = np.concatenate([out["spd"], np.full(m, SPD_VIRTUAL)])
        out["bond"] = np.concatenate([out["bond"], np.full(m, vocab.virtual)])
        if dist is not None:
            out["dist"] = np.concatenate([out["dist"], np.zeros(m, dtype=np.float32)])
    return out
