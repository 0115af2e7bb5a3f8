"""Per-graph dense blocks: the attention skeleton's sparse steps as batched dense operations.

A batch of small relation graphs (molecules) is a block-diagonal sparse matrix. When its blocks are
dense enough, scoring ``q_i . k_j`` on every edge, the softmax over each query's edges and summing
``a_ij v_j`` into every query run faster as dense operations over ``[B, H, n, n]`` blocks (``n`` =
nodes of the largest graph) than as DGL's CPU kernels (which loop over heads when the weights
``[E, H, 1]`` are broadcast against ``[N, H, dh]`` features). A structure term's gain and bias
(:class:`~dgl_graphtx.nn.attention.ScoreTerms`) are computed per edge ``[E, H]`` and placed into
the blocks; results are the same sums (proved against the message-passing path in the tests);
memory is ``B n^2 H`` per tensor, kept within :data:`BLOCK_FILL_LIMIT` slots per edge, never
``E x H x dh``.

Rows of the blocks without any edge (padding, or a node that attends to nothing) get logits 0
instead of ``-inf``, so the softmax stays finite without a NaN clean-up pass; their sums are
dropped (padding) or zeroed (:meth:`BlockLayout.unpad`), as message passing gives 0 there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch
import dgl

from .tracing import exporting

#: The dense-block path is taken when the blocks hold at most this many slots per relation edge.
#: Measured (docs/decisions/attention-paths.md, batch 128): blocks win on complete (1.3 slots per edge)
#: and ``hops=3`` (2.9-3.3) relation graphs of ZINC-sized molecules and lose to message passing on
#: FreeSolv batches, padded to their largest molecule (5.3-8.6).
BLOCK_FILL_LIMIT = 4
#: Attribute of a relation graph holding its cached layouts (:meth:`BlockLayout.cached`).
LAYOUT_CACHE = "_dgl_graphtx_block_layouts"


@dataclass(frozen=True)
class BlockGeometry:
    """The head-independent part of a :class:`BlockLayout`: which graph and local index each node
    has, and each edge's (query, key) pair inside its graph's ``n x n`` block.

    Computing it checks the batch (synchronising with the device), so the tensor path builds it
    on the CPU side of the loader (:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`);
    :meth:`layout` then only spreads it over the heads.

    Example:
        >>> g = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
        >>> geo = BlockGeometry.of(g)
        >>> geo.num_graphs, geo.size, geo.edge_pair.tolist(), geo.node_local.tolist()
        (2, 2, [2, 1, 0], [0, 1, 0])
    """

    num_graphs: int
    size: int  # n: nodes of the largest graph
    num_edges: int
    node_graph: torch.Tensor  # [N]: graph of each node
    node_local: torch.Tensor  # [N]: index of each node within its graph
    edge_graph: torch.Tensor  # [E]: graph of each edge
    edge_pair: torch.Tensor  # [E]: local i * n + local j for edge j -> i
    empty_rows: torch.Tensor  # [N] bool: nodes without incoming edges
    has_empty_rows: bool
    edge_mask: Optional[torch.Tensor] = None  # [E] bool: the real edges of a padded batch (None: all)

    @classmethod
    def of(cls, graph: dgl.DGLGraph) -> Optional["BlockGeometry"]:
        """The geometry of ``graph``'s batch, or ``None`` if it has no edges, an edge joins two
        graphs of the batch, or a pair has two edges."""
        counts = graph.batch_num_nodes().long()
        b, n, e = int(counts.numel()), int(counts.max()) if counts.numel() else 0, graph.num_edges()
        if e == 0:
            return None
        device = counts.device
        graph_of = torch.repeat_interleave(torch.arange(b, device=device), counts)
        local = torch.arange(graph.num_nodes(), device=device) - (torch.cumsum(counts, 0) - counts)[graph_of]
        src, dst = (t.long() for t in graph.edges())
        edge_graph = graph_of[dst]
        if not torch.equal(graph_of[src], edge_graph):
            return None
        pair = local[dst] * n + local[src]
        if int(torch.bincount(edge_graph * (n * n) + pair, minlength=b * n * n).max()) > 1:
            return None
        empty_rows = torch.bincount(dst, minlength=graph.num_nodes()) == 0
        return cls(b, n, e, graph_of, local, edge_graph, pair, empty_rows, bool(empty_rows.any()))

    def fits(self, fill_limit: Optional[float]) -> bool:
        """Whether the blocks hold at most ``fill_limit`` slots per edge (always when ``None``)."""
        return fill_limit is None or self.num_graphs * self.size**2 <= fill_limit * self.num_edges

    def layout(self, num_heads: int) -> "BlockLayout":
        """The :class:`BlockLayout` for ``num_heads`` heads (tensor operations only, no check)."""
        b, n = self.num_graphs, self.size
        heads = torch.arange(num_heads, device=self.node_graph.device)[None, :]
        edge_slot = (self.edge_graph[:, None] * num_heads + heads) * (n * n) + self.edge_pair[:, None]
        on_edge = torch.zeros(b * num_heads * n * n, dtype=torch.bool, device=edge_slot.device)
        if self.edge_mask is None:
            on_edge[edge_slot.view(-1)] = True
        else:  # a padded batch: every slot is an edge, the real ones are on
            on_edge.index_put_((edge_slot.view(-1),), self.edge_mask[:, None].expand(edge_slot.shape).reshape(-1))
        head_rows = (self.node_graph[:, None] * num_heads + heads) * n + self.node_local[:, None]
        return BlockLayout(
            b, n, num_heads, self.node_graph * n + self.node_local, head_rows, edge_slot,
            on_edge.view(b, num_heads, n, n), self.empty_rows, self.has_empty_rows, self.edge_mask is not None,
        )

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "BlockGeometry":
        """A copy with every tensor on ``device``."""
        return self.map_tensors(lambda x: x.to(device, non_blocking=non_blocking))

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "BlockGeometry":
        """A copy with ``fn`` applied to every tensor (in field order)."""
        changed: Dict[str, Any] = {f.name: fn(getattr(self, f.name)) for f in fields(self) if torch.is_tensor(getattr(self, f.name))}
        return replace(self, **changed)


@dataclass(frozen=True)
class BlockLayout:
    """Where a (batched) relation graph's nodes and edges sit in ``[B, H, n, n]`` dense blocks.

    Example:
        >>> g = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
        >>> layout = BlockLayout.of(g, num_heads=1)
        >>> layout.num_graphs, layout.size, layout.edge_slot.tolist()  # edge j -> i of graph b: (b n + i) n + j
        (2, 2, [[2], [1], [4]])
        >>> q = k = torch.randn(3, 1, 4)  # [N, H, dh]
        >>> logits = layout.logits(layout.heads(q), layout.heads(k))  # [B, H, n, n]: q_i . k_j on edges, -inf off
        >>> torch.allclose(layout.gather(logits)[:, 0], (q[[1, 0, 2]] * k[[0, 1, 2]]).sum(-1)[:, 0])
        True
    """

    num_graphs: int
    size: int
    num_heads: int
    node_slot: torch.Tensor  # [N]: b * n + local index
    head_rows: torch.Tensor  # [N, H]: row (b H + h) n + i of node i of graph b, head h, in [B H n, dh]
    edge_slot: torch.Tensor  # [E, H]: flat index of (b, h, i, j) in [B, H, n, n] for edge j -> i, head h
    on_edge: torch.Tensor  # [B, H, n, n] bool: the slot holds an edge
    empty_rows: torch.Tensor  # [N] bool: nodes without incoming edges
    has_empty_rows: bool
    padded: bool = False  # every slot is an edge, ``on_edge`` the real ones (a padded batch)
    _masks: Dict[torch.dtype, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)
    _indices: Dict[Tuple[str, int], torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, graph: dgl.DGLGraph, num_heads: int, fill_limit: Optional[float] = None) -> Optional["BlockLayout"]:
        """The layout of ``graph``'s batch, or ``None`` if an edge joins two graphs of the batch, a
        pair has two edges, or the blocks would hold more than ``fill_limit`` slots per edge (no
        limit when ``None``). A graph that carries its :class:`BlockGeometry` (``blocks_known``,
        e.g. :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`) is not checked again."""
        if getattr(graph, "blocks_known", False):
            geometry = graph.block_geometry
        else:
            counts = graph.batch_num_nodes()
            b, n, e = int(counts.numel()), int(counts.max()) if counts.numel() else 0, graph.num_edges()
            if e == 0 or (fill_limit is not None and b * n * n > fill_limit * e):
                return None  # decided from the sizes alone
            geometry = BlockGeometry.of(graph)
        return geometry.layout(num_heads) if geometry is not None and geometry.fits(fill_limit) else None

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
        if getattr(graph, "blocks_known", False) and (graph.block_geometry is None or exporting()):
            # known to have no blocks; or an exported program's graph, whose sizes are symbolic: no
            # cache key and no size test, its blocks were chosen when it was exported
            return None if graph.block_geometry is None else graph.block_geometry.layout(num_heads)
        cache = graph.__dict__.setdefault(LAYOUT_CACHE, {})
        key = (num_heads, fill_limit, graph.num_nodes(), graph.num_edges(), str(graph.device))
        if key not in cache:
            cache[key] = cls.of(graph, num_heads, fill_limit)
        return cache[key]

    def heads(self, x: torch.Tensor, parts: int = 0) -> torch.Tensor:
        """Node features ``[N, H, dh]`` -> padded ``[B * H, n, dh]``, the layout of the batched
        matrix products of :meth:`logits` and :meth:`aggregate_blocks`; ``[N, P, H, dh]`` (e.g.
        ``q, k, v`` together), or ``[N, P * H * dh]`` with ``parts=P``, -> ``[P, B * H, n, dh]``
        in one copy."""
        parts = parts or (x.shape[1] if x.dim() == 4 else 1)
        width = x.shape[-1] if x.dim() > 2 else x.shape[-1] // (parts * self.num_heads)
        out = x.new_zeros(parts * self.block_rows, width).index_copy_(0, self._part_rows(parts), x.reshape(-1, width))
        shape = (self.num_graphs * self.num_heads, self.size, width)
        return out.view(parts, *shape) if parts > 1 or x.dim() == 4 else out.view(shape)

    def _part_rows(self, parts: int) -> torch.Tensor:
        """Rows of ``[N, P, H]`` entries in ``P`` stacked padded tensors, flat (made once per ``P``)."""
        if ("rows", parts) not in self._indices:
            offsets = self.block_rows * torch.arange(parts, device=self.head_rows.device)[:, None]
            self._indices[("rows", parts)] = (self.head_rows[:, None, :] + offsets).view(-1)
        return self._indices[("rows", parts)]

    def _flat_slots(self) -> torch.Tensor:
        """:attr:`edge_slot` flat ``[E * H]`` (made once)."""
        if ("slots", 0) not in self._indices:
            self._indices[("slots", 0)] = self.edge_slot.reshape(-1)
        return self._indices[("slots", 0)]

    def pair_slots(self) -> torch.Tensor:
        """Per edge ``[E]``, its slot ``(b n + i) n + j`` in ``[B, n, n]`` (every head alike; made once)."""
        if ("pairs", 0) not in self._indices:
            block, first = self.size**2, self.edge_slot[:, 0]
            graph = torch.div(first, self.num_heads * block, rounding_mode="floor")
            self._indices[("pairs", 0)] = graph * block + first % block
        return self._indices[("pairs", 0)]

    @property
    def block_rows(self) -> int:
        """Rows ``B * H * n`` of one padded ``[B * H, n, dh]`` tensor."""
        return self.num_graphs * self.num_heads * self.size

    def pad_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Per node and head rows ``[N, H, C]`` -> ``[B, H, n, C]`` (zeros in the padding)."""
        out = x.new_zeros(self.block_rows, x.shape[-1]).index_copy_(0, self._part_rows(1), x.reshape(-1, x.shape[-1]))
        return out.view(self.num_graphs, self.num_heads, self.size, -1)

    def unpad(self, z: torch.Tensor, flat: bool = False) -> torch.Tensor:
        """Per-query sums ``[B * H, n, dh]`` -> node rows ``[N, H, dh]`` (``[N, H * dh]`` if
        ``flat``); rows of nodes without incoming edges are 0, as message passing gives."""
        rows = z.reshape(-1, z.shape[-1]).index_select(0, self._part_rows(1))
        rows = rows.view(self.head_rows.shape[0], -1) if flat else rows.view(*self.head_rows.shape, -1)
        return rows.masked_fill(self.empty_rows.view(-1, *[1] * (rows.dim() - 1)), 0.0) if self.has_empty_rows else rows

    def mask(self, dtype: torch.dtype) -> torch.Tensor:
        """``[B * H, n, n]`` additive mask: 0 on edges and on rows without edges, ``-inf``
        elsewhere (made once per dtype and reused by every layer)."""
        if dtype not in self._masks:
            empty_row = torch.ones(self.num_graphs * self.size, dtype=torch.bool, device=self.node_slot.device)
            empty_row[self.node_slot] = self.empty_rows
            keep = self.on_edge | empty_row.view(self.num_graphs, 1, self.size, 1)
            mask = torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill_(~keep, -math.inf)
            self._masks[dtype] = mask.view(-1, self.size, self.size)
        return self._masks[dtype]

    def gather(self, dense: torch.Tensor) -> torch.Tensor:
        """The entries of ``dense`` blocks (``[B, H, n, n]`` or ``[B * H, n, n]``) at the edges: ``[E, H]``."""
        return dense.reshape(-1).index_select(0, self._flat_slots()).view(self.edge_slot.shape)

    def scatter(self, per_edge: torch.Tensor, base: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``per_edge`` ``[E, H]`` (or ``[E, 1]``, the same for every head) written into a copy of
        ``base`` ``[B * H, n, n]`` at the edges (zeros off the edges when ``base`` is ``None``)."""
        values = per_edge.expand(self.edge_slot.shape).reshape(-1)
        out = per_edge.new_zeros(self.on_edge.numel()) if base is None else base.reshape(-1).clone()
        return out.index_copy_(0, self._flat_slots(), values).view(-1, self.size, self.size)

    def place(self, gain: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
              dtype: Optional[torch.dtype] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Per-edge ``gain`` and ``bias`` ``[E, H]`` (or ``[E, 1]``) as blocks ``[B * H, n, n]``: the
        additive base (``bias`` on the edges, :meth:`mask` elsewhere) and the gain (0 off the
        edges; ``None`` without one), what :meth:`placed_logits` reads. ``dtype``: the mask's
        when neither is given."""
        given = gain if gain is not None else bias
        mask = self.mask(given.dtype if given is not None else dtype or torch.get_default_dtype())
        if bias is None:
            base = mask
        else:  # on a padded batch's blocks every slot is an edge: the mask stays under the bias
            base = mask + self.scatter(bias) if self.padded else self.scatter(bias, mask)
        return base, (None if gain is None else self.scatter(gain))

    def placed_logits(self, qh: torch.Tensor, kh: torch.Tensor, base: torch.Tensor, gain: Optional[torch.Tensor] = None,
                      scale: float = 1.0) -> torch.Tensor:
        """``base + gain * scale * q_i . k_j`` ``[B * H, n, n]`` from padded ``qh, kh``
        ``[B * H, n, dh]`` (:meth:`heads`) and the blocks of :meth:`place`."""
        if gain is None:
            return torch.baddbmm(base, qh, kh.transpose(1, 2), alpha=scale)
        return torch.addcmul(base, torch.bmm(qh, kh.transpose(1, 2)), gain, value=scale)

    def logits(self, qh: torch.Tensor, kh: torch.Tensor, gain: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, scale: float = 1.0) -> torch.Tensor:
        """Attention logits ``gain_ij * scale * q_i . k_j + bias_ij`` on the edges, ``-inf`` off
        them (0 on rows without edges): ``[B, H, n, n]`` from padded ``qh, kh`` ``[B * H, n, dh]``
        (:meth:`heads`) and optional per-edge ``gain``, ``bias`` ``[E, H]`` (1 and 0 if ``None``)."""
        logits = self.placed_logits(qh, kh, *self.place(gain, bias, qh.dtype), scale=scale)
        return logits.view(self.num_graphs, self.num_heads, self.size, self.size)

    def aggregate_blocks(self, attn: torch.Tensor, vh: torch.Tensor, flat: bool = False) -> torch.Tensor:
        """``z_i = sum_j a_ij v_j`` from dense attention blocks (``[B, H, n, n]`` or
        ``[B * H, n, n]``; zero off the edges of rows with edges) and padded values ``vh``
        ``[B * H, n, dh]``: ``[N, H, dh]`` (``[N, H * dh]`` if ``flat``)."""
        return self.unpad(torch.bmm(attn if attn.dim() == 3 else attn.reshape(-1, self.size, self.size), vh), flat)

    def aggregate(self, attn: torch.Tensor, vh: torch.Tensor) -> torch.Tensor:
        """``z_i = sum_j a_ij v_j`` over edges ``j -> i``: ``[N, H, dh]`` from per-edge ``attn``
        ``[E, H]`` and padded values ``vh`` ``[B * H, n, dh]``."""
        return self.aggregate_blocks(self.scatter(attn), vh)
