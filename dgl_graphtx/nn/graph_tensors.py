"""A (batched) graph as plain tensors, the carrier of the tensor compute path.

:class:`GraphTensors` holds what the models read from a DGLGraph - ``edges()``, ``ndata``,
``edata``, ``num_nodes()``, ``batch_num_nodes()`` - as plain tensors that move to any device
with ``to()``, so a model runs on a GPU with a CPU-only DGL build: the same layers read either
carrier, and :mod:`~dgl_graphtx.nn.graph_ops` runs their message passing with DGL's kernels on a
DGLGraph and with plain torch ops (``index_add_``, ``scatter_reduce``) on a :class:`GraphTensors`.
DGLGraphs stay on the CPU as what featurization produces and datasets hold.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple, Union

import torch
import dgl

from .dense_blocks import BlockGeometry
from .pair_classes import PairCodes

Device = Union[str, torch.device]


class GraphTensors:
    """The edges, per-graph sizes and features of a (batched) graph as plain tensors.

    Build one with :meth:`from_graph`; it answers the DGLGraph calls the models use (``edges()``,
    ``num_nodes()``, ``num_edges()``, ``batch_num_nodes()``, ``batch_size``, ``ndata``,
    ``edata``, ``device``, ``to()``). ``from_graph(..., blocks=True)`` also lays out the
    head-independent part of the dense attention blocks
    (:class:`~dgl_graphtx.nn.dense_blocks.BlockGeometry`) and finds the relation pairs'
    (distance, bond, self) combinations (:class:`~dgl_graphtx.nn.pair_classes.PairCodes`) where
    it is built (the CPU side of a loader), so a training step on the device never waits to
    compute them. A padded batch (:mod:`dgl_graphtx.datasets.padding`) carries its real nodes'
    ``node_mask`` and its graphs' ``slot_size``.

    Example:
        >>> g = dgl.batch([dgl.graph(([0, 1], [1, 0])), dgl.graph(([0], [0]))])
        >>> g.ndata["feat"] = torch.arange(3.0)[:, None]
        >>> t = GraphTensors.from_graph(g)
        >>> [x.tolist() for x in t.edges()], t.num_nodes(), t.batch_num_nodes().tolist(), t.batch_size
        ([[0, 1, 2], [1, 0, 2]], 3, [2, 1], 2)
        >>> t.to("cpu").ndata["feat"].device
        device(type='cpu')
    """

    def __init__(
        self,
        src: torch.Tensor,
        dst: torch.Tensor,
        batch_num_nodes: torch.Tensor,
        ndata: Dict[str, torch.Tensor],
        edata: Dict[str, torch.Tensor],
        num_nodes: int,
        node_graph: torch.Tensor,
        block_geometry: Optional[BlockGeometry] = None,
        blocks_known: bool = False,
        pair_codes: Optional[PairCodes] = None,
        node_mask: Optional[torch.Tensor] = None,
        slot_size: int = 0,
    ) -> None:
        self.src, self.dst = src, dst
        self._batch_num_nodes = batch_num_nodes
        self.ndata, self.edata = ndata, edata
        self._num_nodes = num_nodes
        self.node_graph = node_graph  # [N]: the graph of the batch each node belongs to
        self.block_geometry = block_geometry  # dense-block geometry, ``None`` if none or unknown
        self.blocks_known = blocks_known  # whether ``block_geometry`` was computed
        self.pair_codes = pair_codes  # a relation graph's (distance, bond, self) combinations, if computed
        # a padded batch (datasets.padding): every graph holds ``slot_size`` nodes, the real ones
        # first (``node_mask``; ``batch_num_nodes`` counts those)
        self.node_mask = node_mask
        self.slot_size = slot_size

    @classmethod
    def from_graph(cls, graph: dgl.DGLGraph, blocks: bool = False) -> "GraphTensors":
        """The tensors of ``graph`` (no copies); with ``blocks`` (a relation graph), what the
        attention layers would otherwise derive from it with the device waiting: its dense-block
        geometry (``None`` when the batch does not fit blocks) and its
        :class:`~dgl_graphtx.nn.pair_classes.PairCodes`."""
        src, dst = (t.long() for t in graph.edges())
        counts = graph.batch_num_nodes().long()
        node_graph = torch.repeat_interleave(torch.arange(counts.numel(), device=counts.device), counts)
        out = cls(src, dst, counts, dict(graph.ndata), dict(graph.edata), graph.num_nodes(), node_graph)
        if blocks:
            out.block_geometry, out.blocks_known = BlockGeometry.of(out), True
            out.pair_codes = PairCodes.of(out) if "spd" in out.edata and "bond" in out.edata else None
        return out

    def edges(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(src, dst)`` per edge, int64."""
        return self.src, self.dst

    def num_nodes(self) -> int:
        return self._num_nodes

    def num_edges(self) -> int:
        return self.src.shape[0]  # a shape, not int(): symbolic in an exported program

    def batch_num_nodes(self) -> torch.Tensor:
        """Nodes of each graph of the batch ``[B]``."""
        return self._batch_num_nodes

    @property
    def batch_size(self) -> int:
        return self._batch_num_nodes.shape[0]

    @property
    def device(self) -> torch.device:
        return self.src.device

    def to(self, device: Device, non_blocking: bool = False) -> "GraphTensors":
        """A copy with every tensor on ``device``."""
        return self.map_tensors(lambda x: x.to(device, non_blocking=non_blocking))

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "GraphTensors":
        """A copy with ``fn`` applied to every tensor, in a fixed order (the edges, the sizes, the
        features, the node graphs, the block geometry, the pair codes, the node mask)."""
        src, dst, counts = fn(self.src), fn(self.dst), fn(self._batch_num_nodes)
        ndata, edata = {k: fn(v) for k, v in self.ndata.items()}, {k: fn(v) for k, v in self.edata.items()}
        node_graph = fn(self.node_graph)
        geometry = None if self.block_geometry is None else self.block_geometry.map_tensors(fn)
        codes = None if self.pair_codes is None else self.pair_codes.map_tensors(fn)
        return GraphTensors(src, dst, counts, ndata, edata, self._num_nodes, node_graph, geometry, self.blocks_known, codes,
                            None if self.node_mask is None else fn(self.node_mask), self.slot_size)

    def __repr__(self) -> str:
        return (f"GraphTensors(num_nodes={self._num_nodes}, num_edges={self.num_edges()}, "
                f"batch_size={self.batch_size}, device={self.device})")


GraphLike = Union[dgl.DGLGraph, GraphTensors]



def on_device(graph: dgl.DGLGraph, device: Device, compute: str, blocks: bool = False) -> GraphLike:
    """``graph`` ready for a model on ``device``: the DGLGraph moved there (``compute="dgl"``) or
    its :class:`GraphTensors` (``compute="tensors"``; ``blocks`` lays out dense blocks first).

    Example:
        >>> on_device(dgl.graph(([0], [1])), "cpu", "tensors")
        GraphTensors(num_nodes=2, num_edges=1, batch_size=1, device=cpu)
    """
    if compute == "tensors":
        return (graph if isinstance(graph, GraphTensors) else GraphTensors.from_graph(graph, blocks)).to(device)
    return graph.to(device)
