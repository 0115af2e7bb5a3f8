"""Batches cut by a molecule count and a relation-edge budget: the batching rule prediction uses,
and training uses with ``TrainConfig.batch_edges``.

Attention cost grows with the relation graph's edges, not with the number of molecules, so a
batch of large molecules can need many times the memory of one of small ones. Bounding the edges
of a batch bounds the memory of a step whatever the molecules.
"""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Union

import torch
from torch.utils.data import Dataset, Sampler, Subset

from ..errors import ConfigError
from ..validation import check_number


class EdgeBudgetBatchSampler(Sampler):
    """Groups consecutive indices of ``order`` (default ``0 .. M-1``) into batches of at most
    ``batch_size`` molecules and at most ``batch_edges`` relation-graph edges; a molecule alone
    above the edge budget gets a batch of its own. Pass it as a DataLoader's ``batch_sampler``.

    Args:
        edges: ``[M]`` relation-graph edges of each molecule (see :func:`relation_edge_counts`).
        batch_size: most molecules per batch.
        batch_edges: most relation-graph edges per batch.
        order: the indices to batch, in order (a sampler such as a shuffling one, iterated anew
            each epoch); default: all molecules in dataset order.
        drop_last_single: leave out a last batch of one molecule (training with BatchNorm needs
            more than one row), as the loader's ``drop_last`` does for plain batches.

    ``len()`` counts the batches of the molecules in dataset order; a shuffled epoch can have a
    few more or fewer.

    Example:
        >>> list(EdgeBudgetBatchSampler([3, 3, 5, 1, 1], batch_size=3, batch_edges=6))
        [[0, 1], [2, 3], [4]]
        >>> list(EdgeBudgetBatchSampler([3, 3, 5, 1, 1], 3, 6, order=[1, 0, 4, 3, 2], drop_last_single=True))
        [[1, 0], [4, 3]]
    """

    def __init__(self, edges: Union[Sequence[int], torch.Tensor], batch_size: int, batch_edges: int,
                 order: Optional[Iterable[int]] = None, drop_last_single: bool = False) -> None:
        check_number("batch_size", batch_size, 1, integer=True)
        check_number("batch_edges", batch_edges, 1, integer=True)
        self.edges: List[int] = edges.tolist() if isinstance(edges, torch.Tensor) else [int(e) for e in edges]
        self.batch_size = batch_size
        self.batch_edges = batch_edges
        self.order = order
        self.drop_last_single = drop_last_single

    def _batches(self, order: Iterable[int]) -> Iterator[List[int]]:
        batch: List[int] = []
        load = 0
        for index in order:
            count = self.edges[index]
            if batch and (len(batch) >= self.batch_size or load + count > self.batch_edges):
                yield batch
                batch, load = [], 0
            batch.append(int(index))
            load += count
        if batch and not (self.drop_last_single and len(batch) == 1 and self.batch_size > 1):
            yield batch

    def __iter__(self) -> Iterator[List[int]]:
        return self._batches(range(len(self.edges)) if self.order is None else self.order)

    def __len__(self) -> int:
        return sum(1 for _ in self._batches(range(len(self.edges))))


def relation_edge_counts(dataset: Dataset) -> torch.Tensor:
    """``[M]`` relation-graph edges of each item of a :class:`~dgl_graphtx.datasets.MoleculeDataset`
    (or a loaded store), of a ``Subset`` of one, or of a wrapper keeping its rows in ``.dataset``.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> ds = MoleculeDataset(["C", "CC", "CCC"], progress=False)
        >>> relation_edge_counts(Subset(ds, [2, 0])).tolist()
        [9, 1]
    """
    if isinstance(dataset, Subset):
        return relation_edge_counts(dataset.dataset)[torch.as_tensor(dataset.indices, dtype=torch.int64)]
    if hasattr(dataset, "relations"):
        return dataset.relations.num_edges
    if hasattr(dataset, "dataset"):
        return relation_edge_counts(dataset.dataset)
    raise ConfigError(f"batch_edges needs the relation graphs' sizes, which a {type(dataset).__name__} does not hold; "
                      "train on a MoleculeDataset or a featurized store, or without batch_edges")
