"""Named configurations from the papers, each a consistent (model, featurizer, relation) triple."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple

from ..errors import ConfigError
from ..featurize import FeaturizerConfig, MoleculeFeaturizer
from ..relation_graph import RelationConfig
from .config import GradformerOptions, MoireOptions, ModelConfig


@dataclass(frozen=True)
class Preset:
    """A model configuration with the featurization and relation graphs it needs."""

    model: ModelConfig
    featurizer: FeaturizerConfig
    relation: RelationConfig


def _grpe(layers: int, dim: int, heads: int) -> Tuple[ModelConfig, FeaturizerConfig, RelationConfig]:
    return (
        ModelConfig("grpe", layers, dim, heads, ffn_dim=dim, readout="virtual", virtual_node=True),
        FeaturizerConfig(),
        RelationConfig("complete", virtual_node=True),
    )


def _baseline(variant: str) -> Callable[[], Tuple[ModelConfig, FeaturizerConfig, RelationConfig]]:
    def make():
        model, feat, rel = _grpe(4, 64, 8)
        return dataclasses.replace(model, variant=variant), feat, rel

    return make


def _moire(distance: str) -> Callable[[], Tuple[ModelConfig, FeaturizerConfig, RelationConfig]]:
    def make():
        model = ModelConfig(
            "moire", 4, 64, 8, readout="max", virtual_node=False, input_mlp=True, head_layers=2,
            moire=MoireOptions(distance=distance, max_shift=6.0 if distance == "dist" else 4.0),
        )
        feat = FeaturizerConfig(coordinates="auto" if distance == "dist" else "none")
        return model, feat, RelationConfig("complete")

    return make


def _gradformer():
    model = ModelConfig(
        "gradformer", 4, 64, 4, readout="mean", virtual_node=False, rwse_steps=16, head_layers=2,
        gradformer=GradformerOptions(mode="paper", decay=0.5),
    )
    return model, FeaturizerConfig(rwse_steps=16), RelationConfig("complete")


#: ``(model, preset) -> factory``; the first preset listed for a model is its default.
PRESETS: Dict[str, Dict[str, Callable[[], Tuple[ModelConfig, FeaturizerConfig, RelationConfig]]]] = {
    "grpe": {"tiny": lambda: _grpe(4, 64, 8), "small": lambda: _grpe(12, 80, 8)},
    "moire": {"2d": _moire("spd"), "3d": _moire("dist")},
    "gradformer": {"default": _gradformer},
    "vanilla": {"tiny": _baseline("vanilla")},
    "graphormer": {"tiny": _baseline("graphormer")},
}


def get_preset(
    model: str,
    preset: str = None,
    *,
    num_tasks: int = 1,
    task: str = "regression",
    atom_features: str = "ogb",
    **model_overrides: Any,
) -> Preset:
    """A named configuration, adapted to the task and the atom featurizer.

    Args:
        model: ``grpe``, ``moire``, ``gradformer``, ``vanilla`` or ``graphormer``.
        preset: name within the model (``grpe``: ``tiny`` 4/64/8, ``small`` 12/80/8; ``moire``:
            ``2d`` (hop distances), ``3d`` (ETKDG coordinates); ``gradformer``: ``default``;
            baselines: ``tiny``). Default: the first listed.
        num_tasks, task: output size and ``regression`` / ``classification``.
        atom_features: ``ogb`` or ``canonical``; feature sizes follow the featurizer.
        **model_overrides: fields of :class:`ModelConfig` to replace (e.g. ``dropout=0.2``).

    Example:
        >>> p = get_preset("grpe", "small")
        >>> p.model.num_layers, p.model.hidden_dim, p.relation.virtual_node
        (12, 80, True)
    """
    if model not in PRESETS:
        raise ConfigError(f"unknown model {model!r}; choose from {sorted(PRESETS)}")
    choices = PRESETS[model]
    name = preset or next(iter(choices))
    if name not in choices:
        raise ConfigError(f"unknown preset {name!r} for {model}; choose from {sorted(choices)}")
    model_cfg, feat_cfg, rel_cfg = choices[name]()
    feat_cfg = dataclasses.replace(feat_cfg, atom_features=atom_features)
    featurizer = MoleculeFeaturizer(feat_cfg, rel_cfg)
    model_cfg = dataclasses.replace(
        model_cfg,
        num_tasks=num_tasks,
        task=task,
        atom_features=atom_features,
        atom_feature_dims=featurizer.atom_feature_dims,
        bond_feature_dims=featurizer.bond_feature_dims,
        bond_radices=featurizer.bond_vocab.radices,
        **model_overrides,
    )
    return Preset(model_cfg, feat_cfg, rel_cfg)
