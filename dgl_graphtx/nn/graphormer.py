"""Graphormer-style baseline: a learned scalar bias per head for each spatial and each edge class.

``s_ij = q_i.k_j / sqrt(dh) + b_h[psi_ij] + c_h[phi_ij]`` with the pair classes of
:mod:`dgl_graphtx.nn.pair_classes`, so ablations against GRPE compare like with like.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..relation_graph.bond_classes import BondVocabulary
from .attention import RelationAttention, ScoreTerms, StructureTerm
from .graph_tensors import GraphLike
from .pair_classes import SpatialClasses


class GraphormerBias(StructureTerm):
    """Additive per-head bias by spatial class and by edge class.

    Args:
        num_heads: number of heads.
        max_distance: largest hop count with its own spatial class.
        vocab: bond vocabulary of the relation graphs' ``bond`` field.

    Example:
        >>> bias = GraphormerBias(num_heads=4, max_distance=3)
        >>> bias.spatial_bias.shape, bias.edge_bias.shape
        (torch.Size([7, 4]), torch.Size([63, 4]))
    """

    edge_fields = ("spd", "bond")

    def __init__(self, num_heads: int, max_distance: int = 5, vocab: BondVocabulary = BondVocabulary()) -> None:
        super().__init__()
        self.spatial = SpatialClasses(max_distance)
        self.spatial_bias = nn.Parameter(torch.zeros(self.spatial.num_classes, num_heads))
        self.edge_bias = nn.Parameter(torch.zeros(vocab.num_classes, num_heads))

    def extra_repr(self) -> str:
        return f"max_distance={self.spatial.max_distance}, bond_classes={self.edge_bias.shape[0]}"

    def score_terms(self, graph: GraphLike, q: torch.Tensor, k: torch.Tensor, scale: float, state: Any) -> ScoreTerms:
        psi, phi = self.spatial(graph.edata["spd"]), graph.edata["bond"]
        # b[psi] + c[phi] as one row of the (spatial x edge class) table: one gather per edge
        joint = (self.spatial_bias[:, None, :] + self.edge_bias[None, :, :]).flatten(0, 1)
        return ScoreTerms(bias=joint.index_select(0, psi * self.edge_bias.shape[0] + phi))


class GraphormerAttention(RelationAttention):
    """Attention with Graphormer-style scalar structural biases.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CC=O")
        >>> GraphormerAttention(8, num_heads=2)(rel, torch.randn(3, 8)).shape
        torch.Size([3, 8])
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        max_distance: int = 5,
        vocab: BondVocabulary = BondVocabulary(),
        attn_dropout: float = 0.0,
    ) -> None:
        super().__init__(embed_dim, num_heads, GraphormerBias(num_heads, max_distance, vocab), attn_dropout)
