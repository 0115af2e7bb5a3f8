"""Mini-batches of molecules: batched molecular graph, batched relation graph, labels and mask."""
from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple, Union

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
        """Move every part to ``device``."""
        tensors = isinstance(self.graph, GraphTensors)
        return MoleculeBatch(
            self.graph.to(device, non_blocking=non_blocking) if tensors else self.graph.to(device),
            self.relation_graph.to(device, non_blocking=non_blocking) if tensors else self.relation_graph.to(device),
            self.labels.to(device, non_blocking=non_blocking),
            self.mask.to(device, non_blocking=non_blocking),
        )

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
