"""Local message-passing models of the GPS block: GINE and GatedGCN (with an optional
positional-encoding gate), behind one call signature ``(graph, x, edge_feat, pe, shared)``.

GatedGCN follows the authors' ``model/GateGCN.py`` of Gradformer (Bresson & Laurent 2017, with
the "equivariant and stable PE" gate of Wang et al. 2022); for the query (destination) node
``i`` and its neighbours ``j`` (bond ``j -> i``)::

    e_ij = D x_i + E x_j + C e_ij,    s_ij = sigmoid(e_ij) * g_ij
    g_ij = sigmoid(W2 ReLU(W1 ||p_i - p_j||^2 + b1) + b2)      (pe gate; g_ij = 1 without it)
    h_i  = A x_i + sum_j s_ij * B x_j / (sum_j s_ij + 1e-6)
    out  = x + Dropout(ReLU(BatchNorm(h)))                        (residual=True, as the authors)

``dgl.nn.GatedGCNConv`` computes the same without the gate (its ``D`` acts on the source node
and ``E`` on the destination, the reverse of the equation above: a relabelling of two identically
initialised layers) and also returns updated edge features, which the authors' layer computes
but discards; here the bond embeddings stay the same in every layer, as in the authors' model.

Both layers read the molecular graph through :mod:`~dgl_graphtx.nn.graph_ops`: DGL's kernels on a
DGLGraph, plain torch ops on its :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`. GatedGCN's
``A, B, D, E`` act on the same node states and are one product; ``C e_ij`` and the gate ``g_ij``
read only the bonds, the same in every layer, so a model computes them for all its layers at once
(:meth:`GatedGCNLayer.share_edge_inputs`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import torch
from torch import nn
from dgl.nn import GINEConv

from ..errors import ConfigError
from ..nn import graph_ops as ops
from ..nn.attention import Shared, shared_value
from ..nn.graph_tensors import GraphLike
from ..nn import lean
from ..nn.lean import side_by_side, stacked_linear

LOCAL_MODELS = ("gine", "gatedgcn")
#: Key of a GatedGCN layer's bond terms in a model's per-forward dict (with the layer's id).
EDGE_INPUTS = "gatedgcn-edge-inputs"


class GINELayer(GINEConv):
    """GINE over the bonds, ``MLP((1 + eps) x_i + sum_j ReLU(x_j + e_ji))`` with a learnable
    ``eps`` and ``MLP = Linear-ReLU-Linear``; the positional encodings are not used.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> g, _ = smiles_to_graphs("CCO")
        >>> GINELayer(8)(g, torch.randn(3, 8), torch.randn(4, 8)).shape
        torch.Size([3, 8])
    """

    def __init__(self, dim: int) -> None:
        super().__init__(apply_func=nn.Sequential(lean.Linear(dim, dim), nn.ReLU(), lean.Linear(dim, dim)), learn_eps=True)

    def forward(
        self, graph: GraphLike, x: torch.Tensor, edge_feat: torch.Tensor, pe: Optional[torch.Tensor] = None,
        shared: Optional[Shared] = None,
    ) -> torch.Tensor:
        """New node states ``[N, d]``; ``pe`` and ``shared`` are accepted for a uniform signature and ignored.
        (``GINEConv``'s parameters, computed through :mod:`~dgl_graphtx.nn.graph_ops`.)"""
        neighbours = ops.sum_incoming(graph, torch.relu(ops.gather_sources(graph, x) + edge_feat))
        return self.apply_func((1 + self.eps) * x + neighbours)


class GatedGCNLayer(nn.Module):
    """Residual gated graph convolution over the bonds (module docstring has the equations).

    Args:
        dim: node and edge feature width.
        pe_gate: multiply each edge gate by ``MLP(||pe_i - pe_j||^2)`` (Linear(1, dim)-ReLU-
            Linear(dim, 1)-Sigmoid); ``forward`` then needs ``pe``.
        dropout: dropout after the activation (the authors use 0 inside the GPS block).
        residual: add the input to the output (the authors' GPS setting, ``True``).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> g, _ = smiles_to_graphs("CCO")
        >>> layer = GatedGCNLayer(8, pe_gate=True)
        >>> layer(g, torch.randn(3, 8), torch.randn(4, 8), pe=torch.rand(3, 4)).shape
        torch.Size([3, 8])
    """

    def __init__(self, dim: int, pe_gate: bool = False, dropout: float = 0.0, residual: bool = True) -> None:
        super().__init__()
        self.node_proj = lean.Linear(dim, 4 * dim)  # A, B, D and E of the equations, one product
        self.C = lean.Linear(dim, dim)
        self.pe_mlp = (
            nn.Sequential(lean.Linear(1, dim), nn.ReLU(), lean.Linear(dim, 1), nn.Sigmoid()) if pe_gate else None
        )
        self.norm = lean.BatchNorm1d(dim)
        self.dropout = lean.Dropout(dropout)
        self.residual = residual

    def projection(self, name: str) -> Tuple[torch.Tensor, torch.Tensor]:
        """Weight and bias of ``A``, ``B``, ``C``, ``D`` or ``E`` of the equations (views of the
        parameters: ``A, B, D, E`` share one matrix, so one product serves the four).

        Example:
            >>> layer = GatedGCNLayer(8)
            >>> [tuple(t.shape) for t in layer.projection("D")]
            [(8, 8), (8,)]
        """
        if name == "C":
            return self.C.weight, self.C.bias
        part = "ABDE".index(name)
        dim = self.C.weight.shape[0]
        return self.node_proj.weight[part * dim:(part + 1) * dim], self.node_proj.bias[part * dim:(part + 1) * dim]

    def _load_from_state_dict(self, state_dict: Dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        """Weights saved with separate ``A, B, D, E`` layers (before they were one product) load too."""
        for kind in ("weight", "bias"):
            old = [f"{prefix}{name}.{kind}" for name in "ABDE"]
            if all(key in state_dict for key in old):
                state_dict[f"{prefix}node_proj.{kind}"] = torch.cat([state_dict.pop(key) for key in old])
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(
        self, graph: GraphLike, x: torch.Tensor, edge_feat: torch.Tensor, pe: Optional[torch.Tensor] = None,
        shared: Optional[Shared] = None,
    ) -> torch.Tensor:
        """New node states ``[N, d]`` from node states ``x``, bond features ``edge_feat`` ``[E, d]``
        and (with the gate) per-node positional encodings ``pe`` ``[N, k]``. ``shared``: a
        model's per-forward dict, where :meth:`share_edge_inputs` may have put this layer's terms
        of the bonds (the same inputs in every layer)."""
        ax, bx, dx, ex = self.node_proj(x).chunk(4, dim=-1)
        bond_term, pe_gate = shared_value(shared, (EDGE_INPUTS, id(self)),
                                          lambda: self.edge_inputs([self], graph, edge_feat, pe, shared)[0])
        gate = torch.sigmoid(ops.edge_add(graph, dx, ex) + bond_term)
        if pe_gate is not None:
            gate = gate * pe_gate
        h = ax + ops.sum_weighted_sources(graph, bx, gate) / (ops.sum_incoming(graph, gate) + 1e-6)
        h = self.dropout(torch.relu(lean.batch_norm(self.norm, h, ops.node_mask(graph))))
        return x + h if self.residual else h

    @staticmethod
    def edge_inputs(layers: Sequence["GatedGCNLayer"], graph: GraphLike, edge_feat: torch.Tensor,
                    pe: Optional[torch.Tensor], shared: Optional[Shared] = None
                    ) -> List[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """Per layer, what it computes from the bonds alone: ``C e_ij`` and, with the PE gate,
        ``g_ij`` (module docstring), for all ``layers`` together: one product for their ``C``,
        and their gates' MLPs side by side (the squared PE distances once, kept in ``shared``)."""
        dim = layers[0].C.out_features
        bond_terms = stacked_linear([layer.C for layer in layers], edge_feat).split(dim, dim=-1)
        mlps = [layer.pe_mlp for layer in layers]
        if all(mlp is None for mlp in mlps):
            return [(term, None) for term in bond_terms]
        if pe is None:
            raise ConfigError("GatedGCN with pe_gate needs positional encodings (featurize with rwse_steps > 0)")
        gated = [cast(nn.Sequential, mlp) for mlp in mlps if mlp is not None]
        if len(gated) != len(layers):
            raise ConfigError("the PE gates of GatedGCN layers are computed together for layers that all have one")
        distance = shared_value(shared, ("pe-squared-distance", edge_feat.dtype),
                                lambda: ops.edge_difference(graph, pe.to(edge_feat.dtype)).pow(2).sum(-1, keepdim=True))
        hidden = torch.relu(stacked_linear([cast(nn.Linear, mlp[0]) for mlp in gated], distance))  # [E, L d]
        second = [cast(nn.Linear, mlp[2]) for mlp in gated]  # Linear(d, 1) of each layer: one weight row each
        logits = (hidden.unflatten(-1, (len(layers), dim)) * side_by_side([layer.weight for layer in second])).sum(-1)
        logits = logits + side_by_side([layer.bias for layer in second])  # [E, L]: W2 h + b2 of each layer
        return list(zip(bond_terms, torch.sigmoid(logits).split(1, dim=-1)))

    @classmethod
    def share_edge_inputs(cls, layers: Sequence["GatedGCNLayer"], graph: GraphLike, edge_feat: torch.Tensor,
                          pe: Optional[torch.Tensor], shared: Shared) -> None:
        """Put every layer's :meth:`edge_inputs` into ``shared``, computed together, where the
        layers' forward passes in the same model forward find them."""
        for layer, inputs in zip(layers, cls.edge_inputs(layers, graph, edge_feat, pe, shared)):
            shared[(EDGE_INPUTS, id(layer))] = inputs


def build_local_model(kind: str, dim: int, pe_gate: bool = False) -> nn.Module:
    """The local model of a GPS block: ``"gine"`` or ``"gatedgcn"`` (optionally gated by PE).

    Example:
        >>> type(build_local_model("gatedgcn", 8)).__name__
        'GatedGCNLayer'
    """
    if kind == "gine":
        if pe_gate:
            raise ConfigError("the positional-encoding gate exists for the GatedGCN local model only")
        return GINELayer(dim)
    if kind == "gatedgcn":
        return GatedGCNLayer(dim, pe_gate=pe_gate)
    raise ConfigError(f"local model must be one of {LOCAL_MODELS}, got {kind!r}")
