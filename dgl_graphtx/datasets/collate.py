"""Mini-batches of molecules: batched molecular graph, batched relation graph, labels and mask."""
from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Sequence, Tuple, Union

import torch
import dgl

from ..nn.graph_tensors import GraphLike, GraphTensors

Sample = Tuple[dgl.DGLGraph, dgl.DGLGraph, torch.Tensor, torch.Tensor]


class MoleculeBatch(NamedTuple):
    """What a molecule loader yields; unpacks as ``graph, relation_graph, labels, mask``.

    ``labels`` is float ``[B, T]`` with missing values set to 0; ``mask`` is bool ``[B, T]`` and
    is ``False`` exactly where a label is missing, so losses must be masked with it. The graphs
    are DGLGraphs, or their :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` for the tensor
    compute path (:meth:`as_tensors`, :func:`collate_molecule_tensors`).
    """

    graph: GraphLike
    relation_graph: GraphLike
    labels: torch.Tensor
    mask: torch.Tensor

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "MoleculeBatch":
        """Move every part to ``device``; tensors that share a buffer (:meth:`pack`) move as one copy
        of it."""
        if not isinstance(self.graph, GraphTensors):
            return MoleculeBatch(self.graph.to(device), self.relation_graph.to(device),
                                 self.labels.to(device, non_blocking=non_blocking), self.mask.to(device, non_blocking=non_blocking))
        moved: Dict[int, torch.Tensor] = {}  # a shared buffer's bytes on the device, by buffer

        def move(x: torch.Tensor) -> torch.Tensor:
            storage = x.untyped_storage()
            if x.device == torch.device(device) or storage.nbytes() == x.numel() * x.element_size():
                return x.to(device, non_blocking=non_blocking)  # on the device already, or a buffer of its own
            key = storage.data_ptr()
            if key not in moved:
                moved[key] = torch.empty(0, dtype=torch.uint8).set_(storage).to(device, non_blocking=non_blocking)
            return moved[key].view(x.dtype).as_strided(x.shape, x.stride(), x.storage_offset())

        return self.map_tensors(move)

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "MoleculeBatch":
        """A batch of :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` with ``fn`` applied to every
        tensor, in a fixed order (the graph's, the relation graph's, the labels, the mask)."""
        if not isinstance(self.graph, GraphTensors) or not isinstance(self.relation_graph, GraphTensors):
            raise TypeError("map_tensors needs a batch of GraphTensors (as_tensors)")
        return MoleculeBatch(self.graph.map_tensors(fn), self.relation_graph.map_tensors(fn), fn(self.labels), fn(self.mask))

    def pack(self, pin: bool = False) -> "MoleculeBatch":
        """The same batch of GraphTensors with its tensors laid in one buffer per dtype (a few in
        all, page-locked with ``pin``: what a GPU copies in one go each, overlapping its work).

        Example:
            >>> from dgl_graphtx.featurize import smiles_to_graphs
            >>> samples = [(*smiles_to_graphs(s), torch.tensor([1.0]), torch.tensor([True])) for s in ["C", "CO"]]
            >>> packed = collate_molecule_tensors(samples).pack()
            >>> tensors = leaves(packed)
            >>> len({t.untyped_storage().data_ptr() for t in tensors}) == len({t.dtype for t in tensors})  # a buffer per dtype
            True
        """
        sizes: Dict[torch.dtype, int] = {}
        for leaf in leaves(self):
            sizes[leaf.dtype] = sizes.get(leaf.dtype, 0) + leaf.numel()
        buffers = {dtype: torch.empty(size, dtype=dtype, pin_memory=pin) for dtype, size in sizes.items()}
        used = dict.fromkeys(sizes, 0)

        def place(x: torch.Tensor) -> torch.Tensor:
            start = used[x.dtype]
            used[x.dtype] = start + x.numel()
            return buffers[x.dtype][start:start + x.numel()].view(x.shape).copy_(x)

        return self.map_tensors(place)

    def pin_memory(self) -> "MoleculeBatch":
        """:meth:`pack` into page-locked buffers (a DataLoader with ``pin_memory=True`` calls this);
        a batch of DGLGraphs as it is."""
        return self.pack(pin=True) if isinstance(self.graph, GraphTensors) else self

    def as_tensors(self) -> "MoleculeBatch":
        """The same batch with both graphs as :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`
        (the relation graph's dense-block geometry laid out here, on the CPU side)."""
        if isinstance(self.graph, GraphTensors):
            return self
        return self._replace(
            graph=GraphTensors.from_graph(self.graph), relation_graph=GraphTensors.from_graph(self.relation_graph, blocks=True)
        )

    @property
    def batch_size(self) -> int:
        """Number of molecules in the batch."""
        return self.graph.batch_size


def leaves(batch: MoleculeBatch) -> List[torch.Tensor]:
    """The tensors of a batch of GraphTensors, in :meth:`MoleculeBatch.map_tensors`' order.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> len(leaves(collate_molecule_tensors([(*smiles_to_graphs("CO"), torch.ones(1), torch.ones(1, dtype=torch.bool))]))) > 10
        True
    """
    found: List[torch.Tensor] = []

    def keep(x: torch.Tensor) -> torch.Tensor:
        found.append(x)
        return x

    batch.map_tensors(keep)
    return found


def labels_and_mask(raw: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Split labels with NaN for missing values into (labels with 0 there, observed mask)."""
    mask = ~torch.isnan(raw)
    return torch.where(mask, raw, torch.zeros_like(raw)), mask


def collate_molecules(samples: Union[Sequence[Sample], MoleculeBatch]) -> MoleculeBatch:
    """``collate_fn`` for :class:`torch.utils.data.DataLoader` over molecule datasets.

    Accepts a list of ``(graph, relation_graph, labels, mask)`` samples (batched with
    :func:`dgl.batch`), or a :class:`MoleculeBatch` that a dataset's ``__getitems__`` already
    assembled (passed through unchanged).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> samples = [(*smiles_to_graphs(s), torch.tensor([1.0]), torch.tensor([True])) for s in ["C", "CO"]]
        >>> batch = collate_molecules(samples)
        >>> batch.graph.batch_size, batch.relation_graph.num_edges(), batch.labels.shape
        (2, 5, torch.Size([2, 1]))
    """
    if isinstance(samples, MoleculeBatch):
        return samples
    if len(samples) == 0:
        raise ValueError("cannot collate an empty list of samples")
    graphs, relations, labels, masks = zip(*samples)
    return MoleculeBatch(dgl.batch(graphs), dgl.batch(relations), torch.stack(labels), torch.stack(masks))


def collate_molecule_tensors(samples: Union[Sequence[Sample], MoleculeBatch]) -> MoleculeBatch:
    """:func:`collate_molecules`, then :meth:`MoleculeBatch.as_tensors`: the ``collate_fn`` of the
    tensor compute path, so loader workers build the batch's tensors and block layout.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> samples = [(*smiles_to_graphs(s), torch.tensor([1.0]), torch.tensor([True])) for s in ["C", "CO"]]
        >>> batch = collate_molecule_tensors(samples)
        >>> type(batch.graph).__name__, batch.relation_graph.block_geometry.size, batch.batch_size
        ('GraphTensors', 2, 2)
    """
    return collate_molecules(samples).as_tensors()
