"""Discrete pair classes of relation-graph edges, shared by GRPE and the Graphormer baseline."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import torch

from ..relation_graph import SPD_UNREACHABLE, SPD_VIRTUAL
from ..relation_graph.bond_classes import BondVocabulary


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


def authors_diagonal(
    spatial: torch.Tensor, edge: torch.Tensor, is_self: torch.Tensor, vocab: BondVocabulary
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The GRPE authors' classes on the diagonal: every self pair, the virtual node's (their task
    token's) included, gets spatial class 0 and the ``NO_EDGE`` edge class.

    Their preprocessing (``preprocess_item`` of the official GRPE code) sets the whole diagonal to
    the self-edge class and then overwrites every entry whose hop distance is not 1 with
    ``NO_EDGE``; the task token's distance to itself is 0. Pairs between the virtual node and
    atoms keep their ``VIRTUAL`` classes.

    Args:
        spatial, edge: spatial and edge classes per edge ``[E]`` (:class:`SpatialClasses`, the
            relation graph's ``bond`` field).
        is_self: ``[E]`` bool, the edge's source equals its destination.
        vocab: the bond vocabulary of ``edge``.

    Example:
        >>> sc, v = SpatialClasses(max_distance=2), BondVocabulary((2,))
        >>> spd, bond = torch.tensor([0, 1, -2, -2]), torch.tensor([3, 0, 4, 4])  # self, bond, VN-atom, VN-self
        >>> psi, phi = authors_diagonal(sc(spd), bond, torch.tensor([True, False, False, True]), v)
        >>> psi.tolist(), phi.tolist()
        ([0, 1, 5, 0], [2, 0, 4, 2])
    """
    spatial = torch.where(is_self, torch.zeros_like(spatial), spatial)
    edge = torch.where(is_self, torch.full_like(edge, vocab.no_edge), edge)
    return spatial, edge
