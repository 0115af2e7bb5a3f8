"""The one multi-head attention skeleton that every variant runs through.

Attention is message passing over a relation graph ``R`` (see
:mod:`dgl_graphtx.relation_graph`): an edge ``j -> i`` is a (key/value ``j``, query ``i``) pair.

1. per node: ``q, k, v = x W_q, x W_k, x W_v`` split into ``H`` heads of size ``dh``;
2. per edge: ``qk_ij = q_i . k_j`` with DGL's fused ``u_dot_v``;
3. per edge: logit ``s_ij = gain_ij * qk_ij / sqrt(dh) + bias_ij`` with the gain and bias of
   ``term.score_terms(...)`` (:class:`ScoreTerms`) - the only place where variants differ in
   scoring (plain ``qk / sqrt(dh)`` when there is no structure term), after
   ``term.prepare(graph)`` has derived what the term needs from the relation graph (pair classes,
   distances...);
4. ``a = edge_softmax(R, s)`` (normalised over each query's incoming edges), then dropout;
5. per node: ``z_i = sum_j a_ij v_j`` with DGL's fused ``u_mul_e`` + ``sum``, plus
   ``term.values(...)`` for variants that add graph-encoded values (GRPE);
6. heads concatenated, output projection.

Steps 2-5 are the layer's sparse steps. For batches of small graphs whose per-graph blocks are
dense enough (:mod:`dgl_graphtx.nn.dense_blocks`) they run as dense operations over padded blocks
instead (the gain and bias are placed into the blocks, so ``q_i . k_j`` is never gathered per
edge), which compute the same sums faster on CPU; ``aggregation="message_passing"`` forces the
DGL path above, the reference that the tests compare the dense blocks with.

Every step reads the graph through :mod:`~dgl_graphtx.nn.graph_ops`, so the same layer runs on a
DGLGraph (DGL's kernels, the CPU default) or on its
:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` (plain torch ops on any device: a scatter
softmax and ``index_add_`` for the sparse steps, the same dense blocks when they fit); structure
terms read ``edges()``, ``edata`` and ``num_nodes()``, which both carriers answer.
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Hashable, Optional, Tuple, Union

import torch
from torch import nn

from ..errors import ConfigError
from . import graph_ops as ops
from .dense_blocks import BLOCK_FILL_LIMIT, BlockLayout
from .graph_tensors import GraphLike
from . import lean

#: How :class:`RelationAttention` computes its scores and value sums (see the module docstring).
AGGREGATIONS = ("auto", "message_passing", "dense_blocks")


#: What the layers of one model's forward pass compute once and share, keyed by what it is
#: (:meth:`StructureTerm.preparation_key`, a model's own keys): a plain dict made per forward.
Shared = Dict[Hashable, Any]


def shared_value(shared: Optional[Shared], key: Optional[Hashable], compute: Callable[[], Any]) -> Any:
    """``shared[key]``, computed by ``compute()`` the first time; just ``compute()`` when there is
    no ``shared`` dict or no ``key`` (nothing to share).

    Example:
        >>> shared = {}
        >>> shared_value(shared, "two", lambda: 1 + 1), shared_value(shared, "two", lambda: 3)
        (2, 2)
    """
    if shared is None or key is None:
        return compute()
    if key not in shared:
        shared[key] = compute()
    return shared[key]


@dataclass
class ScoreTerms:
    """A structure term's part of the logits: ``s_ij = gain_ij * (q_i . k_j) / sqrt(dh) + bias_ij``.

    ``gain`` and ``bias`` are per edge and head ``[E, H]`` (``None``: 1 and 0). They may depend on
    anything, ``q`` and ``k`` included (GRPE's bias does); keeping the product ``q_i . k_j`` out of
    them lets the skeleton compute it where it is cheapest (DGL's ``u_dot_v``, or dense blocks).

    Example:
        >>> terms = ScoreTerms(bias=torch.tensor([[0.5], [-1.0]]))
        >>> terms.logits(torch.tensor([[1.0], [2.0]])).tolist()
        [[1.5], [1.0]]
    """

    gain: Optional[torch.Tensor] = None
    bias: Optional[torch.Tensor] = None

    def logits(self, scaled_qk: torch.Tensor) -> torch.Tensor:
        """``gain * scaled_qk + bias`` per edge from ``scaled_qk = q_i . k_j / sqrt(dh)`` ``[E, H]``."""
        s = scaled_qk if self.gain is None else scaled_qk * self.gain
        return s if self.bias is None else s + self.bias


class StructureTerm(nn.Module, metaclass=abc.ABCMeta):
    """Base class of the structural parts that turn the skeleton into a variant.

    Subclasses must implement :meth:`score_terms` (abstract) and may override :meth:`prepare`
    and :meth:`values`; docs/attention.md "Adding a variant" walks through one.
    All receive the relation graph, whose ``edata`` holds ``spd``, ``bond`` and possibly ``dist``,
    and whose ``edges()`` give ``(src, dst) = (key node j, query node i)`` per edge. Per forward
    pass, ``prepare`` runs once and its result is handed to ``score_terms`` and ``values``.
    """

    #: Whether :meth:`score_terms` reads ``q`` and ``k``. A term whose gain and bias depend on the
    #: graph and its parameters only says ``False``: the skeleton may then pass ``None`` for both,
    #: places the terms into dense blocks once per forward pass, and :meth:`preparation_key`
    #: shares that placement too.
    reads_qk: bool = True

    #: The relation graph's ``edata`` fields the term reads; a graph without one of them (a
    #: molecular graph passed for its relation graph, say) raises a ``ConfigError`` naming them.
    edge_fields: Tuple[str, ...] = ()

    def prepare(self, graph: GraphLike) -> Any:
        """Structural quantities derived from ``graph`` once per forward (default: nothing)."""
        return None

    def preparation_key(self) -> Optional[Hashable]:
        """A key equal in the layers of a model whose :meth:`prepare` gives the same state (the
        same graph-derived quantities, shared tables or parameters), so that the model prepares
        it once per forward pass for all of them; ``None`` (the default): prepared per layer."""
        return None

    @abc.abstractmethod
    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float, state: Any) -> ScoreTerms:
        """The per-edge gain and bias ``[E, H]`` of the logits (see :class:`ScoreTerms`), from
        ``q, k`` (``[N, H, dh]``); ``scale`` is ``1 / sqrt(dh)``; ``state`` is :meth:`prepare`'s."""

    def values(self, graph: GraphLike, attn: torch.Tensor, state: Any) -> Optional[torch.Tensor]:
        """Extra per-node value term ``[N, H, dh]`` given the attention weights ``[E, H]``, or ``None``."""
        return None

    def block_score_terms(self, blocks: BlockLayout, q: torch.Tensor, k: torch.Tensor, scale: float,
                          state: Any) -> Optional[ScoreTerms]:
        """The gain and bias computed straight on dense blocks ``[B * H, n, n]`` from ``q, k``
        (``[N, H, dh]``; any value off the edges, which the mask drops), for a term that computes
        them faster so than per edge; ``None`` (the default): the skeleton places
        :meth:`score_terms`. Must equal :meth:`score_terms` on the edges."""
        return None

    def block_values(self, blocks: BlockLayout, attn: torch.Tensor, state: Any) -> Optional[torch.Tensor]:
        """:meth:`values` on dense blocks: the extra value term ``[B * H, n, dh]`` of each padded
        query row from the attention blocks ``[B * H, n, n]``; ``None`` (the default): the
        skeleton gathers the weights per edge and calls :meth:`values`."""
        return None

    def logits(
        self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, qk: torch.Tensor, scale: float, state: Any
    ) -> torch.Tensor:
        """Per-edge logits ``[E, H]`` given ``qk`` (``[E, H]``, the unscaled ``q_i . k_j``): the
        :meth:`score_terms` applied to ``qk * scale``."""
        return self.score_terms(graph, q, k, scale, state).logits(qk * scale)

    @property
    def adds_values(self) -> bool:
        """Whether this term overrides :meth:`values` (then the skeleton hands it per-edge weights)."""
        return type(self).values is not StructureTerm.values


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
        self.qkv = lean.Linear(embed_dim, 3 * embed_dim, bias=bias)
        self.out_proj = lean.Linear(embed_dim, embed_dim, bias=bias)
        self.attn_dropout = lean.Dropout(attn_dropout)
        self.structure = structure

    def extra_repr(self) -> str:
        """What ``print(model)`` shows of the layer (the term and the dropout print themselves)."""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, aggregation={self.aggregation!r}"

    def forward(
        self, graph: GraphLike, feat: torch.Tensor, get_attention: bool = False, shared: Optional[Shared] = None,
    ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """Attend over ``graph``'s edges; see the class docstring. ``shared``: the dict of a model's
        forward pass in which layers with equal :meth:`StructureTerm.preparation_key` share what
        they derive from the graph (``None``: this layer keeps its own)."""
        n = feat.shape[0]
        if graph.num_nodes() != n:
            raise ValueError(f"feat has {n} rows but the relation graph has {graph.num_nodes()} nodes")
        if feat.dim() != 2 or feat.shape[1] != self.embed_dim:
            raise ValueError(f"feat has shape {tuple(feat.shape)} but the layer takes [N, embed_dim={self.embed_dim}]; "
                             f"project the node features to {self.embed_dim} columns first (a torch.nn.Linear, say)")
        structure = self.structure
        missing = [name for name in structure.edge_fields if name not in graph.edata] if structure is not None else []
        if missing:
            raise ConfigError(f"{type(self).__name__} needs a relation graph with edata {missing}, got a graph whose edata is "
                              f"{sorted(graph.edata.keys())}; pass the relation graph of build_relation_graph or smiles_to_graphs")
        qkv = self.qkv(feat)  # [N, 3 d]: q, k and v side by side
        blocks = self._block_layout(graph)
        key = structure.preparation_key() if structure is not None else None
        state = None if structure is None else shared_value(shared, key, lambda: structure.prepare(graph))
        adds_values = structure is not None and structure.adds_values
        if blocks is None:
            q, k, v = self._split_heads(qkv)
            attn: Optional[torch.Tensor] = ops.edge_softmax(graph, self._logits(graph, q, k, ops.edge_dot(graph, k, q), state))
            weights = self.attn_dropout(attn)
            z = ops.sum_weighted_sources(graph, v, weights.unsqueeze(-1)).reshape(n, self.embed_dim)
            dropped: Optional[torch.Tensor] = weights
        else:
            z, attn, dropped = self._attend_in_blocks(blocks, graph, qkv, state, get_attention, adds_values,
                                                      shared, None if key is None else (key, "blocks"))
        if adds_values and structure is not None and dropped is not None:  # the blocks may have added them
            extra = structure.values(graph, dropped, state)
            if extra is not None:
                z = z + extra.reshape(n, self.embed_dim)
        out = self.out_proj(z)
        if get_attention:
            assert attn is not None  # the blocks gather the weights when they are asked for
            return out, attn
        return out

    def _logits(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, qk: torch.Tensor, state: Any) -> torch.Tensor:
        """Per-edge logits ``[E, H]``: the structure term's, or ``qk / sqrt(dh)`` without one."""
        if self.structure is None:
            return qk * self.scale
        return self.structure.logits(graph, q, k, qk, self.scale, state)

    def _attend_in_blocks(
        self, blocks: BlockLayout, graph: GraphLike, qkv: torch.Tensor, state: Any, need_weights: bool,
        adds_values: bool, shared: Optional[Shared] = None, key: Optional[Hashable] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
        """Steps 2-5 on dense per-graph blocks from ``qkv`` ``[N, 3 d]``: ``(z [N, d], attn [E, H],
        dropped [E, H])``: the per-edge weights gathered from the blocks only if ``need_weights``,
        the dropped ones only if the term adds values per edge (else ``None``: added here).

        The structure term's gain and bias go into the blocks (its :meth:`StructureTerm.block_score_terms`,
        or :meth:`BlockLayout.place` of the per-edge terms, once per forward for the layers sharing
        ``key`` when the term does not read ``q, k``), the softmax blocks weight the values
        directly. Attention dropout acts on the softmax blocks (one draw per slot; the slots off
        the edges hold 0 either way)."""
        structure = self.structure
        static = structure is not None and not structure.reads_qk  # the same terms in every layer sharing ``key``
        qh, kh, vh = blocks.heads(qkv, parts=3).unbind(0)  # one padding copy for the three

        def placed() -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
            if structure is None:
                return blocks.place(dtype=qkv.dtype)
            q, k, _ = (None, None, None) if static else self._split_heads(qkv)
            in_blocks = None if static else structure.block_score_terms(blocks, q, k, self.scale, state)  # type: ignore[arg-type]
            if in_blocks is not None:
                mask = blocks.mask(qkv.dtype)
                return (mask if in_blocks.bias is None else mask + in_blocks.bias), in_blocks.gain
            terms = structure.score_terms(graph, q, k, self.scale, state)  # type: ignore[arg-type]  # q, k unread when static
            return blocks.place(terms.gain, terms.bias, qkv.dtype)

        base, gain = shared_value(shared, key if static else None, placed)
        dense_attn = torch.softmax(blocks.placed_logits(qh, kh, base, gain, scale=self.scale), dim=-1)
        attn = blocks.gather(dense_attn) if need_weights else None
        dropping = self.attn_dropout.training and self.attn_dropout.p > 0.0
        dropped = self.attn_dropout(dense_attn) if dropping else dense_attn
        z = torch.bmm(dropped, vh)
        extra = structure.block_values(blocks, dropped, state) if adds_values and structure is not None else None
        if extra is not None:
            z = z + extra
        per_edge = blocks.gather(dropped) if adds_values and extra is None else None
        return blocks.unpad(z, flat=True), attn, per_edge

    def _split_heads(self, qkv: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """``q, k, v`` ``[N, H, dh]`` each from ``qkv`` ``[N, 3 d]``."""
        return qkv.view(qkv.shape[0], 3, self.num_heads, self.head_dim).unbind(1)

    def _block_layout(self, graph: GraphLike) -> Optional[BlockLayout]:
        """Dense blocks to compute with, or ``None`` for DGL message passing."""
        if self.aggregation == "message_passing":
            return None
        if self.aggregation == "auto":
            return BlockLayout.cached(graph, self.num_heads, BLOCK_FILL_LIMIT)
        layout = BlockLayout.cached(graph, self.num_heads)
        if layout is None:
            raise ValueError("aggregation='dense_blocks' needs a batch of graphs with edges inside each graph")
        return layout
