"""What a training run is trained on, as its checkpoints record it so that resuming the run can be
checked against it: a digest of the dataset's content and the input rows of each part of its split."""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Optional

import numpy as np
import torch

from .molecule_dataset import MoleculeDataset
from .splits import Split

#: The parts of a split, in the order they are reported.
PARTS = ("train", "valid", "test")


def content_digest(dataset: MoleculeDataset) -> str:
    """SHA-256 (hex) of what training reads of ``dataset`` (a :class:`~dgl_graphtx.datasets.MoleculeDataset`):
    the molecules' identifiers and input rows in order, the labels, and the per-row extras it may
    carry (loss weights, censoring codes, groups, extra feature values).

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> a = MoleculeDataset(["C", "CC"], [[1.0], [2.0]], progress=False)
        >>> b = MoleculeDataset(["C", "CC"], [[1.0], [2.5]], progress=False)
        >>> again = MoleculeDataset(["C", "CC"], [[1.0], [2.0]], progress=False)
        >>> content_digest(a) == content_digest(again), content_digest(a) == content_digest(b)
        (True, False)
    """
    digest = hashlib.sha256()
    digest.update("\n".join(dataset.identifiers).encode())
    digest.update(dataset.rows.numpy().astype(np.int64).tobytes())
    digest.update(dataset.raw_labels.numpy().astype(np.float32).tobytes())
    extras = dataset.extra_values
    arrays = [dataset.sample_weights, dataset.censor, extras.molecule if extras else None, extras.atom if extras else None]
    for array in arrays:
        digest.update(b"|" if array is None else np.ascontiguousarray(array).tobytes())
    digest.update("\n".join(dataset.groups or []).encode())
    return digest.hexdigest()


def training_data_record(dataset: MoleculeDataset, split: Split, calibration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The record a run's checkpoints keep of its data: size, :func:`content_digest` and, per part
    of ``split`` (indices into ``dataset``), the input rows of its molecules (int64 tensors); with
    ``calibration`` (what identifies the molecules that calibrate the run's uncertainty: source,
    count and digest) that too.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> ds = MoleculeDataset(["C", "C1CC", "CC", "CCC"], [[1.0], [2.0], [3.0], [4.0]], progress=False)
        >>> record = training_data_record(ds, Split(train=[0, 1], valid=[2], test=[]))
        >>> record["molecules"], record["split"]["train"].tolist()  # the invalid input row 1 is not in the dataset
        (3, [0, 2])
    """
    record = {"molecules": len(dataset), "digest": content_digest(dataset),
              "split": {part: dataset.rows[torch.as_tensor(list(getattr(split, part)), dtype=torch.int64)].clone() for part in PARTS}}
    return record if calibration is None else {**record, "calibration": dict(calibration)}
