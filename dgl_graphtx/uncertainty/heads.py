"""Output heads that predict a distribution, and their losses.

A model built with ``ModelConfig(uncertainty_head=...)`` has ``k * T`` outputs (``k``, the
method's ``head_outputs`` in :data:`~dgl_graphtx.uncertainty.methods.UNCERTAINTY_METHODS`), laid
out ``[B, k, T]`` with the mean first, so its plain ``forward`` (the first ``T``) is the point
prediction. Everything here works in the standardised target space.

- ``mve`` (mean-variance estimation, Nix & Weigend 1994): mean and variance of a Gaussian,
  trained by its negative log-likelihood.
- ``evidential`` (deep evidential regression, Amini et al. 2020): the parameters
  ``(gamma, nu, alpha, beta)`` of a Normal-Inverse-Gamma prior, trained by the NLL of its
  Student-t marginal plus ``lambda * |y - gamma| * (2 nu + alpha)``.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

#: Floor added to every positive parameter.
EPSILON = 1e-6


class Moments(NamedTuple):
    """Predictive mean and variance ``[B, T]`` (standardised space)."""

    mean: torch.Tensor
    variance: torch.Tensor


class NormalInverseGamma(NamedTuple):
    """Evidential parameters ``[B, T]``: ``gamma`` (mean), ``nu``, ``alpha > 1`` and ``beta``."""

    gamma: torch.Tensor
    nu: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor


def head_parts(raw: torch.Tensor, k: int) -> torch.Tensor:
    """``raw [B, k*T]`` as ``[k, B, T]``.

    Example:
        >>> head_parts(torch.arange(4.0).reshape(1, 4), 2).tolist()  # T = 2: means [0, 1], then [2, 3]
        [[[0.0, 1.0]], [[2.0, 3.0]]]
    """
    return raw.reshape(raw.shape[0], k, raw.shape[1] // k).transpose(0, 1)


def gaussian_parameters(raw: torch.Tensor) -> Moments:
    """Mean and (softplus) variance from an ``mve`` head's raw output.

    Example:
        >>> round(float(gaussian_parameters(torch.tensor([[1.0, 0.0]])).variance), 4)  # softplus(0) = log 2
        0.6931
    """
    mean, variance = head_parts(raw, 2)
    return Moments(mean, F.softplus(variance) + EPSILON)


def evidential_parameters(raw: torch.Tensor) -> NormalInverseGamma:
    """``(gamma, nu, alpha, beta)`` from an ``evidential`` head's raw output (softplus keeps
    ``nu, beta > 0`` and ``alpha > 1``).

    Example:
        >>> round(float(evidential_parameters(torch.zeros(1, 4)).alpha), 4)
        1.6931
    """
    gamma, nu, alpha, beta = head_parts(raw, 4)
    return NormalInverseGamma(gamma, F.softplus(nu) + EPSILON, F.softplus(alpha) + 1.0 + EPSILON, F.softplus(beta) + EPSILON)


def evidential_moments(raw: torch.Tensor) -> Moments:
    """Mean and total predictive variance of an ``evidential`` head's raw output: the aleatoric
    ``beta / (alpha - 1)`` plus the epistemic ``beta / (nu (alpha - 1))``.

    Example:
        >>> round(float(evidential_moments(torch.tensor([[2.0, 0.5413, 0.5413, 0.5413]])).variance), 3)
        2.0
    """
    p = evidential_parameters(raw)
    return Moments(p.gamma, p.beta / (p.alpha - 1.0) * (1.0 + 1.0 / p.nu))


def gaussian_nll(mean: torch.Tensor, variance: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Element-wise Gaussian negative log-likelihood ``0.5 (log(2 pi var) + (y - mu)^2 / var)``.

    Example:
        >>> round(float(gaussian_nll(torch.tensor(0.0), torch.tensor(1.0), torch.tensor(1.0))), 4)
        1.4189
    """
    return 0.5 * (torch.log(2 * math.pi * variance) + (target - mean) ** 2 / variance)


def evidential_nll(p: NormalInverseGamma, target: torch.Tensor) -> torch.Tensor:
    """Element-wise NLL of the Student-t marginal of a Normal-Inverse-Gamma (Amini et al. eq. 8):
    ``0.5 log(pi / nu) - alpha log(O) + (alpha + 0.5) log(nu (y - gamma)^2 + O)
    + lgamma(alpha) - lgamma(alpha + 0.5)`` with ``O = 2 beta (1 + nu)``.

    Example:
        >>> one = torch.tensor(1.0)
        >>> round(float(evidential_nll(NormalInverseGamma(torch.tensor(0.0), one, 2 * one, one), torch.tensor(0.0))), 4)
        0.9808
    """
    omega = 2.0 * p.beta * (1.0 + p.nu)
    return (0.5 * torch.log(math.pi / p.nu) - p.alpha * torch.log(omega)
            + (p.alpha + 0.5) * torch.log(p.nu * (target - p.gamma) ** 2 + omega)
            + torch.lgamma(p.alpha) - torch.lgamma(p.alpha + 0.5))


def evidential_regulariser(p: NormalInverseGamma, target: torch.Tensor) -> torch.Tensor:
    """Element-wise evidence penalty on errors, ``|y - gamma| (2 nu + alpha)``.

    Example:
        >>> one = torch.tensor(1.0)
        >>> float(evidential_regulariser(NormalInverseGamma(torch.tensor(0.5), one, 2 * one, one), torch.tensor(2.0)))
        6.0
    """
    return (target - p.gamma).abs() * (2.0 * p.nu + p.alpha)


def gaussian_head_loss(raw: torch.Tensor, target: torch.Tensor, settings: Any = None) -> torch.Tensor:
    """Element-wise loss of an ``mve`` head: the Gaussian NLL of its mean and variance.

    Example:
        >>> round(float(gaussian_head_loss(torch.tensor([[0.0, 0.5413]]), torch.tensor([[1.0]]))), 3)  # variance 1
        1.419
    """
    moments = gaussian_parameters(raw)
    return gaussian_nll(moments.mean, moments.variance, target)


def evidential_head_loss(raw: torch.Tensor, target: torch.Tensor, settings: Any) -> torch.Tensor:
    """Element-wise loss of an ``evidential`` head: the Student-t NLL plus ``settings.evidential_reg``
    times :func:`evidential_regulariser`.

    Example:
        >>> from types import SimpleNamespace
        >>> raw = torch.tensor([[0.0, 0.5413, 0.5413, 0.5413]])  # nu = 1, alpha = 2, beta = 1
        >>> round(float(evidential_head_loss(raw, torch.tensor([[0.0]]), SimpleNamespace(evidential_reg=0.0))), 4)
        0.9808
    """
    p = evidential_parameters(raw)
    return evidential_nll(p, target) + settings.evidential_reg * evidential_regulariser(p, target)
