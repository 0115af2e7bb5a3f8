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
DGLGraph, plain torch ops on its :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from torch import nn
from dgl.nn import GINEConv

from ..errors import ConfigError
from ..nn import graph_ops as ops
from ..nn.attention import Shared, shared_value
from ..nn.graph_tensors import GraphLike

LOCAL_MODELS = ("gine", "gatedgcn")


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
        super().__init__(apply_func=nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim)), learn_eps=True)

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
        self.node_proj = nn.Linear(dim, 4 * dim)  # A, B, D and E of the equations, one product
        self.C = nn.Linear(dim, dim)
        self.pe_mlp = (
            nn.Sequential(nn.Linear(1, dim), nn.ReLU(), nn.Linear(dim, 1), nn.Sigmoid()) if pe_gate else None
        )
        self.norm = nn.BatchNorm1d(dim)
        self.dropout = nn.Dropout(dropout)
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
        and (with the gate) per-node positional encodings ``pe`` ``[N, k]``, whose per-bond
        distances the layers of a model's forward pass compute once in ``shared``."""
        ax, bx, dx, ex = self.node_proj(x).chunk(4, dim=-1)
        gate = torch.sigmoid(ops.edge_add(graph, dx, ex) + self.C(edge_feat))
        if self.pe_mlp is not None:
            if pe is None:
                raise ConfigError("GatedGCN with pe_gate needs positional encodings (featurize with rwse_steps > 0)")
            distance = shared_value(shared, ("pe-squared-distance", x.dtype),
                                    lambda: ops.edge_difference(graph, pe.to(x.dtype)).pow(2).sum(-1, keepdim=True))
            gate = gate * self.pe_mlp(distance)
        h = ax + ops.sum_weighted_sources(graph, bx, gate) / (ops.sum_incoming(graph, gate) + 1e-6)
        h = self.dropout(torch.relu(self.norm(h)))
        return x + h if self.residual else h


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
