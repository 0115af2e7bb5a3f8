"""GRPE: node-aware attention with spatial and edge encodings, and graph-encoded values.

For a pair (query ``i``, key ``j``) with spatial class ``psi`` and edge class ``phi``
(:mod:`dgl_graphtx.nn.pair_classes`)::

    s_ij = (q_i.k_j + q_i.PQ[psi] + k_j.PK[psi] + q_i.EQ[phi] + k_j.EK[phi]) / sqrt(dh)
    z_i  = sum_j a_ij (v_j + PV[psi] + EV[phi])

Efficient form (GRPE paper, section 4.4): the products of every node with every table row are
computed once per node (``[N, C, H]``) and gathered per edge by class, and the value terms are
per-(node, class) sums of attention mass times the table, so no ``[E, H, dh]`` tensor is ever
built; the extra memory grows with ``E x H``.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch
from torch import nn

from ..relation_graph.bond_classes import BondVocabulary
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .graph_tensors import GraphLike
from .pair_classes import SpatialClasses, authors_diagonal

GRPE_MODES = ("paper", "reference")


class PairClasses(NamedTuple):
    """:meth:`GRPETerm.prepare`'s state: each edge's classes, and where the score terms gather.

    Attributes:
        spatial, edge: the spatial and the edge class per edge ``[E]`` (rows of the spatial and
            of the edge tables).
        query_rows, key_rows: ``[2 E]`` rows of the per-(node, class) products ``[N * C]`` (the
            spatial classes then the edge classes, ``C`` of both) that each edge reads: at its
            query node, and at the node whose key the key terms read.
    """

    spatial: torch.Tensor
    edge: torch.Tensor
    query_rows: torch.Tensor
    key_rows: torch.Tensor


class GRPEEncodings(nn.Module):
    """The six GRPE tables ``P^Q, P^K, P^V`` (spatial) and ``E^Q, E^K, E^V`` (edge).

    One instance is shared by all layers of a model by default (GRPE paper, Table 8); give each
    :class:`GRPETerm` its own instance for per-layer tables.

    Args:
        embed_dim: model width ``d`` (each table row has ``d`` entries, split over heads).
        num_heads: number of heads.
        max_distance: ``L``, the largest hop count with its own spatial class.
        vocab: bond vocabulary of the relation graphs' ``bond`` field.

    Example:
        >>> enc = GRPEEncodings(16, 4, max_distance=5)
        >>> enc.spatial_query.shape, enc.edge_value.shape
        (torch.Size([9, 4, 4]), torch.Size([63, 4, 4]))
    """

    def __init__(
        self, embed_dim: int, num_heads: int, max_distance: int = 5, vocab: BondVocabulary = BondVocabulary()
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.max_distance = max_distance
        self.vocab = vocab
        num_spatial = SpatialClasses(max_distance).num_classes

        def table(rows: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(rows, num_heads, self.head_dim) * 0.02)

        self.spatial_query, self.spatial_key, self.spatial_value = (table(num_spatial) for _ in range(3))
        self.edge_query, self.edge_key, self.edge_value = (table(vocab.num_classes) for _ in range(3))


class GRPETerm(StructureTerm):
    """GRPE's structural term for :class:`RelationAttention`.

    Args:
        encodings: the (possibly shared) tables.
        mode: ``"paper"`` (docs/grpe.md, "Equations and code") or ``"reference"`` (the authors' code: key terms use
            the query node's key ``k_i``, distance ``L`` shares the FAR class, every self pair,
            the virtual node's included, gets spatial class 0 and the NO_EDGE class; see
            :func:`~dgl_graphtx.nn.pair_classes.authors_diagonal`).

    Example:
        >>> shared = GRPEEncodings(32, 4)
        >>> layers = [RelationAttention(32, 4, GRPETerm(shared)) for _ in range(2)]  # tables shared
        >>> layers[0].structure.encodings is layers[1].structure.encodings
        True
    """

    def __init__(self, encodings: GRPEEncodings, mode: str = "paper") -> None:
        super().__init__()
        if mode not in GRPE_MODES:
            raise ValueError(f"GRPE mode must be one of {GRPE_MODES}, got {mode!r}")
        self.encodings = encodings
        self.mode = mode
        self.spatial = SpatialClasses(encodings.max_distance, far_includes_max=mode == "reference")

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, max_distance={self.encodings.max_distance}, bond_classes={self.encodings.vocab.num_classes}"

    def preparation_key(self) -> Tuple[str, int, str, int]:
        """The classes depend on the graph, the mode and the tables' sizes: layers sharing
        their tables (a model's default) prepare them once."""
        return ("grpe-classes", self.encodings.vocab.num_classes, self.mode, self.encodings.max_distance)

    @property
    def num_classes(self) -> int:
        """Rows of the stacked spatial and edge tables."""
        return self.spatial.num_classes + self.encodings.vocab.num_classes

    def prepare(self, graph: GraphLike) -> PairClasses:
        """Spatial and edge class per edge, and the rows of the per-(node, class) products that
        the score terms gather (fixed shapes: no search for the classes present)."""
        psi, phi = self.spatial(graph.edata["spd"]), graph.edata["bond"]
        src, dst = graph.edges()
        if self.mode == "reference":
            psi, phi = authors_diagonal(psi, phi, src == dst, self.encodings.vocab)
        key_node = dst if self.mode == "reference" else src
        c, edge_class = self.num_classes, phi + self.spatial.num_classes

        def rows(node: torch.Tensor) -> torch.Tensor:
            return torch.cat([node * c + psi, node * c + edge_class])

        return PairClasses(psi, phi, rows(dst), rows(key_node))

    def _tables(self, part: str) -> torch.Tensor:
        """The spatial table stacked on the edge table of ``part`` (``query``, ``key``, ``value``): ``[C, H, dh]``."""
        enc = self.encodings
        return torch.cat([getattr(enc, f"spatial_{part}"), getattr(enc, f"edge_{part}")])

    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float,
                    state: PairClasses) -> ScoreTerms:
        # q_i.PQ[psi] + q_i.EQ[phi]: each node's products with every table row, gathered per edge
        n, e, c = q.shape[0], state.spatial.shape[0], self.num_classes
        products = torch.cat([torch.einsum("nhd,chd->nch", q, self._tables("query")),
                              torch.einsum("nhd,chd->nch", k, self._tables("key"))]).view(2 * n * c, -1)
        rows = torch.cat([state.query_rows, state.key_rows + n * c])
        return ScoreTerms(bias=products.index_select(0, rows).view(4, e, -1).sum(0) * scale)

    def values(self, graph: GraphLike, attn: torch.Tensor, state: PairClasses) -> torch.Tensor:
        # sum_j a_ij (PV[psi_ij] + EV[phi_ij]) = sum_c mass[i, c] (PV; EV)[c]
        n, c = graph.num_nodes(), self.num_classes
        mass = attn.new_zeros(n * c, attn.shape[1]).index_add_(0, state.query_rows, attn.repeat(2, 1))
        return torch.einsum("nch,chd->nhd", mass.view(n, c, -1), self._tables("value"))


class GRPEAttention(RelationAttention):
    """GRPE attention layer (node-aware attention + graph-encoded value).

    Args:
        embed_dim, num_heads, attn_dropout: as in :class:`RelationAttention`.
        encodings: tables to use (share one across layers); a private set is created if ``None``.
        max_distance, vocab: used only when ``encodings`` is ``None``.
        mode: ``"paper"`` or ``"reference"`` (see :class:`GRPETerm`).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.relation_graph import RelationConfig
        >>> _, rel = smiles_to_graphs("c1ccccc1O", relation=RelationConfig(virtual_node=True))
        >>> layer = GRPEAttention(32, num_heads=4)
        >>> layer(rel, torch.randn(rel.num_nodes(), 32)).shape
        torch.Size([8, 32])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        encodings: Optional[GRPEEncodings] = None,
        max_distance: int = 5,
        vocab: BondVocabulary = BondVocabulary(),
        mode: str = "paper",
        attn_dropout: float = 0.0,
    ) -> None:
        if encodings is None:
            encodings = GRPEEncodings(embed_dim, num_heads, max_distance, vocab)
        super().__init__(embed_dim, num_heads, GRPETerm(encodings, mode), attn_dropout)
