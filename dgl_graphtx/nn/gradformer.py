"""Gradformer's exponential decay mask ``M_h,ij = lambda ^ ReLU(spd_ij - sp_h)``.

Modes (docs/gradformer.md, "Modes"):

* ``"paper"`` (Eq. 4, also the authors' code): ``s_ij = (q_i.k_j / sqrt(dh)) * M_h,ij``. A mask
  of 0 pulls a logit to 0, not to -inf.
* ``"decay"``: attention proportional to ``M * exp(q.k / sqrt(dh))``, i.e.
  ``s_ij = q_i.k_j / sqrt(dh) + ReLU(spd_ij - sp_h) * log(lambda)``, so far pairs fade to 0.
* ``"reference"``: as ``"paper"`` but with ``LeakyReLU(spd - sp_h, slope)`` and unreachable pairs
  at distance 510, as the authors' ``process_hop``. The slope is a hyperparameter there: 0 in the
  official ``config.py`` (the default here) and their NCI1 script, 0.1 in their ZINC/CLUSTER
  scripts, 0.2 for ogbg-molhiv.

Unreachable pairs (``spd == -1``) have ``M = 0`` (``-inf`` log-mask in ``"decay"``); pairs touching
a virtual node have ``M = 1``. The start points ``sp_h`` are learnable per head and, in a model,
shared by all layers unless asked otherwise.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..relation_graph import SPD_UNREACHABLE, SPD_VIRTUAL
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .graph_tensors import GraphLike

GRADFORMER_MODES = ("paper", "decay", "reference")
REFERENCE_UNREACHABLE_DISTANCE = 510.0
#: LeakyReLU slope of ``reference`` mode in the authors' ``config.py``.
REFERENCE_SLOPE = 0.0


def check_slope(mode: str, slope: float) -> None:
    """Raise ``ValueError`` unless ``slope`` is usable with ``mode``: a LeakyReLU slope in
    ``[0, 1)``, and non-zero only in ``reference`` mode (``paper`` and ``decay`` use ReLU).

    Example:
        >>> check_slope("reference", 0.2)
        >>> check_slope("decay", 0.2)
        Traceback (most recent call last):
        ...
        ValueError: the LeakyReLU slope 0.2 applies to Gradformer mode 'reference' only; modes 'paper' and 'decay' use ReLU (slope 0)
    """
    if not 0.0 <= slope < 1.0:
        raise ValueError(f"the LeakyReLU slope must lie in [0, 1), got {slope}")
    if slope != 0.0 and mode != "reference":
        raise ValueError(
            f"the LeakyReLU slope {slope} applies to Gradformer mode 'reference' only; "
            "modes 'paper' and 'decay' use ReLU (slope 0)"
        )


class DecayParameters(nn.Module):
    """Per-head start points ``sp_h`` and the decay ratio ``lambda`` (fixed or learnable).

    Args:
        num_heads: number of heads.
        init_start: initial start point of every head.
        decay: ``lambda`` in ``(0, 1)``.
        learn_decay: learn ``lambda`` through a sigmoid, starting from ``decay``.

    Example:
        >>> p = DecayParameters(4, decay=0.6)
        >>> p.start.shape, round(float(p.decay()), 6)
        (torch.Size([4]), 0.6)
    """

    def __init__(self, num_heads: int, init_start: float = 2.0, decay: float = 0.5, learn_decay: bool = False) -> None:
        super().__init__()
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay ratio lambda must lie in (0, 1), got {decay}")
        self.start = nn.Parameter(torch.full((num_heads,), float(init_start)))
        logit = torch.tensor(math.log(decay / (1.0 - decay)))
        if learn_decay:
            self.decay_logit = nn.Parameter(logit)
        else:
            self.register_buffer("decay_logit", logit)
        self.learn_decay = learn_decay

    def decay(self) -> torch.Tensor:
        """``lambda`` as a 0-d tensor."""
        return torch.sigmoid(self.decay_logit)


class DecayTerm(StructureTerm):
    """Gradformer's decay-mask term for :class:`RelationAttention`.

    Args:
        params: the (possibly shared) start points and decay ratio.
        mode: ``"paper"``, ``"decay"`` or ``"reference"`` (see the module docstring).
        slope: negative slope of the LeakyReLU in ``reference`` mode (default 0, the authors'
            ``config.py``); must be 0 in the other modes.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CCCC")
        >>> term = DecayTerm(DecayParameters(1, init_start=1.0, decay=0.5))
        >>> term.log_mask(rel).exp()[:4, 0].tolist()  # query 0: keys at 0, 1, 2, 3 hops
        [1.0, 1.0, 0.5, 0.25]
    """

    edge_fields = ("spd",)

    def __init__(self, params: DecayParameters, mode: str = "paper", slope: float = REFERENCE_SLOPE) -> None:
        super().__init__()
        if mode not in GRADFORMER_MODES:
            raise ValueError(f"Gradformer mode must be one of {GRADFORMER_MODES}, got {mode!r}")
        check_slope(mode, slope)
        self.params = params
        self.mode = mode
        self.slope = slope

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, slope={self.slope:g}, learn_decay={self.params.learn_decay}, num_heads={self.params.start.numel()}"

    reads_qk = False  # the mask is a function of the hop counts and the decay parameters

    def log_mask(self, graph: GraphLike) -> torch.Tensor:
        """``log M`` per edge and head ``[E, H]`` (``-inf`` where ``M = 0``)."""
        spd = graph.edata["spd"][:, None]
        start = self.params.start
        hops = spd.to(start.dtype)
        log_decay = torch.log(self.params.decay()).to(start.dtype)
        unreachable = spd == SPD_UNREACHABLE
        if self.mode == "reference":
            hops = torch.where(unreachable, REFERENCE_UNREACHABLE_DISTANCE, hops)
            log_m = F.leaky_relu(hops - start, negative_slope=self.slope) * log_decay
        else:
            log_m = (F.relu(hops - start) * log_decay).masked_fill(unreachable, -math.inf)
        return log_m.masked_fill(spd == SPD_VIRTUAL, 0.0)

    def preparation_key(self) -> Tuple[str, int, str, float]:
        """Layers sharing their :class:`DecayParameters` (a model's default) share the mask."""
        return ("gradformer-decay", id(self.params), self.mode, self.slope)

    def prepare(self, graph: GraphLike) -> ScoreTerms:
        """The mask as :class:`ScoreTerms`: a gain ``M`` (``paper``, ``reference``) or a bias ``log M``
        (``decay``) per edge and head ``[E, H]``, computed once per forward for the layers sharing
        :meth:`preparation_key`."""
        log_m = self.log_mask(graph)
        if self.mode == "decay":
            return ScoreTerms(bias=log_m)
        return ScoreTerms(gain=torch.exp(log_m))

    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float, state: ScoreTerms) -> ScoreTerms:
        return state


class GradformerAttention(RelationAttention):
    """Attention with Gradformer's exponential decay mask.

    Args:
        embed_dim, num_heads, attn_dropout: as in :class:`RelationAttention`.
        params: shared :class:`DecayParameters`; a private set is created if ``None``.
        init_start, decay, learn_decay: used only when ``params`` is ``None``.
        mode: ``"paper"``, ``"decay"`` or ``"reference"``.
        slope: LeakyReLU slope of ``reference`` mode (see :class:`DecayTerm`).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CCCCCC")
        >>> layer = GradformerAttention(16, num_heads=2, mode="decay")
        >>> layer(rel, torch.randn(6, 16)).shape
        torch.Size([6, 16])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        params: Optional[DecayParameters] = None,
        init_start: float = 2.0,
        decay: float = 0.5,
        learn_decay: bool = False,
        mode: str = "paper",
        attn_dropout: float = 0.0,
        slope: float = REFERENCE_SLOPE,
    ) -> None:
        if params is None:
            params = DecayParameters(num_heads, init_start, decay, learn_decay)
        super().__init__(embed_dim, num_heads, DecayTerm(params, mode, slope), attn_dropout)
