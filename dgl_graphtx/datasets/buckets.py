"""Size buckets: training batches of molecules of similar sizes, each bucket with one padded shape.

:class:`SizeBuckets` splits the molecules by atom count into a bounded number of buckets of about
as many molecules each; :class:`BucketBatchSampler` deals out batches from one bucket at a time,
the molecules shuffled within their buckets and the batches shuffled across them every epoch.
With :class:`PaddedCollate` every batch of a bucket is padded to the bucket's
:class:`~dgl_graphtx.datasets.padding.PaddedShape` (the same tensor shapes: one compiled or
captured step per bucket); without padding, similar sizes alone waste less of the dense attention
blocks, which are as large as a batch's largest molecule.
"""
from __future__ import annotations

import bisect
import logging
import random
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch.utils.data import Dataset, Sampler, Subset

from ..errors import ConfigError
from ..validation import check_number
from .collate import MoleculeBatch, Sample, collate_molecule_tensors, collate_molecules
from .padding import PAIR_CODES, PaddedShape, PaddingOverflow, pad_batch

logger = logging.getLogger("dgl_graphtx")


def molecule_sizes(dataset: Dataset) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(atoms, bonds)`` ``[M]`` of each item (bonds as directed edges) of a
    :class:`~dgl_graphtx.datasets.MoleculeDataset`, a loaded store, a ``Subset`` of one, or a
    wrapper keeping its rows in ``.dataset``.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> [t.tolist() for t in molecule_sizes(MoleculeDataset(["CCO", "C"], progress=False))]
        [[3, 1], [4, 0]]
    """
    if isinstance(dataset, Subset):
        atoms, bonds = molecule_sizes(dataset.dataset)
        rows = torch.as_tensor(dataset.indices, dtype=torch.int64)
        return atoms[rows], bonds[rows]
    if hasattr(dataset, "graphs") and hasattr(dataset.graphs, "num_nodes"):
        return dataset.graphs.num_nodes, dataset.graphs.num_edges
    if hasattr(dataset, "dataset"):
        return molecule_sizes(dataset.dataset)
    raise ConfigError(f"size buckets need the molecules' sizes, which a {type(dataset).__name__} does not hold; "
                      "train on a MoleculeDataset or a featurized store, or without size buckets")


@dataclass(frozen=True)
class SizeBuckets:
    """Molecules grouped by atom count: ``upper[i]`` is the largest atom count of bucket ``i``
    (ascending), ``shapes[i]`` the padded shape of its batches.

    Example:
        >>> buckets = SizeBuckets.of(torch.tensor([3, 5, 9, 9, 12, 20]), torch.tensor([4, 8, 18, 16, 24, 40]), 2, count=3)
        >>> buckets.upper, buckets.bucket(9), buckets.shapes[0]
        ((5, 9, 20), 1, PaddedShape(molecules=2, atoms=6, bonds=8, pair_codes=64))
    """

    upper: Tuple[int, ...]
    shapes: Tuple[PaddedShape, ...]

    @classmethod
    def of(cls, atoms: torch.Tensor, bonds: torch.Tensor, batch_size: int, count: int = 8,
           pair_codes: int = PAIR_CODES) -> "SizeBuckets":
        """At most ``count`` buckets of consecutive atom counts, about as many molecules in each
        (a size is never split between two buckets)."""
        check_number("size buckets", count, 1, integer=True)
        if atoms.numel() == 0:
            raise ConfigError("size buckets need at least one molecule")
        order = torch.sort(atoms).values.tolist()
        cuts = sorted({order[min(len(order) - 1, (len(order) * (i + 1)) // count - 1)] for i in range(count)})
        upper = tuple(cuts[:-1]) + (order[-1],)
        shapes = []
        lower = -1
        for top in upper:
            inside = (atoms > lower) & (atoms <= top)
            shapes.append(PaddedShape(batch_size, top + 1, max(int(bonds[inside].max()) if inside.any() else 0, 1), pair_codes))
            lower = top
        return cls(upper, tuple(shapes))

    def bucket(self, atoms: int) -> int:
        """The bucket of a molecule (or batch) of ``atoms`` atoms; past the last: ``len(upper)``."""
        return bisect.bisect_left(self.upper, atoms)


class BucketBatchSampler(Sampler):
    """Batches of up to ``batch_size`` molecules, all from one size bucket. Pass it as a
    DataLoader's ``batch_sampler``.

    Args:
        atoms: ``[M]`` atoms of each molecule (see :func:`molecule_sizes`).
        buckets: the buckets.
        batch_size: most molecules per batch (a bucket's last batch may be shorter).
        order: the indices to batch, in order (a shuffling sampler, iterated anew each epoch, e.g.
            a ``DistributedSampler``); default all molecules in dataset order. Grouping keeps
            their order, so they are shuffled within their buckets.
        seed: the batches' order across buckets is shuffled from ``seed`` and the epoch
            (:meth:`set_epoch`); ``None``: bucket by bucket.
        drop_last_single: leave out a last batch of one molecule (BatchNorm needs more).

    Example:
        >>> atoms = torch.tensor([3, 9, 4, 10, 3, 9])
        >>> buckets = SizeBuckets.of(atoms, atoms, batch_size=2, count=2)
        >>> [sorted(int(atoms[i]) for i in batch) for batch in BucketBatchSampler(atoms, buckets, 2, seed=None)]
        [[3, 4], [3], [9, 10], [9]]
    """

    def __init__(self, atoms: torch.Tensor, buckets: SizeBuckets, batch_size: int, order: Optional[Iterable[int]] = None,
                 seed: Optional[int] = 0, drop_last_single: bool = False) -> None:
        check_number("batch_size", batch_size, 1, integer=True)
        self.bucket_of: List[int] = [buckets.bucket(int(a)) for a in atoms.tolist()]
        self.buckets = buckets
        self.batch_size = batch_size
        self.order = order
        self.seed = seed
        self.drop_last_single = drop_last_single
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose batch order to draw (passed on to ``order`` if it takes one)."""
        self.epoch = epoch
        if hasattr(self.order, "set_epoch"):
            self.order.set_epoch(epoch)  # type: ignore[union-attr]

    def _batches(self, order: Iterable[int]) -> List[List[int]]:
        groups: List[List[int]] = [[] for _ in range(len(self.buckets.upper) + 1)]
        for index in order:
            groups[self.bucket_of[int(index)]].append(int(index))
        batches = [group[start:start + self.batch_size] for group in groups for start in range(0, len(group), self.batch_size)]
        if self.drop_last_single and self.batch_size > 1:
            batches = [batch for batch in batches if len(batch) > 1]
        if self.seed is not None:
            random.Random(self.seed * 100_003 + self.epoch).shuffle(batches)
        return batches

    def __iter__(self) -> Iterator[List[int]]:
        return iter(self._batches(range(len(self.bucket_of)) if self.order is None else self.order))

    def __len__(self) -> int:
        return len(self._batches(range(len(self.bucket_of)) if self.order is None else self.order))


class PaddedCollate:
    """``collate_fn`` that pads each batch to its bucket's shape (:func:`~dgl_graphtx.datasets.padding.pad_batch`),
    as :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`. A batch that does not fit (a molecule
    larger than the last bucket's, too many pair codes) comes unpadded (the tensor path's
    ``collate_fn``), with one log line the first time.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> ds = MoleculeDataset(["CCO", "CC", "c1ccccc1"], [[1.0], [2.0], [3.0]], progress=False)
        >>> atoms, bonds = molecule_sizes(ds)
        >>> collate = PaddedCollate(SizeBuckets.of(atoms, bonds, batch_size=2, count=2))
        >>> batch = collate(ds.__getitems__([0, 1]))
        >>> batch.graph.slot_size, batch.graph.num_nodes()
        (7, 14)
    """

    def __init__(self, buckets: SizeBuckets) -> None:
        self.buckets = buckets
        self.warned = False

    def __call__(self, samples: Union[Sequence[Sample], MoleculeBatch]) -> MoleculeBatch:
        batch = collate_molecules(samples)
        atoms = int(batch.graph.batch_num_nodes().max())
        index = self.buckets.bucket(atoms)
        if index < len(self.buckets.shapes):
            try:
                return pad_batch(batch, self.buckets.shapes[index])
            except PaddingOverflow as overflow:
                reason = str(overflow)
        else:
            reason = f"a molecule of {atoms} atoms is larger than the largest bucket's ({self.buckets.upper[-1]})"
        if not self.warned:
            logger.info("a batch runs unpadded (eager step): %s", reason)
            self.warned = True
        return collate_molecule_tensors(batch)

