"""MoireGT focus functions ``log f(d; mu, sigma)``, each written directly in log space.

Computing ``log f`` without forming ``f`` first keeps far pairs finite (a Gaussian focus of a pair
1e6 Angstrom away is ``-1e12 / sigma``, not ``log(0) = -inf``) and gradients smooth.

==================  =================================  ==========================================
name                f(d)                               log f(d)
==================  =================================  ==========================================
``gaussian``        exp(-(d-mu)^2 / sigma)             -(d-mu)^2 / sigma
``laplacian``       exp(-|d-mu| / sigma)               -|d-mu| / sigma
``cauchy``          1 / (1 + ((d-mu)/sigma)^2)         -log1p(((d-mu)/sigma)^2)
``triangle``        max(1 - |d-mu|/sigma, 0)           log(max(1 - |d-mu|/sigma, 1e-6))
``mirrored_sigmoid`` 1 / (1 + exp((d-mu)/sigma))        -softplus((d-mu)/sigma)
==================  =================================  ==========================================

The triangle is floored at ``1e-6`` so a query whose candidates all lie outside the window still
has a finite softmax row.
"""
from __future__ import annotations

from typing import Callable, Dict

import torch
import torch.nn.functional as F

TRIANGLE_FLOOR = 1e-6

LogFocus = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def log_gaussian(d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log exp(-(d - mu)^2 / sigma)``."""
    return (d - mu).square() / -sigma  # one pass fewer than -(...) / sigma: -sigma has H entries


def log_laplacian(d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log exp(-|d - mu| / sigma)``."""
    return (d - mu).abs() / -sigma


def log_cauchy(d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log (1 / (1 + ((d - mu) / sigma)^2))``."""
    return -torch.log1p(((d - mu) / sigma) ** 2)


def log_triangle(d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log max(1 - |d - mu| / sigma, 0)``, floored at ``log(1e-6)``."""
    return torch.log(torch.clamp(1 - (d - mu).abs() / sigma, min=TRIANGLE_FLOOR))


def log_mirrored_sigmoid(d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """``log (1 / (1 + exp((d - mu) / sigma)))``."""
    return -F.softplus((d - mu) / sigma)


#: Focus functions by name.
FOCUS_FUNCTIONS: Dict[str, LogFocus] = {
    "gaussian": log_gaussian,
    "laplacian": log_laplacian,
    "cauchy": log_cauchy,
    "triangle": log_triangle,
    "mirrored_sigmoid": log_mirrored_sigmoid,
}
