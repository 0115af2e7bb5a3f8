"""The message-passing steps the layers use, on either carrier of a graph.

On a DGLGraph each step is DGL's fused kernel (the CPU default); on a
:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` it is the same sum in plain torch ops
(gathers, ``index_add_``, ``scatter_reduce``), which run on any device without a CUDA build of
DGL. Edges are ``src -> dst`` (key ``j`` -> query ``i`` in a relation graph); sums and softmaxes
run over each destination's incoming edges.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import dgl
import dgl.function as fn
from dgl.nn.functional import edge_softmax as dgl_edge_softmax

from .graph_tensors import GraphLike, GraphTensors

#: Readouts of :func:`readout`, as DGL's ``readout_nodes`` names them.
READOUTS = ("sum", "mean", "max")


def _index_like(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``index`` ``[E]`` broadcast to ``like``'s shape ``[E, ...]`` (for ``scatter_reduce``)."""
    return index.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def segment_sum(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """``out[s] = sum of values[e]`` over rows ``e`` with ``index[e] == s``: ``[S, ...]``.

    Example:
        >>> segment_sum(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1, 0, 1]), 3).tolist()
        [2.0, 5.0, 0.0]
    """
    return values.new_zeros((num_segments, *values.shape[1:])).index_add_(0, index, values)


def segment_max(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """``out[s] = max of values[e]`` over rows with ``index[e] == s`` (``-inf`` for empty segments).

    Example:
        >>> segment_max(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1, 0, 1]), 3).tolist()
        [2.0, 4.0, -inf]
    """
    out = values.new_full((num_segments, *values.shape[1:]), -math.inf)
    return out.scatter_reduce(0, _index_like(index, values), values, reduce="amax", include_self=True)


def segment_softmax(logits: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Softmax of ``logits`` ``[E, ...]`` over the rows of each segment (rows sharing ``index``).

    Example:
        >>> a = segment_softmax(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0, 1, 1]), 2)
        >>> [round(x, 4) for x in a.tolist()]
        [1.0, 0.2689, 0.7311]
    """
    top = segment_max(logits.detach(), index, num_segments)  # any shift gives the same softmax
    exp = torch.exp(logits - top.index_select(0, index))
    return exp / segment_sum(exp, index, num_segments).index_select(0, index)


def edge_dot(graph: GraphLike, src_feat: torch.Tensor, dst_feat: torch.Tensor) -> torch.Tensor:
    """``src_feat[j] . dst_feat[i]`` per edge ``j -> i`` over the last axis: ``[E, ...]`` from
    node features ``[N, ..., d]`` (DGL's ``u_dot_v``)."""
    if isinstance(graph, GraphTensors):
        src, dst = graph.edges()
        return (src_feat.index_select(0, src) * dst_feat.index_select(0, dst)).sum(-1)
    with graph.local_scope():
        graph.ndata["u"], graph.ndata["v"] = src_feat, dst_feat
        graph.apply_edges(fn.u_dot_v("u", "v", "uv"))
        return graph.edata["uv"].squeeze(-1)


def edge_add(graph: GraphLike, dst_feat: torch.Tensor, src_feat: torch.Tensor) -> torch.Tensor:
    """``dst_feat[i] + src_feat[j]`` per edge ``j -> i`` (DGL's ``v_add_u``)."""
    if isinstance(graph, GraphTensors):
        src, dst = graph.edges()
        return dst_feat.index_select(0, dst) + src_feat.index_select(0, src)
    with graph.local_scope():
        graph.ndata["v"], graph.ndata["u"] = dst_feat, src_feat
        graph.apply_edges(fn.v_add_u("v", "u", "vu"))
        return graph.edata["vu"]


def edge_difference(graph: GraphLike, feat: torch.Tensor) -> torch.Tensor:
    """``feat[i] - feat[j]`` per edge ``j -> i`` (DGL's ``v_sub_u``)."""
    if isinstance(graph, GraphTensors):
        src, dst = graph.edges()
        return feat.index_select(0, dst) - feat.index_select(0, src)
    with graph.local_scope():
        graph.ndata["x"] = feat
        graph.apply_edges(fn.v_sub_u("x", "x", "d"))
        return graph.edata["d"]


def gather_sources(graph: GraphLike, feat: torch.Tensor) -> torch.Tensor:
    """``feat[j]`` per edge ``j -> i``: ``[E, ...]`` (a plain gather on either carrier)."""
    return feat.index_select(0, graph.edges()[0].long())


def edge_softmax(graph: GraphLike, logits: torch.Tensor) -> torch.Tensor:
    """Softmax of per-edge ``logits`` ``[E, ...]`` over each destination's incoming edges."""
    if isinstance(graph, GraphTensors):
        return segment_softmax(logits, graph.edges()[1], graph.num_nodes())
    return dgl_edge_softmax(graph, logits)


def sum_weighted_sources(graph: GraphLike, feat: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``z_i = sum_j weight_ji * feat_j`` over edges ``j -> i``: ``[N, ...]`` from node ``feat``
    and per-edge ``weight`` broadcastable to it (DGL's ``u_mul_e`` + ``sum``)."""
    if isinstance(graph, GraphTensors):
        src, dst = graph.edges()
        return segment_sum(feat.index_select(0, src) * weight, dst, graph.num_nodes())
    with graph.local_scope():
        graph.ndata["x"], graph.edata["w"] = feat, weight
        graph.update_all(fn.u_mul_e("x", "w", "m"), fn.sum("m", "z"))
        return graph.ndata["z"]


def sum_incoming(graph: GraphLike, edge_feat: torch.Tensor) -> torch.Tensor:
    """``z_i = sum_j edge_feat_ji`` over edges ``j -> i``: ``[N, ...]`` (DGL's ``copy_e`` + ``sum``)."""
    if isinstance(graph, GraphTensors):
        return segment_sum(edge_feat, graph.edges()[1], graph.num_nodes())
    with graph.local_scope():
        graph.edata["e"] = edge_feat
        graph.update_all(fn.copy_e("e", "m"), fn.sum("m", "z"))
        return graph.ndata["z"]


def node_graphs(graph: GraphLike) -> torch.Tensor:
    """The graph of the batch each node belongs to ``[N]`` (int64; no wait for the device).

    Example:
        >>> node_graphs(dgl.batch([dgl.graph(([0], [1])), dgl.graph(([], []), num_nodes=1)])).tolist()
        [0, 0, 1]
    """
    if isinstance(graph, GraphTensors):
        return graph.node_graph
    counts = graph.batch_num_nodes()
    return torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts, output_size=graph.num_nodes())


def node_mask(graph: GraphLike) -> Optional[torch.Tensor]:
    """The real nodes ``[N]`` (bool) of a padded batch (:mod:`dgl_graphtx.datasets.padding`),
    ``None`` when every node is real."""
    return graph.node_mask if isinstance(graph, GraphTensors) else None


def first_nodes(graph: GraphLike) -> torch.Tensor:
    """The row of each graph's first node ``[B]``.

    Example:
        >>> first_nodes(dgl.batch([dgl.graph(([0], [1])), dgl.graph(([], []), num_nodes=1)])).tolist()
        [0, 2]
    """
    counts = graph.batch_num_nodes()
    if isinstance(graph, GraphTensors) and graph.slot_size:
        return torch.arange(counts.shape[0], device=counts.device) * graph.slot_size
    return torch.cumsum(counts, 0) - counts


def readout(graph: GraphLike, feat: torch.Tensor, op: str) -> torch.Tensor:
    """One row per graph of the batch ``[B, ...]``: the ``sum``, ``mean`` or ``max`` of its
    nodes' ``feat`` (DGL's ``readout_nodes``; 0 for a graph without nodes; the real nodes of a
    padded batch).

    Example:
        >>> g = GraphTensors.from_graph(dgl.batch([dgl.graph(([0], [1])), dgl.graph(([], []), num_nodes=1)]))
        >>> readout(g, torch.tensor([[1.0], [3.0], [5.0]]), "mean").tolist()
        [[2.0], [5.0]]
    """
    if not isinstance(graph, GraphTensors):
        with graph.local_scope():
            graph.ndata["h"] = feat
            return dgl.readout_nodes(graph, "h", op=op)
    index, b = graph.node_graph, graph.batch_size
    if graph.node_mask is not None:  # padding nodes count for nothing
        real = graph.node_mask.view(-1, *([1] * (feat.dim() - 1)))
        feat = feat.masked_fill(~real, -math.inf) if op == "max" else feat * real
    if op == "max":
        top = segment_max(feat, index, b)
        return top.masked_fill(torch.isinf(top) & (top < 0), 0.0)
    total = segment_sum(feat, index, b)
    if op == "sum":
        return total
    if op == "mean":
        counts = graph.batch_num_nodes().to(feat.dtype).clamp_min(1)
        return total / counts.view(-1, *([1] * (feat.dim() - 1)))
    raise ValueError(f"readout must be one of {READOUTS}, got {op!r}")
