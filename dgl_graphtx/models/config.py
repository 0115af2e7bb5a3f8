"""Model configuration: :class:`ModelConfig`, the settings every model has
(:class:`~dgl_graphtx.models.settings.ModelSettings`) with one options section per variant of the
registry (:mod:`dgl_graphtx.models.variants`), checked against it; serialisable to plain dicts for
checkpoints."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping

from ..errors import ConfigError
from .architectures import GPSOptions
from .levels import LevelOptions
from .molecule_sets import MoleculeSetOptions
from .settings import ModelSettings
from .variants import (
    GradformerOptions,
    GraphormerOptions,
    GRPEOptions,
    MoireOptions,
    option_sections,
    variant_spec,
)

@dataclass(frozen=True)
class ModelConfig(ModelSettings):
    """Everything needed to build a model: the fields of :class:`ModelSettings` and one options
    section per variant with settings, named after the variant (it applies to that variant only).
    The sections are the registry's (:func:`~dgl_graphtx.models.variants.option_sections`; a test
    keeps the two equal). Frozen: derive changed configs with ``dataclasses.replace``.

    Example:
        >>> cfg = ModelConfig(variant="moire", moire=MoireOptions(focus="cauchy"))
        >>> ModelConfig.from_dict(cfg.to_dict()) == cfg
        True
        >>> cfg.options.focus
        'cauchy'
    """

    grpe: GRPEOptions = field(default_factory=GRPEOptions)
    moire: MoireOptions = field(default_factory=MoireOptions)
    gradformer: GradformerOptions = field(default_factory=GradformerOptions)
    graphormer: GraphormerOptions = field(default_factory=GraphormerOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        variant_spec(self.variant)  # the one check of a variant's name
        if self.model_architecture == "gps":
            _check_gps(self)

    @property
    def model_architecture(self) -> str:
        """The architecture the attention runs in: ``architecture``, or the variant's own."""
        return self.architecture or variant_spec(self.variant).architecture

    @property
    def options(self) -> Any:
        """The options section of this config's own variant (``None`` for a variant without one)."""
        return getattr(self, self.variant, None)

    @property
    def feedforward_dim(self) -> int:
        """The FFN width actually used."""
        if self.ffn_dim is not None:
            return self.ffn_dim
        return variant_spec(self.variant).ffn_multiplier * self.hidden_dim

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict` (also of the layout before the ``gps`` section, see
        :func:`upgrade_model_dict`); unknown keys are an error."""
        kwargs = upgrade_model_dict(data)
        _reject_unknown(cls, kwargs, "model config")
        for key, option_cls in {**option_sections(), "gps": GPSOptions, "molecules": MoleculeSetOptions, "levels": LevelOptions}.items():
            if isinstance(kwargs.get(key), dict):
                _reject_unknown(option_cls, kwargs[key], f"{key} options")
                kwargs[key] = option_cls(**kwargs[key])
        return cls(**kwargs)


#: Settings of the GPS block that the ``gradformer`` section held before the ``gps`` section.
GPS_KEYS_OF_GRADFORMER = ("norm", "local_model", "pe_gate")


def upgrade_model_dict(data: Mapping[str, Any]) -> Dict[str, Any]:
    """A model section as :meth:`ModelConfig.to_dict` writes it, from one written before the GPS
    block had its own section (``gradformer.local_model`` is now ``gps.local_model``; the same
    for ``norm`` and ``pe_gate``). Checkpoints, ``config.yaml`` files and ``--set`` items of
    either layout load.

    Example:
        >>> upgrade_model_dict({"gradformer": {"decay": 0.5, "local_model": "gatedgcn"}})
        {'gradformer': {'decay': 0.5}, 'gps': {'local_model': 'gatedgcn'}}
    """
    out = dict(data)
    old = out.get("gradformer")
    if not isinstance(old, Mapping) or not set(old) & set(GPS_KEYS_OF_GRADFORMER):
        return out
    gps = dict(out.get("gps") or {})
    for key in GPS_KEYS_OF_GRADFORMER:
        if key in old:
            if key in gps and gps[key] != old[key]:
                raise ConfigError(f"gradformer.{key}={old[key]} and gps.{key}={gps[key]}: it is gps.{key} now, give it once")
            gps[key] = old[key]
    out["gradformer"] = {k: v for k, v in old.items() if k not in GPS_KEYS_OF_GRADFORMER}
    out["gps"] = gps
    return out


def _check_gps(config: ModelConfig) -> None:
    """The rules of the GPS architecture, whatever the variant of its attention."""
    if config.virtual_node:
        raise ConfigError("the GPS block uses no virtual node; set virtual_node=False and readout 'mean', 'sum' or 'max'")
    if config.gps.pe_gate and not config.rwse_steps:
        raise ConfigError("gps.pe_gate gates by the random-walk encodings: set rwse_steps > 0")


def _reject_unknown(cls: type, data: Dict[str, Any], what: str) -> None:
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown {what} keys: {sorted(unknown)}")
