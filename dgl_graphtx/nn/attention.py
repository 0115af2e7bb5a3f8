"""The one multi-head attention skeleton that every variant runs through.

Attention is message passing over a relation graph ``R`` (see
:mod:`dgl_graphtx.relation_graph`): an edge ``j -> i`` is a (key/value ``j``, query ``i``) pair.

1. per node: ``q, k, v = x W_q, x W_k, x W_v`` split into ``H`` heads of size ``dh``;
2. per edge: ``qk_ij = q_i . k_j`` with DGL's fused ``u_dot_v``;
3. per edge: logit ``s_ij = term.logits(...)`` - the only place where variants differ in scoring
   (plain ``qk / sqrt(dh)`` when there is no structure term), after ``term.prepare(graph)`` has
   derived what the term needs from the relation graph (pair classes, distances...);
4. ``a = edge_softmax(R, s)`` (normalised over each query's incoming edges), then dropout;
5. per node: ``z_i = sum_j a_ij v_j`` with DGL's fused ``u_mul_e`` + ``sum``, plus
   ``term.values(...)`` for variants that add graph-encoded values (GRPE);
6. heads concatenated, output projection.

Steps 2, 4 and 5 are the layer's sparse steps. For batches of small graphs whose per-graph blocks
are dense enough (:mod:`dgl_graphtx.nn.dense_blocks`) they run as dense operations over padded
blocks instead, which compute the same sums faster on CPU; ``aggregation="message_passing"``
forces the DGL path above, the reference that the tests compare the dense blocks with.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Union

import torch
from torch import nn

from .. import _dgl_env  # noqa: F401
import dgl
import dgl.function as fn
from dgl.nn.functional import edge_softmax

from .dense_blocks import BLOCK_FILL_LIMIT, BlockLayout

#: How :class:`RelationAttention` computes its scores and value sums (see the module docstring).
AGGREGATIONS = ("auto", "message_passing", "dense_blocks")


class StructureTerm(nn.Module):
    """Base class of the structural parts that turn the skeleton into a variant.

    Subclasses override :meth:`logits` and optionally :meth:`prepare` and :meth:`values`. All
    receive the relation graph, whose ``edata`` holds ``spd``, ``bond`` and possibly ``dist``, and
    whose ``edges()`` give ``(src, dst) = (key node j, query node i)`` per edge. Per forward pass,
    ``prepare`` runs once and its result is handed to ``logits`` and ``values``.
    """

    def prepare(self, graph: dgl.DGLGraph) -> Any:
        """Structural quantities derived from ``graph`` once per forward (default: nothing)."""
        return None

    def logits(
        self, graph: dgl.DGLGraph, q: torch.Tensor, k: torch.Tensor, qk: torch.Tensor, scale: float, state: Any
    ) -> torch.Tensor:
        """Per-edge, per-head logits ``[E, H]`` from ``q, k`` (``[N, H, dh]``) and ``qk`` (``[E, H]``,
        the unscaled ``q_i . k_j``); ``scale`` is ``1 / sqrt(dh)``; ``state`` is :meth:`prepare`'s."""
        raise NotImplementedError

    def values(self, graph: dgl.DGLGraph, attn: torch.Tensor, state: Any) -> Optional[torch.Tensor]:
        """Extra per-node value term ``[N, H, dh]`` given the attention weights ``[E, H]``, or ``None``."""
        return None


