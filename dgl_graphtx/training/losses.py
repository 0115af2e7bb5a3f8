"""Training losses over observed labels, with censored labels, per-sample and per-task weights."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F

from ..errors import ConfigError

#: Losses each task allows; the first is its default (``loss="auto"``).
TASK_LOSSES: Dict[str, Tuple[str, ...]] = {
    "regression": ("mse", "mae", "huber", "bounded_mse"),
    "classification": ("bce",),
    "multiclass": ("cross_entropy",),
}
LOSSES = ("auto",) + tuple(name for names in TASK_LOSSES.values() for name in names)
#: Huber's switch from quadratic to linear, in standardised target units.
HUBER_DELTA = 1.0


def resolve_loss(task: str, loss: str) -> str:
    """The loss ``loss`` names for ``task`` (``auto``: the task's default), checked.

    Example:
        >>> resolve_loss("regression", "auto"), resolve_loss("multiclass", "auto")
        ('mse', 'cross_entropy')
        >>> resolve_loss("classification", "mae")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: loss 'mae' does not apply to classification; choose one of ('bce',) (--loss)
    """
    if loss == "auto":
        return TASK_LOSSES[task][0]
    if loss not in TASK_LOSSES[task]:
        raise ConfigError(f"loss {loss!r} does not apply to {task}; choose one of {TASK_LOSSES[task]} (--loss)")
    return loss


def check_pos_weight(task: str, pos_weight: object) -> None:
    """Refuse a ``pos_weight`` (``--pos-weight``) for a task other than classification, which has
    no positive labels to weigh.

    Example:
        >>> check_pos_weight("classification", "auto")
        >>> check_pos_weight("regression", 2.0)
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: pos_weight=2.0 (--pos-weight) applies to classification only
    """
    if task != "classification" and pos_weight is not None:
        raise ConfigError(f"pos_weight={pos_weight!r} (--pos-weight) applies to classification only")


def per_label_loss(loss: str, output: torch.Tensor, target: torch.Tensor, censor: Optional[torch.Tensor] = None,
                   pos_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Unreduced loss ``[B, T]`` of every label.

    ``bounded_mse`` (chemprop's loss for censored labels): where ``censor`` is -1 (label ``<y``)
    a prediction below ``y`` costs nothing, where it is 1 (``>y``) one above ``y`` costs nothing;
    elsewhere it is the squared error. ``bce`` takes logits and an optional per-task
    ``pos_weight`` ``[T]`` (the weight of positive labels). ``cross_entropy`` takes ``[B, T * K]``
    logits and class indices ``[B, T]``.

    Example:
        >>> out, y = torch.tensor([[1.0], [1.0], [1.0]]), torch.tensor([[3.0], [3.0], [0.0]])
        >>> per_label_loss("bounded_mse", out, y, censor=torch.tensor([[-1], [1], [0]])).flatten().tolist()
        [0.0, 4.0, 1.0]
    """
    if loss == "mse":
        return (output - target) ** 2
    if loss == "mae":
        return (output - target).abs()
    if loss == "huber":
        return F.huber_loss(output, target, reduction="none", delta=HUBER_DELTA)
    if loss == "bounded_mse":
        if censor is not None:
            output = torch.where((censor < 0) & (output < target), target, output)
            output = torch.where((censor > 0) & (output > target), target, output)
        return (output - target) ** 2
    if loss == "bce":
        return F.binary_cross_entropy_with_logits(output, target.clamp(0.0, 1.0), reduction="none", pos_weight=pos_weight)
    if loss == "cross_entropy":
        logits = output.view(len(output), target.shape[1], -1).permute(0, 2, 1)  # [B, K, T]
        return F.cross_entropy(logits, target.long(), reduction="none")
    raise ConfigError(f"loss must be one of {LOSSES[1:]}, got {loss!r}")


def weighted_loss(loss: str, output: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, *,
                  censor: Optional[torch.Tensor] = None, sample_weights: Optional[torch.Tensor] = None,
                  task_weights: Optional[torch.Tensor] = None, pos_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Loss over observed labels (``mask``): each label's loss times its sample's weight ``[B]``
    and its task's weight ``[T]``, summed and divided by the number of observed labels (as chemprop
    does). Masked labels (which may be NaN) never reach the loss or its gradient.

    Example:
        >>> out, y, mask = torch.tensor([[1.0, 5.0], [2.0, 0.0]]), torch.zeros(2, 2), torch.tensor([[True, False], [True, True]])
        >>> float(weighted_loss("mse", out, y, mask))
        1.6666666269302368
        >>> float(weighted_loss("mae", out, y, mask, sample_weights=torch.tensor([2.0, 1.0]), task_weights=torch.tensor([1.0, 3.0])))
        1.3333333730697632
    """
    fill = torch.zeros_like(target) if loss == "cross_entropy" else output.detach()  # masked values may be NaN
    target = torch.where(mask, target, fill)
    per_label = per_label_loss(loss, output, target, censor, pos_weight)
    if sample_weights is not None:
        per_label = per_label * sample_weights.to(per_label.dtype).view(-1, 1)
    if task_weights is not None:
        per_label = per_label * task_weights.to(per_label.dtype).view(1, -1)
    per_label = torch.where(mask, per_label, torch.zeros_like(per_label))
    return per_label.sum() / mask.sum().clamp_min(1).to(per_label.dtype)
