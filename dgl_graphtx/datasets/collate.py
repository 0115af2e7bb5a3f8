"""Mini-batches of molecules: batched molecular graph, batched relation graph, labels and mask."""
from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple, Union

import torch

from .. import _dgl_env  # noqa: F401
import dgl

Sample = Tuple[dgl.DGLGraph, dgl.DGLGraph, torch.Tensor, torch.Tensor]


class MoleculeBatch(NamedTuple):
    """What a molecule loader yields; unpacks as ``graph, relation_graph, labels, mask``.

    ``labels`` is float ``[B, T]`` with missing values set to 0; ``mask`` is bool ``[B, T]`` and
    is ``False`` exactly where a label is missing, so losses must be masked with it.
    """

    graph: dgl.DGLGraph
    relation_graph: dgl.DGLGraph
    labels: torch.Tensor
    mask: torch.Tensor

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "MoleculeBatch":
        """Move every part to ``device``."""
        return MoleculeBatch(
            self.graph.to(device),
            self.relation_graph.to(device),
            self.labels.to(device, non_blocking=non_blocking),
            self.mask.to(device, non_blocking=non_blocking),
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
