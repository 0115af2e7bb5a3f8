"""Per-graph dense blocks: the attention skeleton's sparse steps as batched dense operations.

A batch of small relation graphs (molecules) is a block-diagonal sparse matrix. When its blocks are
dense enough, scoring ``q_i . k_j`` on every edge, the softmax over each query's edges and summing
``a_ij v_j`` into every query run faster as dense operations over ``[B, H, n, n]`` blocks (``n`` =
nodes of the largest graph) than as DGL's CPU kernels (which loop over heads when the weights
``[E, H, 1]`` are broadcast against ``[N, H, dh]`` features). Edges keep their per-edge tensors
``[E, H]`` (structure terms, dropout and returned weights are unchanged); results are the same sums
(proved against the message-passing path in the tests); memory is ``B n^2 H`` per tensor, kept
within :data:`BLOCK_FILL_LIMIT` slots per edge, never ``E x H x dh``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from .. import _dgl_env  # noqa: F401
import dgl

#: The dense-block path is taken when the blocks hold at most this many slots per relation edge.
#: Measured (benchmarks/attention_speed.py, batch 128): blocks win on complete graphs of ZINC-sized
#: molecules (1.3 slots per edge) and lose to message passing on ``hops=3`` ZINC batches (2.9-3.3)
#: and on FreeSolv batches, padded to their largest molecule (5.3-8.6).
BLOCK_FILL_LIMIT = 2
#: Attribute of a relation graph holding its cached layouts (:meth:`BlockLayout.cached`).
LAYOUT_CACHE = "_dgl_graphtx_block_layouts"


@dataclass(frozen=True)
class BlockLayout:
    """Where a (batched) relation graph's nodes and edges sit in ``[B, H, n, n]`` dense blocks.

    Example:
        >>> g = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
        >>> layout = BlockLayout.of(g, num_heads=1)
        >>> layout.num_graphs, layout.size, layout.edge_slot.tolist()  # edge j -> i of graph b: (b n + i) n + j
        (2, 2, [[2], [1], [4]])
        >>> q = k = torch.randn(3, 1, 4)
        >>> torch.allclose(layout.scores(q, k)[:, 0], (q[[1, 0, 2]] * k[[0, 1, 2]]).sum(-1)[:, 0])
        True
    """

    num_graphs: int
    size: int
    num_heads: int
    node_slot: torch.Tensor  # [N]: b * n + local index
    edge_slot: torch.Tensor  # [E, H]: flat index of (b, h, i, j) in [B, H, n, n] for edge j -> i, head h
    on_edge: torch.Tensor  # [B, H, n, n] bool: the slot holds an edge

    @classmethod
    def of(cls, graph: dgl.DGLGraph, num_heads: int, fill_limit: Optional[float] = None) -> Optional["BlockLayout"]:
        """The layout of ``graph``'s batch, or ``None`` if an edge joins two graphs of the batch, a
        pair has two edges, or the blocks would hold more than ``fill_limit`` slots per edge (no
        limit when ``None``)."""
        counts = graph.batch_num_nodes().long()
        b, n, e = int(counts.numel()), int(counts.max()) if counts.numel() else 0, graph.num_edges()
        if e == 0 or (fill_limit is not None and b * n * n > fill_limit * e):
            return None
        device = counts.device
        graph_of = torch.repeat_interleave(torch.arange(b, device=device), counts)
        local = torch.arange(graph.num_nodes(), device=device) - (torch.cumsum(counts, 0) - counts)[graph_of]
        src, dst = (t.long() for t in graph.edges())
        edge_graph = graph_of[dst]
        if not torch.equal(graph_of[src], edge_graph):
            return None
        pair = edge_graph * (n * n) + local[dst] * n + local[src]
        if int(torch.bincount(pair, minlength=b * n * n).max()) > 1:
            return None
        pair = (pair - edge_graph * (n * n))[:, None]
        heads = torch.arange(num_heads, device=device)[None, :]
        edge_slot = (edge_graph[:, None] * num_heads + heads) * (n * n) + pair
        on_edge = torch.zeros(b * num_heads * n * n, dtype=torch.bool, device=device)
        on_edge[edge_slot.view(-1)] = True
        return cls(b, n, num_heads, graph_of * n + local, edge_slot, on_edge.view(b, num_heads, n, n))

    @classmethod
    def cached(cls, graph: dgl.DGLGraph, num_heads: int, fill_limit: Optional[float] = None) -> Optional["BlockLayout"]:
        """:meth:`of`, computed once per graph object and reused (every layer of a model attends
        over the same relation graph). The cache lives on ``graph`` and is keyed by the heads, the
        fill limit and the graph's size, so a graph edited in place gets a new layout.

        Example:
            >>> g = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
            >>> BlockLayout.cached(g, 2) is BlockLayout.cached(g, 2)
            True
        """
        cache = graph.__dict__.setdefault(LAYOUT_CACHE, {})
        key = (num_heads, fill_limit, graph.num_nodes(), graph.num_edges(), str(graph.device))
        if key not in cache:
            cache[key] = cls.of(graph, num_heads, fill_limit)
        return cache[key]

    def _pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[N, H, dh]`` -> ``[B, H, n, dh]``, zeros on padding."""
        out = x.new_zeros(self.num_graphs * self.size, *x.shape[1:]).index_copy(0, self.node_slot, x)
        return out.view(self.num_graphs, self.size, *x.shape[1:]).transpose(1, 2)

    def dense_scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``q_i . k_j`` for every pair of every graph: ``[B, H, n, n]`` from ``q, k`` ``[N, H, dh]``."""
        return self._pad(q) @ self._pad(k).transpose(-1, -2)

    def gather(self, dense: torch.Tensor) -> torch.Tensor:
        """The entries of ``dense`` ``[B, H, n, n]`` at the edges: ``[E, H]``."""
        return dense.reshape(-1).index_select(0, self.edge_slot.view(-1)).view(self.edge_slot.shape)

    def scatter(self, per_edge: torch.Tensor, fill: float) -> torch.Tensor:
        """``per_edge`` ``[E, H]`` placed into ``[B, H, n, n]`` blocks, ``fill`` off the edges."""
        b, n, h = self.num_graphs, self.size, self.num_heads
        flat = per_edge.new_full((b * h * n * n,), fill).index_copy(0, self.edge_slot.view(-1), per_edge.reshape(-1))
        return flat.view(b, h, n, n)

    def mask(self, dense: torch.Tensor) -> torch.Tensor:
        """``dense`` ``[B, H, n, n]`` with ``-inf`` off the edges (same values as
        ``scatter(gather(dense), -inf)``, without the round trip through ``[E, H]``)."""
        return dense.masked_fill(~self.on_edge, -math.inf)

    @staticmethod
    def softmax_blocks(dense_logits: torch.Tensor) -> torch.Tensor:
        """Softmax over keys of ``[B, H, n, n]`` logits that are ``-inf`` off the edges; rows
        without edges (padding) are NaN and never read."""
        return torch.softmax(dense_logits, dim=-1)

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """``q_i . k_j`` per edge ``j -> i`` and head: ``[E, H]`` from ``q, k`` ``[N, H, dh]``."""
        return self.gather(self.dense_scores(q, k))

    def softmax(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax of ``logits`` ``[E, H]`` over each query's edges, like :func:`dgl.nn.functional.edge_softmax`."""
        return self.gather(self.softmax_blocks(self.scatter(logits, -math.inf)))

    def aggregate_blocks(self, attn: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``z_i = sum_j a_ij v_j`` from dense attention blocks ``[B, H, n, n]`` (zero off the
        edges of real rows): ``[N, H, dh]``."""
        b, n, h = self.num_graphs, self.size, self.num_heads
        z = attn @ self._pad(v)  # [B, H, n, dh]
        return z.transpose(1, 2).reshape(b * n, h, -1).index_select(0, self.node_slot)

    def aggregate(self, attn: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``z_i = sum_j a_ij v_j`` over edges ``j -> i``: ``[N, H, dh]`` from ``attn`` ``[E, H]``."""
        b, n, h = self.num_graphs, self.size, self.num_heads
        a = attn.new_zeros(b * h * n * n).index_add(0, self.edge_slot.view(-1), attn.reshape(-1))  # repeats add up
        return self.aggregate_blocks(a.view(b, h, n, n), v)
