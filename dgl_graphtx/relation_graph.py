"""Relation graphs: the node pairs an attention layer scores, with their structural relations.

For a graph ``G`` with ``N`` nodes, the relation graph ``R`` lives on the same nodes (plus, when asked
for, one virtual node placed last). Each edge ``j -> i`` of ``R`` is one (key/value ``j``,
query ``i``) pair, so :func:`dgl.nn.functional.edge_softmax` over ``R`` normalises over each query's
candidates. Edge data:

* ``spd`` (int64): hop count in ``G``; 0 on self pairs, :data:`SPD_UNREACHABLE` (-1) between
  disconnected fragments, :data:`SPD_VIRTUAL` (-2) on pairs touching the virtual node.
* ``bond`` (int64): bond class of bonded pairs, else ``NO_EDGE`` / ``SELF`` / ``VIRTUAL``
  (see :class:`~dgl_graphtx.bond_classes.BondVocabulary`).
* ``dist`` (float32, only when coordinates exist): Euclidean distance; 0 on virtual-node pairs.

Node data: ``is_virtual`` (bool).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.csgraph import shortest_path

from . import _dgl_env  # noqa: F401
import dgl

from .bond_classes import BondVocabulary
from .errors import ConfigError

SPD_UNREACHABLE = -1
SPD_VIRTUAL = -2

_MODES = ("complete", "hops", "radius")


@dataclass(frozen=True)
class RelationConfig:
    """Which node pairs a relation graph keeps.

    Args:
        mode: ``"complete"`` (all ordered pairs), ``"hops"`` (pairs at most ``hops`` bonds apart)
            or ``"radius"`` (pairs at most ``radius`` Angstrom apart in 3-D). Self pairs are always
            kept, and so are virtual-node pairs.
        hops: bound for ``mode="hops"``.
        radius: bound in Angstrom for ``mode="radius"`` (needs coordinates).
        virtual_node: add one virtual node connected to every node in both directions.

    Example:
        >>> RelationConfig.parse("hops=3")
        RelationConfig(mode='hops', hops=3, radius=None, virtual_node=False)
        >>> str(RelationConfig(virtual_node=True))
        'complete+vn'
    """

    mode: str = "complete"
    hops: Optional[int] = None
    radius: Optional[float] = None
    virtual_node: bool = False

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ConfigError(f"relation mode must be one of {_MODES}, got {self.mode!r}")
        if self.mode != "hops" and self.hops is not None:
            raise ConfigError(f"hops={self.hops} given but mode is {self.mode!r}")
        if self.mode != "radius" and self.radius is not None:
            raise ConfigError(f"radius={self.radius} given but mode is {self.mode!r}")
        if self.mode == "hops":
            if isinstance(self.hops, bool) or not isinstance(self.hops, (int, np.integer)) or self.hops < 0:
                raise ConfigError(f"mode 'hops' needs an integer hops >= 0, e.g. RelationConfig('hops', hops=3); got {self.hops!r}")
            object.__setattr__(self, "hops", int(self.hops))
        if self.mode == "radius":
            if not isinstance(self.radius, (int, float, np.number)) or not 0 < float(self.radius) < math.inf:
                raise ConfigError(f"mode 'radius' needs a finite radius > 0, e.g. RelationConfig('radius', radius=5.0); got {self.radius!r}")
            object.__setattr__(self, "radius", float(self.radius))  # radius=5 and 5.0 are one setting

    @classmethod
    def parse(cls, spec: str, virtual_node: Optional[bool] = None) -> "RelationConfig":
        """Build from ``"complete"``, ``"hops=K"`` or ``"radius=R"``; a ``+vn`` suffix adds the
        virtual node (``virtual_node`` overrides it when given)."""
        text = spec.strip().lower()
        has_vn = text.endswith("+vn")
        text = text[:-3] if has_vn else text
        vn = has_vn if virtual_node is None else virtual_node
        if text == "complete":
            return cls("complete", virtual_node=vn)
        match = re.fullmatch(r"(hops|radius)\s*=\s*([0-9.eE+-]+)", text)
        if not match:
            raise ConfigError(
                f"cannot parse relation spec {spec!r}; use 'complete', 'hops=3' or 'radius=5.0'"
            )
        kind, value = match.groups()
        try:
            return cls("hops", hops=int(value), virtual_node=vn) if kind == "hops" else cls(
                "radius", radius=float(value), virtual_node=vn
            )
        except ValueError as err:
            raise ConfigError(f"bad number in relation spec {spec!r}: {err}") from None

    @property
    def needs_coordinates(self) -> bool:
        """Whether building this relation graph requires 3-D coordinates."""
        return self.mode == "radius"

    def __str__(self) -> str:
        base = {"complete": "complete", "hops": f"hops={self.hops}", "radius": f"radius={self.radius}"}[
            self.mode
        ]
        return base + ("+vn" if self.virtual_node else "")


#: Up to this many nodes, hop counts come from dense breadth-first frontiers (fast for molecules);
#: larger graphs use scipy's sparse breadth-first search.
DENSE_SPD_MAX_NODES = 256


def shortest_path_lengths(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """All-pairs hop counts of an undirected graph, ``-1`` where unreachable.

    Example:
        >>> shortest_path_lengths(3, np.array([0, 1]), np.array([1, 0]))
        array([[ 0,  1, -1],
               [ 1,  0, -1],
               [-1, -1,  0]])
    """
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if num_nodes > DENSE_SPD_MAX_NODES:
        return _sparse_hops(num_nodes, src, dst)
    adj = np.zeros((num_nodes, num_nodes), dtype=np.float32)
    adj[src, dst] = adj[dst, src] = 1.0
    hops = np.full((num_nodes, num_nodes), SPD_UNREACHABLE, dtype=np.int64)
    np.fill_diagonal(hops, 0)
    reached = np.eye(num_nodes, dtype=bool)
    frontier = reached.astype(np.float32)
    for distance in range(1, num_nodes):
        frontier = ((frontier @ adj) > 0) & ~reached  # row i: nodes first reached from i in `distance` hops
        if not frontier.any():
            break
        hops[frontier] = distance
        reached |= frontier
        frontier = frontier.astype(np.float32)
    return hops


def _sparse_hops(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    adj = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(num_nodes, num_nodes)).tocsr()
    hops = shortest_path(adj, method="D", directed=False, unweighted=True)
    out = np.full((num_nodes, num_nodes), SPD_UNREACHABLE, dtype=np.int64)
    finite = np.isfinite(hops)
    out[finite] = hops[finite].astype(np.int64)
    return out


def build_relation_graph(
    graph: dgl.DGLGraph,
    config: RelationConfig = RelationConfig(),
    *,
    vocab: BondVocabulary = BondVocabulary(),
    bond_class_field: str = "bond_class",
    pos_field: str = "pos",
) -> dgl.DGLGraph:
    """Build the relation graph of one (unbatched) graph.

    Args:
        graph: the molecular graph; bonds as edges in both directions. ``edata[bond_class_field]``
            (int64 bond classes, see :class:`BondVocabulary`) labels bonds; without it every bond
            gets class 0. ``ndata[pos_field]`` ([N, 3]) gives coordinates, when present.
        config: which pairs to keep.
        vocab: bond vocabulary whose special classes label non-bonded pairs.

    Returns:
        A DGLGraph (int64 ids) with edges ``j -> i`` for each kept pair, ordered by query ``i``
        then key ``j``, followed by virtual-node pairs (atoms -> VN, VN -> atoms, VN -> VN).

    Example:
        >>> import dgl, torch
        >>> g = dgl.graph(([0, 1], [1, 0]), num_nodes=2)
        >>> r = build_relation_graph(g, RelationConfig(virtual_node=True))
        >>> r.num_edges(), r.edata["spd"].tolist()
        (9, [0, 1, 1, 0, -2, -2, -2, -2, -2])
    """
    n = graph.num_nodes()
    src, dst = (t.cpu().numpy().astype(np.int64) for t in graph.edges())
    spd = shortest_path_lengths(n, src, dst)

    bond = np.full((n, n), vocab.no_edge, dtype=np.int64)
    if len(src):
        if bond_class_field in graph.edata:
            classes = graph.edata[bond_class_field].cpu().numpy().astype(np.int64)
        else:
            classes = np.zeros(len(src), dtype=np.int64)
        bond[dst, src] = classes  # [query i, key j] for the bond j -> i
    np.fill_diagonal(bond, vocab.self_pair)

    pos = graph.ndata[pos_field].cpu().double().numpy() if pos_field in graph.ndata else None
    if config.needs_coordinates and pos is None:
        raise ConfigError(
            f"relation mode {config} needs 3-D coordinates in ndata[{pos_field!r}]; "
            "featurize with coordinates='auto' (or 'etkdg'), or use mode 'complete'/'hops'"
        )
    dist = None if pos is None else np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)

    keep = np.ones((n, n), dtype=bool)
    if config.mode == "hops":
        keep = (spd >= 0) & (spd <= config.hops)
    elif config.mode == "radius":
        keep = dist <= config.radius
    np.fill_diagonal(keep, True)
    q_idx, k_idx = np.nonzero(keep)  # row-major: by query, then key

    rel_src, rel_dst = k_idx, q_idx
    e_spd, e_bond = spd[q_idx, k_idx], bond[q_idx, k_idx]
    e_dist = None if dist is None else dist[q_idx, k_idx]
    num_rel_nodes = n
    if config.virtual_node:
        vn = n
        atoms = np.arange(n, dtype=np.int64)
        vn_src = np.concatenate([atoms, np.full(n, vn), [vn]])
        vn_dst = np.concatenate([np.full(n, vn), atoms, [vn]])
        n_vn_edges = 2 * n + 1
        rel_src = np.concatenate([rel_src, vn_src])
        rel_dst = np.concatenate([rel_dst, vn_dst])
        e_spd = np.concatenate([e_spd, np.full(n_vn_edges, SPD_VIRTUAL)])
        e_bond = np.concatenate([e_bond, np.full(n_vn_edges, vocab.virtual)])
        if e_dist is not None:
            e_dist = np.concatenate([e_dist, np.zeros(n_vn_edges)])
        num_rel_nodes = n + 1

    rel = dgl.graph(
        (torch.from_numpy(rel_src.astype(np.int64)), torch.from_numpy(rel_dst.astype(np.int64))),
        num_nodes=num_rel_nodes,
        idtype=torch.int64,
    )
    rel.edata["spd"] = torch.from_numpy(e_spd.astype(np.int64))
    rel.edata["bond"] = torch.from_numpy(e_bond.astype(np.int64))
    if e_dist is not None:
        rel.edata["dist"] = torch.from_numpy(e_dist.astype(np.float32))
    is_virtual = torch.zeros(num_rel_nodes, dtype=torch.bool)
    is_virtual[n:] = True
    rel.ndata["is_virtual"] = is_virtual
    return rel
