"""What training learns from its training part's labels before the first step: targets without a
label are refused, and regression targets get their per-element reference values (for a model
with an atom reference) and the mean and standard deviation that standardise them."""
from __future__ import annotations

import math
from typing import Iterable, Sequence, Tuple

import torch

from ..datasets import MoleculeBatch
from ..errors import ConfigError
from ..models import MoleculeModel
from ..models.atom_reference import fit_atom_references


def refuse_unlabelled_targets(labels: torch.Tensor, names: Sequence[str]) -> None:
    """Refuse ``labels`` ``[M, T]`` (NaN = missing) when a target has no observed label: one
    :class:`~dgl_graphtx.errors.ConfigError` naming those targets (``names``: all ``T``).

    Example:
        >>> refuse_unlabelled_targets(torch.tensor([[1.0, float("nan")]]), ["a", "b"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: no observed training label for ['b']: every value of the training part is blank or not a ...
    """
    observed = ~torch.isnan(labels)
    if not observed.any(dim=0).all():
        empty = torch.nonzero(~observed.any(dim=0)).flatten().tolist()
        raise ConfigError(
            f"no observed training label for {[names[t] for t in empty]}: every value of the training part is blank or "
            "not a number; check the column / SD property values (see input_report.csv) or choose other targets"
        )


def normalization_statistics(labels: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mean and (population) standard deviation ``[T]`` of the observed ``labels`` ``[M, T]``
    (NaN = missing), as float32: what standardises regression targets.

    Example:
        >>> mean, std = normalization_statistics(torch.tensor([[1.0, 2.0], [3.0, float("nan")]], dtype=torch.float64))
        >>> mean.tolist(), std.tolist()
        ([2.0, 2.0], [1.0, 0.0])
    """
    observed = ~torch.isnan(labels)
    filled = torch.where(observed, labels, torch.zeros_like(labels))
    count = observed.sum(0)
    mean = filled.sum(0) / count
    var = (torch.where(observed, labels - mean, torch.zeros_like(labels)) ** 2).sum(0) / count.clamp_min(1)
    return mean.float(), var.sqrt().float()


def fit_atom_reference(model: MoleculeModel, batches: Iterable[MoleculeBatch]) -> torch.Tensor:
    """Fit ``model``'s per-element reference values to the labels of ``batches`` (the training
    part) by least squares (see :mod:`~dgl_graphtx.models.atom_reference`) and store them in the
    model; returns the labels ``[M, T]`` minus them (NaN where missing), whose statistics
    standardise the targets."""
    reference = model.atom_reference
    assert reference is not None, "fit_atom_reference needs a model with an atom reference"
    count_parts, label_parts = [], []
    for batch in batches:
        count_parts.append(reference.counts(batch.graph).double())
        label_parts.append(torch.where(batch.mask, batch.labels.double(), torch.full_like(batch.labels.double(), math.nan)))
    counts, labels = torch.cat(count_parts), torch.cat(label_parts)
    values = fit_atom_references(counts, labels)
    model.set_atom_reference(values)
    return labels - counts @ values
