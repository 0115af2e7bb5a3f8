"""Attention layers of a model, built from its :class:`ModelConfig` by its variant's registry entry."""
from __future__ import annotations

from typing import List

from ..nn import RelationAttention
from .config import ModelConfig
from .variants import variant_spec


def build_attention_layers(config: ModelConfig) -> List[RelationAttention]:
    """One attention layer per transformer layer, sharing GRPE tables / Gradformer start points
    across layers when the config says so (see each entry of
    :data:`~dgl_graphtx.models.variants.VARIANT_SPECS`).

    Example:
        >>> layers = build_attention_layers(ModelConfig(variant="grpe", num_layers=2))
        >>> layers[0].structure.encodings is layers[1].structure.encodings
        True
    """
    return variant_spec(config.variant).build_layers(config, config.options)
