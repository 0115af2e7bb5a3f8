"""The trainer's AdamW: fused into one kernel where the device has one, and a step that the
device itself skips when a loss or gradient was not finite (nothing read back by the host)."""
from __future__ import annotations

from typing import Any, Dict, List, Union

import torch


def adamw(groups: List[Dict[str, Any]], lr: float, weight_decay: float, device: Union[str, torch.device]) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` over parameter ``groups``, ``fused`` where torch has the kernel (CUDA;
    the CPU since torch 2.4): one operation per step instead of several per parameter, and
    :func:`step_unless` skips on the device. Torch's default elsewhere.

    Example:
        >>> opt = adamw([{"params": [torch.nn.Parameter(torch.ones(2))]}], lr=0.1, weight_decay=0.0, device="cpu")
        >>> bool(opt.defaults["fused"]) == has_fused_adamw("cpu")
        True
    """
    fused = has_fused_adamw(torch.device(device).type)
    return torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay, fused=fused or None)


def has_fused_adamw(device_type: str) -> bool:
    """Whether this torch has a fused AdamW kernel for ``device_type`` (``"cuda"``, or ``"cpu"``
    from torch 2.4 on).

    Example:
        >>> has_fused_adamw("cuda")
        True
    """
    return device_type == "cuda" or (device_type == "cpu" and torch.__version__ >= "2.4")


def step_unless(optimizer: torch.optim.Optimizer, skip: torch.Tensor) -> None:
    """``optimizer.step()`` unless ``skip`` (a 0-d bool tensor on the parameters' device). A fused
    optimizer decides on the device (the ``found_inf`` of mixed-precision scaling: no update and
    no step counted where it is 1), so the host does not wait; others read ``skip`` first.

    Example:
        >>> w = torch.nn.Parameter(torch.ones(1))
        >>> opt = adamw([{"params": [w]}], lr=0.5, weight_decay=0.0, device="cpu")
        >>> w.grad = torch.ones(1)
        >>> step_unless(opt, torch.tensor(True)); w.item()
        1.0
        >>> step_unless(opt, torch.tensor(False)); round(w.item(), 3)
        0.5
    """
    if optimizer.defaults.get("fused"):
        optimizer.found_inf = skip.to(torch.float32)  # type: ignore[attr-defined]  # read by torch's fused kernels
        optimizer.step()
    elif not bool(skip):
        optimizer.step()
