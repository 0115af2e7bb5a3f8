"""Transformer blocks: pre-LN block (GRPE, MoireGT, baselines) and GraphGPS block (Gradformer)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from ..nn import RelationAttention
from ..nn import graph_ops as ops
from ..nn.attention import Shared
from ..nn.graph_tensors import GraphLike
from .local_models import build_local_model
from ..nn import lean


def feed_forward(dim: int, hidden: int, dropout: float, activation: nn.Module) -> nn.Sequential:
    """``Linear(dim, hidden) - activation - Dropout - Linear(hidden, dim)``."""
    return nn.Sequential(lean.Linear(dim, hidden), activation, lean.Dropout(dropout), lean.Linear(hidden, dim))


def _attend(attention: RelationAttention, relation_graph: GraphLike, x: torch.Tensor, get_attention: bool,
            shared: Optional[Shared]) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The attention's output and, with ``get_attention``, its weights ``[E, H]`` (else ``None``)."""
    out = attention(relation_graph, x, get_attention, shared)
    return out if isinstance(out, tuple) else (out, None)


class PreNormBlock(nn.Module):
    """``x + Drop(MHA(LN x))`` then ``x + Drop(FFN(LN x))`` with a GELU feed-forward.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> _, rel = smiles_to_graphs("CO")
        >>> block = PreNormBlock(RelationAttention(8, 2), ffn_dim=16)
        >>> block(rel, torch.randn(2, 8))[0].shape
        torch.Size([2, 8])
    """

    def __init__(self, attention: RelationAttention, ffn_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        dim = attention.embed_dim
        self.attention = attention
        self.attn_norm = nn.LayerNorm(dim)
        self.ffn_norm = nn.LayerNorm(dim)
        self.ffn = feed_forward(dim, ffn_dim, dropout, nn.GELU())
        self.dropout = lean.Dropout(dropout)

    def forward(self, relation_graph: GraphLike, x: torch.Tensor, get_attention: bool = False,
                shared: Optional[Shared] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Returns the new node states and the attention weights ``[E, H]`` (``None`` unless
        ``get_attention``); ``shared`` is the model's per-forward dict (see
        :meth:`~dgl_graphtx.nn.RelationAttention.forward`)."""
        h, attn = _attend(self.attention, relation_graph, self.attn_norm(x), get_attention, shared)
        x = x + self.dropout(h)
        x = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return x, attn


def _norm(kind: str, dim: int) -> nn.Module:
    return lean.BatchNorm1d(dim) if kind == "batch" else nn.LayerNorm(dim)


class GPSBlock(nn.Module):
    """GraphGPS block (post-norm) with a local model over bonds and global relation attention::

        h_loc = Norm(x + Drop(MPNN(x, e)));  h_att = Norm(x + Drop(MHA(x)))
        h = h_loc + h_att;  out = Norm(h + FFN(h)),  FFN = Linear(d, f)-ReLU-Drop-Linear(f, d)-Drop

    ``MPNN`` is ``local_model``: ``"gine"`` or ``"gatedgcn"`` (see
    :mod:`~dgl_graphtx.models.local_models`; GatedGCN carries its own residual, so, as in the
    authors' code, ``x`` enters ``h_loc`` twice), with ``pe_gate`` gating GatedGCN's edges by the
    positional encodings ``pe`` passed to :meth:`forward`.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> g, rel = smiles_to_graphs("CCO")
        >>> block = GPSBlock(RelationAttention(8, 2), ffn_dim=16, norm="layer")
        >>> block(g, rel, torch.randn(3, 8), torch.randn(4, 8))[0].shape
        torch.Size([3, 8])
    """

    def __init__(
        self,
        attention: RelationAttention,
        ffn_dim: int,
        dropout: float = 0.0,
        norm: str = "batch",
        local_model: str = "gine",
        pe_gate: bool = False,
    ) -> None:
        super().__init__()
        dim = attention.embed_dim
        self.local = build_local_model(local_model, dim, pe_gate)
        self.attention = attention
        self.local_norm, self.attn_norm, self.out_norm = (_norm(norm, dim) for _ in range(3))
        self.ffn = nn.Sequential(feed_forward(dim, ffn_dim, dropout, nn.ReLU()), lean.Dropout(dropout))
        self.dropout = lean.Dropout(dropout)

    def forward(
        self,
        graph: GraphLike,
        relation_graph: GraphLike,
        x: torch.Tensor,
        edge_feat: torch.Tensor,
        pe: Optional[torch.Tensor] = None,
        get_attention: bool = False,
        shared: Optional[Shared] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Returns the new node states and the attention weights ``[E_rel, H]`` (``None`` unless
        ``get_attention``); ``shared``: the model's per-forward dict."""
        mask = ops.node_mask(graph)  # the real nodes of a padded batch: what the BatchNorms count
        h_loc = lean.batch_norm(self.local_norm, x + self.dropout(self.local(graph, x, edge_feat, pe, shared)), mask)
        h_att, attn = _attend(self.attention, relation_graph, x, get_attention, shared)
        h_att = lean.batch_norm(self.attn_norm, x + self.dropout(h_att), mask)
        h = h_loc + h_att
        return lean.batch_norm(self.out_norm, h + self.ffn(h), mask), attn
