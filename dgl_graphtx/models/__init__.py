"""Molecule models built from dataclass configs: GRPE / MoireGT / baselines (GraphTransformer)
and Gradformer (GPS blocks, which take any variant's attention), with presets from the papers."""
from .architectures import ARCHITECTURES, GPSOptions
from .base import MoleculeModel
from .config import GradformerOptions, GraphormerOptions, GRPEOptions, ModelConfig, MoireOptions
from .factory import build_model, count_parameters
from .gps import GPSModel, Gradformer
from .graph_transformer import GraphTransformer
from .variants import VARIANT_NAMES, VARIANT_SPECS, VariantSpec, variant_spec
from .settings import ModelSettings
from .presets import PRESETS, Preset, PresetInfo, PresetSummary, TrainRecipe, get_preset, summarize_presets

__all__ = [
    "ARCHITECTURES",
    "GPSModel",
    "GPSOptions",
    "GRPEOptions",
    "Gradformer",
    "GradformerOptions",
    "GraphTransformer",
    "GraphormerOptions",
    "ModelConfig",
    "ModelSettings",
    "MoireOptions",
    "MoleculeModel",
    "PRESETS",
    "Preset",
    "PresetInfo",
    "PresetSummary",
    "TrainRecipe",
    "VARIANT_NAMES",
    "VARIANT_SPECS",
    "VariantSpec",
    "build_model",
    "count_parameters",
    "get_preset",
    "summarize_presets",
    "variant_spec",
]
