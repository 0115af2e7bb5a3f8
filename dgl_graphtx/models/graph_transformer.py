"""Pre-LN graph transformer over relation graphs: GRPE, MoireGT and the two baselines."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..errors import ConfigError
from ..nn.graph_tensors import GraphLike
from ..nn.tracing import exporting
from .attention_layers import build_attention_layers
from .base import AtomMask, Encoded, MoleculeModel
from .blocks import PreNormBlock
from .config import ModelConfig


class GraphTransformer(MoleculeModel):
    """Stacked pre-LN transformer blocks whose attention runs over the relation graph.

    Node inputs are the atom encodings (summed embeddings of the OGB atom features, or a
    projection of canonical features), plus, when ``config.virtual_node``, one learned embedding
    for each molecule's virtual node. After the last block a LayerNorm is applied and the
    readout (virtual node, or pooling over atoms) feeds the head.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.relation_graph import RelationConfig
        >>> g, rel = smiles_to_graphs("CCO", relation=RelationConfig(virtual_node=True))
        >>> model = GraphTransformer(ModelConfig(variant="grpe", num_layers=2, hidden_dim=16, num_heads=4, virtual_node=True,
        ...                                      readout="virtual"))
        >>> model(g, rel).shape
        torch.Size([1, 1])
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        architecture = config.model_architecture
        if architecture != "transformer":
            raise ConfigError(f"a config of architecture {architecture!r} is built by that architecture's model (build_model picks it)")
        self.blocks = nn.ModuleList(
            PreNormBlock(attention, config.feedforward_dim, config.dropout)
            for attention in build_attention_layers(config)
        )
        self.final_norm = nn.LayerNorm(config.hidden_dim)
        self.virtual_embedding = nn.Parameter(torch.randn(config.hidden_dim) * 0.02) if config.virtual_node else None

    def encode(self, graph: GraphLike, relation_graph: GraphLike, masked: Optional[AtomMask] = None) -> Encoded:
        atoms = self.encode_atoms(graph, masked=masked)
        is_virtual = relation_graph.ndata["is_virtual"]
        # an exported program (no virtual node, see inference/export.py) counts by shapes, not by data
        num_virtual = relation_graph.num_nodes() - graph.num_nodes() if exporting() else int(is_virtual.sum())
        expected = graph.batch_size if self.config.virtual_node else 0
        if num_virtual != expected or relation_graph.num_nodes() - num_virtual != graph.num_nodes():
            raise ConfigError(
                f"relation graphs do not match the model: expected {expected} virtual nodes and "
                f"{graph.num_nodes()} atoms, got {num_virtual} and {relation_graph.num_nodes() - num_virtual}; "
                f"build the dataset with RelationConfig(virtual_node={self.config.virtual_node})"
            )
        if num_virtual:
            x = atoms.new_empty(relation_graph.num_nodes(), atoms.shape[1])
            x[~is_virtual] = atoms
            assert self.virtual_embedding is not None  # virtual nodes come only with virtual_node=True (checked above)
            x[is_virtual] = self.virtual_embedding.to(atoms.dtype)
        else:
            x = atoms
        attentions = []
        for block in self.blocks:
            x, attn = block(relation_graph, x)
            attentions.append(attn)
        x = self.final_norm(x)
        virtual = x[is_virtual] if num_virtual else None
        return x[~is_virtual] if num_virtual else x, virtual, attentions
