"""GPS models: GraphGPS blocks (GINE or GatedGCN over bonds + any variant's relation attention);
Gradformer is the GPS model with Gradformer's decay-masked attention."""
from __future__ import annotations

from typing import List, Optional, cast

import torch
from torch import nn

from ..errors import ConfigError
from ..nn.attention import Shared
from ..nn.graph_tensors import GraphLike
from .attention_layers import build_attention_layers
from .base import AtomMask, Encoded, MoleculeModel
from .blocks import GPSBlock
from .config import ModelConfig
from .encoders import FeatureEncoder
from .local_models import GatedGCNLayer


class GPSModel(MoleculeModel):
    """GPS blocks: a local model over the molecular bonds (GINE or GatedGCN,
    ``config.gps.local_model``; edge features embedded like atom features) in parallel with the
    attention of ``config.variant`` over the relation graph; optional random-walk structural
    encoding added to the node input (and gating GatedGCN's edges with ``config.gps.pe_gate``);
    mean (or sum / max) pooling readout. The model of the ``gps`` architecture: Gradformer's by
    default, any variant's with ``architecture="gps"``.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> g, rel = smiles_to_graphs("CCO")
        >>> cfg = ModelConfig(variant="gradformer", num_layers=2, hidden_dim=16, num_heads=4,
        ...                   readout="mean", virtual_node=False)
        >>> GPSModel(cfg).eval()(g, rel).shape
        torch.Size([1, 1])
        >>> grpe = ModelConfig(variant="grpe", architecture="gps", num_layers=1, hidden_dim=16, num_heads=4,
        ...                    readout="mean", virtual_node=False)
        >>> type(GPSModel(grpe).blocks[0].attention.structure).__name__
        'GRPETerm'
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        if config.model_architecture != "gps":
            raise ConfigError(f"the GPS model needs architecture 'gps', got {config.model_architecture!r} (build_model picks the model)")
        self.bond_encoder = FeatureEncoder(
            config.bond_feature_dims, config.hidden_dim, categorical=config.atom_features == "ogb", kind="bond"
        )
        opts = config.gps
        self.blocks = nn.ModuleList(
            GPSBlock(attention, config.feedforward_dim, config.dropout, opts.norm, opts.local_model, opts.pe_gate)
            for attention in build_attention_layers(config)
        )

    def check_inputs(self, graph: GraphLike) -> None:
        super().check_inputs(graph)
        self.bond_encoder.check(graph.edata["feat"])

    def encode(self, graph: GraphLike, relation_graph: GraphLike, masked: Optional[AtomMask] = None,
               attention: bool = False) -> Encoded:
        if relation_graph.num_nodes() != graph.num_nodes():
            raise ConfigError(
                "the GPS model needs relation graphs without a virtual node: build the dataset with "
                "RelationConfig(virtual_node=False)"
            )
        rwse = self.structural_encoding(graph)
        x = self.encode_atoms(graph, rwse, masked)
        edge_feat = self.bond_encoder(graph.edata["feat"])
        pe = rwse if self.config.gps.pe_gate else None
        attentions: List[torch.Tensor] = []
        shared: Shared = {}  # what the layers compute once in this forward pass
        if self.config.gps.local_model == "gatedgcn":  # every layer's terms of the bonds, one product each
            layers = [cast(GatedGCNLayer, block.local) for block in self.blocks]
            GatedGCNLayer.share_edge_inputs(layers, graph, edge_feat, pe, shared)
        for block in self.blocks:
            x, attn = block(graph, relation_graph, x, edge_feat, pe, attention, shared)
            if attn is not None:
                attentions.append(attn)
        return x, None, attentions


#: Gradformer's model: the GPS model (its variant's registry entry runs in the ``gps`` architecture).
Gradformer = GPSModel
