"""Discrete pair classes of relation-graph edges, shared by GRPE and the Graphormer baseline."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Optional, Tuple, Union

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


#: Attribute of a DGLGraph holding its :class:`PairCodes` once computed (:meth:`PairCodes.cached`).
PAIR_CODES_CACHE = "_dgl_graphtx_pair_codes"


#: Above this many possible codes (and four per edge), the codes present are found by sorting the
#: edges' codes instead of counting every possible one: a large graph's hop distances (hundreds or
#: thousands) would make the count's table grow with distance x bond classes.
SPARSE_CODES = 1 << 16


@dataclass(frozen=True)
class PairCodes:
    """The distinct (hop distance, bond class, self pair) combinations among a relation graph's
    edges, and each edge's row among them: what the pair classes of an edge depend on, so a
    layer computes per-combination terms (a few dozen rows) instead of one per edge or per class.

    Finding the combinations present is a search whose size depends on the data (it waits for the
    device), so the tensor path computes them on the host with the batch
    (:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`), and a DGLGraph computes them once.

    Example:
        >>> import dgl
        >>> g = dgl.graph(([0, 1, 0, 1], [0, 1, 1, 0]))
        >>> g.edata["spd"], g.edata["bond"] = torch.tensor([0, 0, 1, 1]), torch.tensor([5, 5, 2, 2])
        >>> codes = PairCodes.of(g)
        >>> codes.edge_code.tolist(), codes.spd.tolist(), codes.bond.tolist(), codes.is_self.tolist()
        ([0, 0, 1, 1], [0, 1], [5, 2], [True, False])
    """

    edge_code: torch.Tensor  # [E]: the row of the edge's combination
    spd: torch.Tensor  # [P]: hop distance of each combination
    bond: torch.Tensor  # [P]: bond class
    is_self: torch.Tensor  # [P] bool: a self pair (source == destination)

    @classmethod
    def of(cls, graph: Any, spd_cap: Optional[int] = None, bonds: Optional[int] = None) -> "PairCodes":
        """The combinations of ``graph``'s edges (its ``edata["spd"]``, ``edata["bond"]`` and
        ``edges()``). With ``spd_cap`` (distances above it counted as it: a reader that tells no
        longer distances apart) and ``bonds`` (more than any bond class), the codes span a size
        known before the data, as a traced program (``torch.export``) needs."""
        spd, bond = graph.edata["spd"].long(), graph.edata["bond"].long()
        src, dst = graph.edges()
        if spd_cap is not None:
            spd = spd.clamp(max=spd_cap)
        bonds = bonds if bonds is not None else (int(bond.max()) + 1 if bond.numel() else 1)
        code = ((spd - SPD_VIRTUAL) * bonds + bond) * 2 + (src == dst).long()
        span = None if spd_cap is None else (spd_cap - SPD_VIRTUAL + 1) * bonds * 2
        if span is None and code.numel() and int(code.max()) > max(SPARSE_CODES, 4 * code.numel()):
            present, edge_code = torch.unique(code, return_inverse=True)  # a large graph's distances: sort, not count
        else:
            seen = (torch.bincount(code) if span is None else torch.bincount(code, minlength=span)) > 0  # linear, not a sort
            present = seen.nonzero().squeeze(1)
            edge_code = (torch.cumsum(seen, 0) - 1)[code]
        pair = torch.div(present, 2, rounding_mode="floor")
        return cls(edge_code, torch.div(pair, bonds, rounding_mode="floor") + SPD_VIRTUAL, pair % bonds, present % 2 == 1)

    @classmethod
    def cached(cls, graph: Any) -> "PairCodes":
        """:meth:`of`, carried by a :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` made with
        them, else computed once per graph object and kept on it (every layer reads the same
        graph; keyed by its size, so a graph edited in place gets new codes)."""
        known = getattr(graph, "pair_codes", None)
        if known is not None:
            return known
        key = (graph.num_nodes(), graph.num_edges(), str(graph.device))
        cache = graph.__dict__.setdefault(PAIR_CODES_CACHE, {})
        if key not in cache:
            cache[key] = cls.of(graph)
        return cache[key]

    def to(self, device: Union[str, torch.device], non_blocking: bool = False) -> "PairCodes":
        """A copy with every tensor on ``device``."""
        return self.map_tensors(lambda x: x.to(device, non_blocking=non_blocking))

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "PairCodes":
        """A copy with ``fn`` applied to every tensor (in field order)."""
        return replace(self, **{f.name: fn(getattr(self, f.name)) for f in fields(self)})

