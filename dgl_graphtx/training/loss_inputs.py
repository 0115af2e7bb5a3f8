"""Per-row loss inputs beyond labels (censoring codes, sample weights) and the loader plumbing
that hands each training batch its row numbers, so the loss can look them up."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Union

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from ..datasets import MoleculeBatch, collate_molecules


class IndexedBatch(NamedTuple):
    """A batch (or the samples a dataset returned for it) and the row numbers (in the wrapped
    dataset) of its molecules."""

    batch: Any
    rows: torch.Tensor


class RowIndexed(Dataset):
    """``dataset`` whose batches come with their row numbers (see :func:`collate_indexed`).

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> indexed = RowIndexed(MoleculeDataset(["C", "CC", "CCC"], [[1.0], [2.0], [3.0]], progress=False))
        >>> item = collate_indexed(indexed.__getitems__([2, 0]))
        >>> item.rows.tolist(), item.batch.labels.flatten().tolist()
        ([2, 0], [3.0, 1.0])
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]  # torch's Dataset declares no __len__; ours all have one

    def __getitems__(self, indices: List[int]) -> IndexedBatch:
        inner = self.dataset
        samples = inner.__getitems__(list(indices)) if hasattr(inner, "__getitems__") else [inner[i] for i in indices]
        return IndexedBatch(samples, torch.as_tensor(list(indices), dtype=torch.int64))


def collate_indexed(item: IndexedBatch, collate: Callable[[Any], MoleculeBatch] = collate_molecules) -> IndexedBatch:
    """``collate_fn`` for loaders over :class:`RowIndexed` datasets: ``collate`` (the loader's
    usual one) applied to the batch, the row numbers kept."""
    return IndexedBatch(collate(item.batch), item.rows)


def _column(dataset: Dataset, name: str) -> Optional[np.ndarray]:
    """Attribute ``name`` of the dataset under any ``Subset`` layers, rows in the subset's order."""
    if isinstance(dataset, Subset):
        values = _column(dataset.dataset, name)
        return None if values is None else values[np.asarray(dataset.indices, dtype=np.int64)]
    values = getattr(dataset, name, None)
    return None if values is None else np.asarray(values)


class LossInputs(NamedTuple):
    """Censoring codes ``[N, T]`` (-1 ``<``, 0 exact, 1 ``>``) and loss weights ``[N]`` of a dataset's rows."""

    censor: Optional[torch.Tensor]
    sample_weights: Optional[torch.Tensor]

    @classmethod
    def of(cls, dataset: Dataset) -> Optional["LossInputs"]:
        """Those of ``dataset`` (a ``MoleculeDataset`` from ``load_labelled``, or a ``Subset`` of
        one); ``None`` when it has neither.

        Example:
            >>> from dgl_graphtx.datasets import MoleculeDataset
            >>> ds = MoleculeDataset(["C", "CC", "CCC"], [[1.0], [2.0], [3.0]], progress=False)
            >>> ds.sample_weights = np.array([1.0, 2.0, 3.0])
            >>> LossInputs.of(Subset(ds, [2, 0])).sample_weights.tolist()
            [3.0, 1.0]
        """
        censor, weights = _column(dataset, "censor"), _column(dataset, "sample_weights")
        if censor is None and weights is None:
            return None
        return cls(None if censor is None else torch.as_tensor(censor, dtype=torch.int8),
                   None if weights is None else torch.as_tensor(weights, dtype=torch.float32))

    def at(self, rows: torch.Tensor, device: Union[str, torch.device]) -> Dict[str, torch.Tensor]:
        """Keyword arguments of :func:`~dgl_graphtx.training.losses.weighted_loss` for ``rows``
        (on the host, or on ``device`` already: then read there, with no copy in the step)."""
        out = {}
        for name, values in zip(self._fields, self):
            if values is not None:
                out[name] = values.to(rows.device)[rows].to(device)
        return out

    def to(self, device: Union[str, torch.device]) -> "LossInputs":
        """The same inputs on ``device`` (done once, so that steps index them there)."""
        return LossInputs(*(None if values is None else values.to(device) for values in self))
