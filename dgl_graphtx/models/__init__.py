"""Molecule models built from dataclass configs: GRPE / MoireGT / baselines (GraphTransformer)
and Gradformer (GPS blocks), with presets from the papers."""
from .base import MoleculeModel
from .config import GradformerOptions, GraphormerOptions, GRPEOptions, ModelConfig, MoireOptions
from .factory import build_model
from .gps import Gradformer
from .graph_transformer import GraphTransformer
from .presets import PRESETS, Preset, get_preset

__all__ = [
    "GRPEOptions",
    "Gradformer",
    "GradformerOptions",
    "GraphTransformer",
    "GraphormerOptions",
    "ModelConfig",
    "MoireOptions",
    "MoleculeModel",
    "PRESETS",
    "Preset",
    "build_model",
    "get_preset",
]