class RelationAttention(nn.Module):
    """Multi-head attention over a relation graph with a pluggable :class:`StructureTerm`.

    Args:
        embed_dim: model width ``d`` (input and output).
        num_heads: number of heads ``H``; must divide ``embed_dim``.
        structure: the variant's structural term; ``None`` gives plain (vanilla) attention over
            the relation graph's pairs.
        attn_dropout: dropout on the per-edge attention weights.
        bias: whether the q/k/v and output projections have biases.
        aggregation: ``"auto"`` (dense per-graph blocks when they hold at most
            :data:`~dgl_graphtx.nn.dense_blocks.BLOCK_FILL_LIMIT` slots per edge, else DGL message
            passing), ``"message_passing"`` (always DGL's ``u_dot_v`` / ``u_mul_e``) or
            ``"dense_blocks"`` (always blocks; for batches of small graphs only).

    Shape:
        - input: relation graph with ``N`` nodes, ``feat`` ``[N, d]``
        - output: ``[N, d]``, and the attention weights ``[E, H]`` with ``get_attention=True``

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CCO")
        >>> attn = RelationAttention(16, num_heads=4)
        >>> out, a = attn(rel, torch.randn(3, 16), get_attention=True)
        >>> out.shape, a.shape
        (torch.Size([3, 16]), torch.Size([9, 4]))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        structure: Optional[StructureTerm] = None,
        attn_dropout: float = 0.0,
        bias: bool = True,
        aggregation: str = "auto",
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.aggregation = aggregation
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.structure = structure

    def forward(
        self, graph: dgl.DGLGraph, feat: torch.Tensor, get_attention: bool = False
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend over ``graph``'s edges; see the class docstring."""
        n = feat.shape[0]
        if graph.num_nodes() != n:
            raise ValueError(f"feat has {n} rows but the relation graph has {graph.num_nodes()} nodes")
        q, k, v = self.qkv(feat).view(n, 3, self.num_heads, self.head_dim).unbind(1)
        blocks = self._block_layout(graph)
        state = self.structure.prepare(graph) if self.structure is not None else None
        with graph.local_scope():
            if blocks is None:
                graph.ndata["q"], graph.ndata["k"] = q, k
                graph.apply_edges(fn.u_dot_v("k", "q", "qk"))
                attn = edge_softmax(graph, self._logits(graph, q, k, graph.edata["qk"].squeeze(-1), state))
                dropped = self.attn_dropout(attn)
                graph.ndata["v"] = v
                graph.edata["a"] = dropped.unsqueeze(-1)
                graph.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "z"))
                z = graph.ndata["z"]
            else:
                z, attn, dropped = self._attend_in_blocks(blocks, graph, q, k, v, state)
            if self.structure is not None:
                extra = self.structure.values(graph, dropped, state)
                if extra is not None:
                    z = z + extra
        out = self.out_proj(z.reshape(n, self.embed_dim))
        return (out, attn) if get_attention else out

    def _logits(self, graph: dgl.DGLGraph, q: torch.Tensor, k: torch.Tensor, qk: torch.Tensor, state: Any) -> torch.Tensor:
        """Per-edge logits ``[E, H]``: the structure term's, or ``qk / sqrt(dh)`` without one."""
        if self.structure is None:
            return qk * self.scale
        return self.structure.logits(graph, q, k, qk, self.scale, state)

    def _attend_in_blocks(
        self, blocks: BlockLayout, graph: dgl.DGLGraph, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: Any
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Steps 2-5 on dense per-graph blocks: ``(z [N, H, dh], attn [E, H], dropped [E, H])``.

        Scores and the softmax stay ``[B, H, n, n]`` blocks; only a structure term's logits go
        through ``[E, H]``; the softmax blocks weight the values directly. An ``nn.Dropout`` draws
        its mask on ``[E, H]`` (the same random numbers as on the message-passing path), which then
        multiplies the blocks; any other attention-dropout module gets the per-edge weights."""
        scores = blocks.dense_scores(q, k)
        if self.structure is None:
            dense_attn = blocks.softmax_blocks(blocks.mask(scores * self.scale))
        else:
            logits = self._logits(graph, q, k, blocks.gather(scores), state)
            dense_attn = blocks.softmax_blocks(blocks.scatter(logits, -math.inf))
        attn = blocks.gather(dense_attn)
        weights = dense_attn.nan_to_num(0.0)  # padding rows: NaN -> 0, gradient 0
        drop = self.attn_dropout
        if not isinstance(drop, nn.Dropout):
            dropped = drop(attn)
            return blocks.aggregate(dropped, v), attn, dropped
        if drop.training and drop.p > 0.0:
            keep = drop(torch.ones_like(attn))  # 0 or 1 / (1 - p): dropout's own mask, drawn once
            return blocks.aggregate_blocks(weights * blocks.scatter(keep, 0.0), v), attn, attn * keep
        return blocks.aggregate_blocks(weights, v), attn, attn

    def _block_layout(self, graph: dgl.DGLGraph) -> Optional[BlockLayout]:
        """Dense blocks to compute with, or ``None`` for DGL message passing."""
        if self.aggregation == "message_passing":
            return None
        if self.aggregation == "auto":
            return BlockLayout.cached(graph, self.num_heads, BLOCK_FILL_LIMIT)
        layout = BlockLayout.cached(graph, self.num_heads)
        if layout is None:
            raise ValueError("aggregation='dense_blocks' needs a batch of graphs with edges inside each graph")
        return layout
