"""Device selection that works the same with CPU-only and CUDA builds of torch and DGL."""
from __future__ import annotations

from typing import Union

import torch

from .errors import ConfigError


def resolve_device(device: Union[str, torch.device] = "auto") -> torch.device:
    """``"auto"`` picks CUDA when torch can use it, else CPU; anything else is passed to torch.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as err:
        raise ConfigError(f"unknown device {device!r}: {err}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available to torch; use 'cpu' or 'auto'")
    return resolved
