"""Discrete pair classes of relation-graph edges, shared by GRPE and the Graphormer baseline."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..bond_classes import BondVocabulary
from ..relation_graph import SPD_UNREACHABLE, SPD_VIRTUAL


@dataclass(frozen=True)
class SpatialClasses:
    """Spatial class ``psi`` of a pair from its shortest-path distance.

    Classes ``0..L`` are hop counts, then ``FAR`` (``spd > L``), ``UNREACHABLE`` (``spd == -1``)
    and ``VIRTUAL`` (``spd == -2``). With ``far_includes_max`` (the GRPE authors' code) distance
    ``L`` already counts as ``FAR``.

    Example:
        >>> sc = SpatialClasses(max_distance=2)
        >>> sc(torch.tensor([0, 1, 2, 3, -1, -2])).tolist(), sc.num_classes
        ([0, 1, 2, 3, 4, 5], 6)
    """

    max_distance: int = 5
    far_includes_max: bool = False

    @property
    def far(self) -> int:
        return self.max_distance + 1

    @property
    def unreachable(self) -> int:
        return self.max_distance + 2

    @property
    def virtual(self) -> int:
        return self.max_distance + 3

    @property
    def num_classes(self) -> int:
        return self.max_distance + 4

    def __call__(self, spd: torch.Tensor) -> torch.Tensor:
        far_from = self.max_distance if self.far_includes_max else self.max_distance + 1
        classes = torch.where(spd >= far_from, torch.full_like(spd, self.far), spd)
        classes = torch.where(spd == SPD_UNREACHABLE, torch.full_like(spd, self.unreachable), classes)
        return torch.where(spd == SPD_VIRTUAL, torch.full_like(spd, self.virtual), classes)


def edge_classes(bond: torch.Tensor, vocab: BondVocabulary, self_as_no_edge: bool = False) -> torch.Tensor:
    """Edge class ``phi`` of a pair: its ``bond`` class, with ``SELF`` folded into ``NO_EDGE`` when
    ``self_as_no_edge`` (the GRPE authors' code leaves the diagonal without a class of its own).

    Example:
        >>> v = BondVocabulary((2,))
        >>> edge_classes(torch.tensor([0, 2, 3, 4]), v, self_as_no_edge=True).tolist()
        [0, 2, 2, 4]
    """
    if not self_as_no_edge:
        return bond
    return torch.where(bond == vocab.self_pair, torch.full_like(bond, vocab.no_edge), bond)
