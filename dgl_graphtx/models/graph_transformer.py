"""Pre-LN graph transformer over relation graphs: GRPE, MoireGT and the two baselines."""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import nn

from ..errors import ConfigError
from ..nn import graph_ops as ops
from ..nn.attention import Shared
from ..nn.graph_tensors import GraphLike, GraphTensors
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

    def encode(self, graph: GraphLike, relation_graph: GraphLike, masked: Optional[AtomMask] = None,
               attention: bool = False) -> Encoded:
        atoms = self.encode_atoms(graph, masked=masked)
        expected = graph.batch_size if self.config.virtual_node else 0
        extra = relation_graph.num_nodes() - graph.num_nodes()
        if extra != expected:
            raise ConfigError(
                f"relation graphs do not match the model: expected {expected} virtual nodes besides the "
                f"{graph.num_nodes()} atoms, the relation graphs have {extra}; "
                f"build the dataset with RelationConfig(virtual_node={self.config.virtual_node})"
            )
        rows = virtual_node_rows(graph) if expected else None
        if rows is not None:
            assert self.virtual_embedding is not None  # virtual nodes come only with virtual_node=True (checked above)
            atom_rows, virtual_rows = rows
            virtual = self.virtual_embedding.to(atoms.dtype).expand(expected, -1)
            x = atoms.new_zeros(relation_graph.num_nodes(), atoms.shape[1])
            x = x.index_copy(0, atom_rows, atoms).index_copy(0, virtual_rows, virtual)
        else:
            x = atoms
        attentions: List[torch.Tensor] = []
        shared: Shared = {}  # what the layers compute once in this forward pass
        for block in self.blocks:
            x, attn = block(relation_graph, x, attention, shared)
            if attn is not None:
                attentions.append(attn)
        x = self.final_norm(x)
        if rows is None:
            return x, None, attentions
        return x.index_select(0, rows[0]), x.index_select(0, rows[1]), attentions


def virtual_node_rows(graph: GraphLike) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rows of the atoms ``[N]`` and of the virtual nodes ``[B]`` in the batched relation graphs of
    molecular graphs ``graph`` with one virtual node each, which
    :func:`~dgl_graphtx.relation_graph.build_relation_graph` places after the molecule's atoms
    (computed from the sizes, no look at the data: nothing waits for the device).

    Example:
        >>> import dgl
        >>> g = dgl.batch([dgl.graph(([0], [1])), dgl.graph(([], []), num_nodes=1)])
        >>> [rows.tolist() for rows in virtual_node_rows(g)]
        [[0, 1, 3], [2, 4]]
    """
    counts = graph.batch_num_nodes()
    node_graph = ops.node_graphs(graph)
    nodes = torch.arange(graph.num_nodes(), device=node_graph.device)
    molecules = torch.arange(counts.shape[0], device=counts.device)
    slot = graph.slot_size if isinstance(graph, GraphTensors) else 0
    if slot:  # a padded batch: molecule b's atoms, then its virtual node, then padding fill slot b (one row longer)
        local = nodes - node_graph * slot
        return nodes + node_graph + (local >= counts[node_graph]).long(), molecules * (slot + 1) + counts
    return nodes + node_graph, torch.cumsum(counts, 0) + molecules
