"""Attention layers of a model, built from its :class:`ModelConfig`."""
from __future__ import annotations

from typing import List

from ..nn import (
    DecayParameters,
    GradformerAttention,
    GraphormerAttention,
    GRPEAttention,
    GRPEEncodings,
    MoireAttention,
    RelationAttention,
)
from .config import ModelConfig


def build_attention_layers(config: ModelConfig) -> List[RelationAttention]:
    """One attention layer per transformer layer, sharing GRPE tables / Gradformer start points
    across layers when the config says so.

    Example:
        >>> layers = build_attention_layers(ModelConfig(variant="grpe", num_layers=2))
        >>> layers[0].structure.encodings is layers[1].structure.encodings
        True
    """
    d, h, drop, n = config.hidden_dim, config.num_heads, config.attn_dropout, config.num_layers
    vocab = config.bond_vocab
    if config.variant == "vanilla":
        return [RelationAttention(d, h, None, drop) for _ in range(n)]
    if config.variant == "graphormer":
        return [GraphormerAttention(d, h, config.graphormer.max_distance, vocab, drop) for _ in range(n)]
    if config.variant == "grpe":
        opts = config.grpe
        shared = GRPEEncodings(d, h, opts.max_distance, vocab) if opts.share_encodings else None
        return [GRPEAttention(d, h, shared, opts.max_distance, vocab, opts.mode, drop) for _ in range(n)]
    if config.variant == "moire":
        o = config.moire
        return [MoireAttention(d, h, o.focus, o.distance, o.mode, o.max_shift, o.init_width, drop) for _ in range(n)]
    o = config.gradformer
    shared = DecayParameters(h, o.init_start, o.decay, o.learn_decay) if o.share_start else None
    return [GradformerAttention(d, h, shared, o.init_start, o.decay, o.learn_decay, o.mode, drop, o.slope) for _ in range(n)]
