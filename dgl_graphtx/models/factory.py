"""Build a whole model from a :class:`ModelConfig`."""
from __future__ import annotations

import torch

from .base import MoleculeModel
from .config import ModelConfig
from .gps import GPSModel
from .graph_transformer import GraphTransformer

#: The model class of each architecture of :data:`~dgl_graphtx.models.architectures.ARCHITECTURES`.
MODEL_CLASSES = {"transformer": GraphTransformer, "gps": GPSModel}


def build_model(config: ModelConfig) -> MoleculeModel:
    """The model of ``config``'s architecture (``config.architecture``, or its variant's registry
    entry's): :class:`GPSModel` (GPS blocks) or :class:`GraphTransformer`.

    Example:
        >>> model = build_model(ModelConfig(variant="vanilla", num_layers=1, hidden_dim=16, num_heads=2))
        >>> type(model).__name__
        'GraphTransformer'
    """
    return MODEL_CLASSES[config.model_architecture](config)


def count_parameters(config: ModelConfig) -> int:
    """Number of parameters of ``build_model(config)``, built on PyTorch's ``meta`` device so no
    memory is allocated (GRPE-Large's 118M parameters count in milliseconds).

    Example:
        >>> count_parameters(ModelConfig(variant="vanilla", num_layers=1, hidden_dim=16, num_heads=2)) > 0
        True
    """
    with torch.device("meta"):
        model = build_model(config)
    return sum(p.numel() for p in model.parameters())
