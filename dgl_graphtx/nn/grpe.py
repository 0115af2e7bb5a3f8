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

from typing import Dict, NamedTuple, Optional, Tuple

import torch
from torch import nn

from ..relation_graph.bond_classes import BondVocabulary
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .dense_blocks import BlockLayout
from .graph_tensors import GraphLike
from .pair_classes import PairCodes, SpatialClasses, authors_diagonal
from .tracing import exporting

GRPE_MODES = ("paper", "reference")


class JointClasses(NamedTuple):
    """:meth:`GRPETerm.prepare`'s state: the joint (spatial, edge) classes present in a graph.

    Attributes:
        edge_class: per edge ``[E]``, its row among the present classes.
        spatial_rows, edge_rows: per present class ``[C]``, its spatial and its edge class (the
            rows of the spatial and edge tables; two rows may name the same pair of classes).
    """

    edge_class: torch.Tensor
    spatial_rows: torch.Tensor
    edge_rows: torch.Tensor


class GRPEState(NamedTuple):
    """:meth:`GRPETerm.prepare`'s state, made once per forward pass for the layers sharing tables.

    Attributes:
        classes: the joint classes present (:class:`JointClasses`).
        query_rows, key_rows: per edge ``[E]``, its row ``node * C + class`` of the per-(node,
            class) products ``[N * C, H]``: at its query node, and at the node whose key the key
            terms read.
        query_table, key_table, value_table: ``PQ[psi] + EQ[phi]`` (and the key's and value's)
            per present class ``[C, H, dh]``.
    """

    classes: JointClasses
    query_rows: torch.Tensor
    key_rows: torch.Tensor
    query_table: torch.Tensor
    key_table: torch.Tensor
    value_table: torch.Tensor
    in_blocks: Dict[int, torch.Tensor]  # the class of each slot of a dense layout ``[B, n, n]``, by ``id(layout)``

    def block_classes(self, blocks: BlockLayout) -> torch.Tensor:
        """The class of each slot of ``blocks`` ``[B, n, n]`` (0 off the edges; made once per layout)."""
        if id(blocks) not in self.in_blocks:
            flat = self.classes.edge_class.new_zeros(blocks.num_graphs * blocks.size**2)
            flat = flat.index_copy_(0, blocks.pair_slots(), self.classes.edge_class)
            self.in_blocks[id(blocks)] = flat.view(blocks.num_graphs, blocks.size, blocks.size)
        return self.in_blocks[id(blocks)]


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

    edge_fields = ("spd", "bond")

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
        return ("grpe-classes", id(self.encodings), self.mode, self.encodings.max_distance)

    def prepare(self, graph: GraphLike) -> GRPEState:
        """Joint (spatial, edge) classes: per edge, its row among the (distance, bond, self)
        combinations present in ``graph`` (:class:`~dgl_graphtx.nn.pair_classes.PairCodes`, found
        on the host); per combination, its spatial and its edge class. Tables are built for the
        present combinations only (a few dozen, not all ``(L + 4) x num_bond_classes``), once per
        forward pass for the layers sharing them."""
        enc = self.encodings
        if exporting():  # sizes known before the data; distances beyond FAR are FAR anyway
            codes = PairCodes.of(graph, spd_cap=enc.max_distance + 1, bonds=enc.vocab.num_classes)
        else:
            codes = PairCodes.cached(graph)
        psi, phi = self.spatial(codes.spd), codes.bond
        if self.mode == "reference":
            psi, phi = authors_diagonal(psi, phi, codes.is_self, enc.vocab)
        src, dst = graph.edges()
        key_node = dst if self.mode == "reference" else src
        cls, c = codes.edge_code, psi.shape[0]

        def table(spatial: torch.Tensor, edge: torch.Tensor) -> torch.Tensor:
            return spatial[psi] + edge[phi]  # PQ[psi] + EQ[phi]: one table row per joint class

        return GRPEState(JointClasses(cls, psi, phi), dst * c + cls, key_node * c + cls,
                         table(enc.spatial_query, enc.edge_query), table(enc.spatial_key, enc.edge_key),
                         table(enc.spatial_value, enc.edge_value), {})

    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float,
                    state: GRPEState) -> ScoreTerms:
        # q_i.PQ[psi] + q_i.EQ[phi] = q_i.(PQ[psi] + EQ[phi]): each node's product with each class row
        queries = torch.einsum("nhd,chd->nch", q, state.query_table).flatten(0, 1)
        keys = torch.einsum("nhd,chd->nch", k, state.key_table).flatten(0, 1)
        bias = queries.index_select(0, state.query_rows) + keys.index_select(0, state.key_rows)
        return ScoreTerms(bias=bias * scale)

    def block_score_terms(self, blocks: BlockLayout, q: torch.Tensor, k: torch.Tensor, scale: float,
                          state: GRPEState) -> Optional[ScoreTerms]:
        """The bias on dense blocks: each node's products with the class rows, laid out per query
        row ``[B, H, n, C]`` and read at each slot's class (the key terms: per key column). Under
        ``torch.export`` (the number of classes is known only from the data) the per-edge terms."""
        if exporting():
            return None
        b, h, n = blocks.num_graphs, blocks.num_heads, blocks.size
        index = state.block_classes(blocks)[:, None].expand(b, h, n, n)
        queries = blocks.pad_rows(torch.einsum("nhd,chd->nhc", q, state.query_table))  # [B, H, n, C]
        keys = blocks.pad_rows(torch.einsum("nhd,chd->nhc", k, state.key_table))
        if self.mode == "reference":  # the key terms on the query node's key, k_i
            bias = torch.gather(queries, 3, index) + torch.gather(keys, 3, index)
        else:  # k_j: the key node's products, a class per row and a node per column
            bias = torch.gather(queries, 3, index) + torch.gather(keys.transpose(2, 3), 2, index)
        return ScoreTerms(bias=(bias * scale).view(b * h, n, n))

    def block_values(self, blocks: BlockLayout, attn: torch.Tensor, state: GRPEState) -> Optional[torch.Tensor]:
        """The value term on dense blocks: each row's attention mass per class, times the table
        (under ``torch.export``: the per-edge one)."""
        if exporting():
            return None
        b, h, n, c = blocks.num_graphs, blocks.num_heads, blocks.size, state.value_table.shape[0]
        index = state.block_classes(blocks)[:, None].expand(b, h, n, n)
        mass = attn.new_zeros(b, h, n, c).scatter_add_(3, index, attn.view(b, h, n, n))
        return torch.einsum("bhnc,chd->bhnd", mass, state.value_table).reshape(b * h, n, -1)

    def values(self, graph: GraphLike, attn: torch.Tensor, state: GRPEState) -> torch.Tensor:
        # sum_j a_ij (PV[psi_ij] + EV[phi_ij]) = sum_c mass[i, c] (PV + EV)[c]
        c = state.value_table.shape[0]
        mass = attn.new_zeros(graph.num_nodes() * c, attn.shape[1]).index_add_(0, state.query_rows, attn)
        return torch.einsum("nch,chd->nhd", mass.view(graph.num_nodes(), c, attn.shape[1]), state.value_table)


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
