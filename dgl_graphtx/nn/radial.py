"""Learned functions of the pair distance for attention: Gaussian radial basis functions of ``D``
(SchNet's expansion, Uni-Mol's Gaussian pair features) mapped to a logit bias and a value vector
per head.

``phi_k(d) = exp(-((d - c_k) / delta)^2)`` with ``K`` centres ``c_k`` spread evenly over
``[0, cutoff]`` and ``delta`` their spacing. For a pair ``(i, j)`` and head ``h``:

- bias: ``b_h(D_ij) = sum_k W_hk phi_k(D_ij)``, added to the logit ``s_ij``;
- values: ``z_i += sum_j a_ij V_h phi(D_ij)``, a vector of the head's width per pair, so that what
  a query gathers depends on how far each key is, not only on how much it attends to it.

Pairs whose basis is masked (virtual-node pairs) get neither; the basis of a distance far beyond
the cutoff (atoms in different fragments are ``1e6`` apart) is 0, so such pairs get neither too.
"""
from __future__ import annotations

import torch
from torch import nn

from . import graph_ops as ops
from .graph_tensors import GraphLike
from . import lean


class GaussianRBF(nn.Module):
    """Expand distances ``[E]`` into ``[E, K]`` Gaussian features with fixed centres.

    Args:
        num: number of basis functions ``K`` (at least 2).
        cutoff: centre of the last function (the first is at 0); beyond it the features fade.

    Example:
        >>> rbf = GaussianRBF(num=3, cutoff=2.0)
        >>> rbf.centers.tolist(), [round(v, 4) for v in rbf(torch.tensor([1.0]))[0].tolist()]
        ([0.0, 1.0, 2.0], [0.3679, 1.0, 0.3679])
    """

    centers: torch.Tensor  # a buffer, registered in __init__

    def __init__(self, num: int, cutoff: float) -> None:
        super().__init__()
        if num < 2 or cutoff <= 0:
            raise ValueError(f"GaussianRBF needs num >= 2 and cutoff > 0, got {num} and {cutoff}")
        self.register_buffer("centers", torch.linspace(0.0, float(cutoff), num), persistent=False)
        self.spacing = float(cutoff) / (num - 1)

    def extra_repr(self) -> str:
        return f"num={self.centers.numel()}, cutoff={float(self.centers[-1]):g}"

    def forward(self, distance: torch.Tensor) -> torch.Tensor:
        scaled = (distance[:, None] - self.centers.to(distance.dtype)) / self.spacing
        return torch.exp(-scaled.square())


class RadialPairTerms(nn.Module):
    """The distance bias and distance values of one attention layer (see the module docstring).

    Args:
        num_heads: heads ``H``.
        head_dim: width of each head's value vectors.
        num: basis functions ``K``.
        cutoff: centre of the last basis function.

    Example:
        >>> terms = RadialPairTerms(num_heads=2, head_dim=4, num=8, cutoff=5.0)
        >>> basis = terms.basis(torch.tensor([1.0, 2.5, 1e6]), torch.tensor([False, False, False]))
        >>> terms.bias(basis).shape, float(terms.bias(basis)[2].abs().max())  # far pairs: no bias
        (torch.Size([3, 2]), 0.0)
    """

    def __init__(self, num_heads: int, head_dim: int, num: int, cutoff: float) -> None:
        super().__init__()
        self.rbf = GaussianRBF(num, cutoff)
        self.to_bias = lean.Linear(num, num_heads, bias=False)  # a constant per head would not change the softmax
        self.value_table = nn.Parameter(torch.randn(num, num_heads, head_dim) * num ** -0.5)

    def basis(self, distance: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """The basis ``[E, K]`` of each pair's distance ``[E]``, 0 where ``masked`` ``[E]``."""
        return self.rbf(distance).masked_fill(masked[:, None], 0.0)

    def bias(self, basis: torch.Tensor) -> torch.Tensor:
        """The logit bias per pair and head ``[E, H]``."""
        return self.to_bias(basis)

    def values(self, graph: GraphLike, attn: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
        """``sum_j a_ij V phi(D_ij)`` per node and head ``[N, H, dh]`` from the attention weights
        ``[E, H]``: the attention mass on each basis function, then the table."""
        mass = ops.sum_incoming(graph, attn[:, :, None] * basis[:, None, :].to(attn.dtype))  # [N, H, K]
        return torch.einsum("nhk,khd->nhd", mass, self.value_table)
