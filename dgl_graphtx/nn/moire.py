"""MoireGT focused attention: ``softmax(q.k / sqrt(dh) + log f_h(D) + w_h [i == j]) v``.

``D`` is the 3-D distance (``edata["dist"]``) or the hop count (``edata["spd"]``); pairs in
different fragments get ``D = 1e6``. Each head has its own learnable shift ``mu`` and width
``sigma`` (clamped to ``mu >= 0.5`` and ``sigma >= 0.1``) and a learnable self-pair weight ``w``.
Pairs touching a virtual node get no focus term (MoireGT itself uses no virtual node).

``mode="reference"`` follows the authors' ``MoireAttention`` (RadialFocus, ``src/layers.py``):
``s_ij = (q_i.k_j / sqrt(dh)) * log max(f, 1e-9) + 0.1 [i == j]`` with ``sigma >= 0.1`` and no
clamp of ``mu``. The floor is applied in log space, ``max(log f, log 1e-9)``, which is the same
number without forming ``f``.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
from torch import nn

from ..errors import ConfigError
from ..relation_graph import SPD_UNREACHABLE, SPD_VIRTUAL
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .focus import FOCUS_FUNCTIONS
from .graph_tensors import GraphLike
from .radial import RadialPairTerms

MOIRE_MODES = ("paper", "reference")
DISTANCES = ("dist", "spd")
MU_MIN = 0.5
SIGMA_MIN = 0.1
UNREACHABLE_DISTANCE = 1e6
REFERENCE_SELF_WEIGHT = 0.1
#: The authors' floor of the focus before its log (``f.clamp(min=1e-9)``), ``reference`` mode only.
REFERENCE_FOCUS_FLOOR = 1e-9


def initial_shifts(num_heads: int, max_shift: float) -> torch.Tensor:
    """Shifts spread evenly over ``[0.5, max_shift]`` so the heads cover different distance ranges.

    Example:
        >>> initial_shifts(3, 2.5).tolist()
        [0.5, 1.5, 2.5]
    """
    if num_heads == 1:
        return torch.tensor([MU_MIN])
    return torch.linspace(MU_MIN, max(max_shift, MU_MIN), num_heads)


class MoireTerm(StructureTerm):
    """MoireGT's focus term for :class:`RelationAttention`.

    Args:
        num_heads: number of heads.
        focus: one of :data:`~dgl_graphtx.nn.focus.FOCUS_FUNCTIONS` (default ``"gaussian"``).
        distance: ``"spd"`` (hops; the default, read from any relation graph) or ``"dist"`` (3-D, Angstrom;
            needs coordinates).
        mode: ``"paper"`` (additive log-focus, learnable self weight) or ``"reference"`` (the
            authors' code: ``(q.k / sqrt(dh)) * log max(f, 1e-9) + 0.1 [i == j]``, no clamp of
            ``mu``).
        max_shift: largest initial shift; heads start at shifts spread over ``[0.5, max_shift]``.
        init_width: initial width ``sigma`` of every head.
        rbf: if > 0, ``D`` also enters through ``rbf`` Gaussian basis functions: a learned bias per
            head on the logits and a learned value vector per head and pair
            (:class:`~dgl_graphtx.nn.radial.RadialPairTerms`); none on virtual-node pairs.
        rbf_cutoff: centre of the last basis function (Angstrom, or hops).
        head_dim: width of each head's values (needed with ``rbf``).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CCO")
        >>> term = MoireTerm(num_heads=2, distance="spd", max_shift=1.5)
        >>> term.log_focus(rel).shape  # log f per edge and head
        torch.Size([9, 2])
        >>> term = MoireTerm(num_heads=2, distance="spd", rbf=8, rbf_cutoff=4.0, head_dim=4)
        >>> term.prepare(rel).shape  # the distance basis per edge
        torch.Size([9, 8])
    """

    edge_fields = ("spd",)

    def __init__(
        self,
        num_heads: int,
        focus: str = "gaussian",
        distance: str = "spd",
        mode: str = "paper",
        max_shift: float = 4.0,
        init_width: float = 2.0,
        rbf: int = 0,
        rbf_cutoff: float = 8.0,
        head_dim: int = 0,
    ) -> None:
        super().__init__()
        if focus not in FOCUS_FUNCTIONS:
            raise ValueError(f"focus must be one of {sorted(FOCUS_FUNCTIONS)}, got {focus!r}")
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
        if mode not in MOIRE_MODES:
            raise ValueError(f"Moire mode must be one of {MOIRE_MODES}, got {mode!r}")
        self.focus, self.distance, self.mode = focus, distance, mode
        self.shift = nn.Parameter(initial_shifts(num_heads, max_shift))
        self.width = nn.Parameter(torch.full((num_heads,), float(init_width)))
        self.self_weight = nn.Parameter(torch.ones(num_heads)) if mode == "paper" else None
        if rbf and head_dim < 1:
            raise ValueError(f"rbf needs the head width for its values, got head_dim={head_dim}")
        self.radial = RadialPairTerms(num_heads, head_dim, rbf, rbf_cutoff) if rbf else None

    def extra_repr(self) -> str:
        return f"focus={self.focus!r}, distance={self.distance!r}, mode={self.mode!r}, num_heads={self.shift.numel()}"

    def distances(self, graph: GraphLike) -> torch.Tensor:
        """``D`` per edge: ``dist`` or ``spd``, with ``1e6`` across fragments; in float32 at least
        (float16 holds neither ``1e6`` nor the focus of a far pair)."""
        spd = graph.edata["spd"]
        if self.distance == "dist":
            if "dist" not in graph.edata:
                raise ConfigError(
                    "MoireGT with distance='dist' needs 3-D coordinates: featurize with "
                    "coordinates='auto' (or 'etkdg'), or use distance='spd'"
                )
            d = graph.edata["dist"]
        else:
            d = spd
        # float32 for the half types (a dtype rule of Python's: torch.promote_types would be an operation of every step)
        d = d.to(torch.float32 if self.shift.dtype in (torch.float16, torch.bfloat16) else self.shift.dtype)
        return torch.where(spd == SPD_UNREACHABLE, torch.full_like(d, UNREACHABLE_DISTANCE), d)

    def effective_focus(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The shift ``mu`` and width ``sigma`` per head ``[H]`` that the forward pass uses:
        ``sigma' = max(sigma, 0.1)``; ``mu' = max(mu, 0.5)`` in ``paper`` mode, ``mu`` unclamped in
        ``reference`` mode (as the authors' code).

        Example:
            >>> term = MoireTerm(num_heads=1, distance="spd", mode="reference")
            >>> with torch.no_grad():
            ...     _ = term.shift.fill_(0.2)
            >>> [round(float(t), 3) for t in term.effective_focus()]
            [0.2, 2.0]
        """
        mu = self.shift if self.mode == "reference" else torch.clamp(self.shift, min=MU_MIN)
        return mu, torch.clamp(self.width, min=SIGMA_MIN)

    def log_focus(self, graph: GraphLike) -> torch.Tensor:
        """``log f_h(D)`` per edge and head ``[E, H]`` with :meth:`effective_focus`'s ``mu`` and
        ``sigma``; 0 on virtual-node pairs; ``reference`` mode floors it at ``log 1e-9`` as the
        authors' code."""
        reference = self.mode == "reference"
        mu, sigma = self.effective_focus()
        d = self.distances(graph)[:, None]
        log_f = FOCUS_FUNCTIONS[self.focus](d, mu.to(d.dtype), sigma.to(d.dtype))
        if reference:
            log_f = torch.clamp(log_f, min=math.log(REFERENCE_FOCUS_FLOOR))
        return log_f.masked_fill(self._virtual_pairs(graph), 0.0).to(self.shift.dtype)

    @staticmethod
    def _virtual_pairs(graph: GraphLike) -> torch.Tensor:
        return (graph.edata["spd"] == SPD_VIRTUAL)[:, None]

    def prepare(self, graph: GraphLike) -> Optional[torch.Tensor]:
        """The distance basis ``[E, K]`` of :attr:`radial` (``None`` without ``rbf``)."""
        if self.radial is None:
            return None
        return self.radial.basis(self.distances(graph), self._virtual_pairs(graph)[:, 0]).to(self.shift.dtype)

    @property
    def adds_values(self) -> bool:
        return self.radial is not None

    def values(self, graph: GraphLike, attn: torch.Tensor, state: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        if self.radial is None or state is None:
            return None
        return self.radial.values(graph, attn, state)

    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float, state: Any) -> ScoreTerms:
        src, dst = graph.edges()
        is_self = (src == dst).to(self.shift.dtype)[:, None]
        log_f = self.log_focus(graph)
        if self.mode == "reference":
            terms = ScoreTerms(gain=log_f, bias=REFERENCE_SELF_WEIGHT * is_self)
        else:
            assert self.self_weight is not None  # the paper mode has one
            terms = ScoreTerms(bias=torch.addcmul(log_f, is_self, self.self_weight))  # log f + w [i == j]
        if self.radial is not None:
            assert terms.bias is not None  # both modes set one
            terms.bias = terms.bias + self.radial.bias(state)
        return terms


class MoireAttention(RelationAttention):
    """MoireGT focused-attention layer.

    Args:
        embed_dim, num_heads, attn_dropout: as in :class:`RelationAttention`.
        focus, distance, mode, max_shift, init_width, rbf, rbf_cutoff: as in :class:`MoireTerm`.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CCOC")
        >>> layer = MoireAttention(16, num_heads=4, focus="cauchy", distance="spd")
        >>> layer(rel, torch.randn(4, 16)).shape
        torch.Size([4, 16])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        focus: str = "gaussian",
        distance: str = "spd",
        mode: str = "paper",
        max_shift: float = 4.0,
        init_width: float = 2.0,
        attn_dropout: float = 0.0,
        rbf: int = 0,
        rbf_cutoff: float = 8.0,
    ) -> None:
        term = MoireTerm(num_heads, focus, distance, mode, max_shift, init_width, rbf, rbf_cutoff, embed_dim // num_heads)
        super().__init__(embed_dim, num_heads, term, attn_dropout)
