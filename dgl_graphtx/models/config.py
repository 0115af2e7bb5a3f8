"""Model configuration: :class:`ModelConfig`, the settings every model has
(:class:`~dgl_graphtx.models.settings.ModelSettings`) with one options section per variant of the
registry (:mod:`dgl_graphtx.models.variants`), checked against it; serialisable to plain dicts for
checkpoints."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict

from ..errors import ConfigError
from .settings import ModelSettings
from .variants import (  # noqa: F401  (the options classes are re-exported from here)
    VARIANT_NAMES,
    GradformerOptions,
    GraphormerOptions,
    GRPEOptions,
    MoireOptions,
    option_sections,
    variant_spec,
)

#: The variant names (from :data:`~dgl_graphtx.models.variants.VARIANT_SPECS`).
VARIANTS = VARIANT_NAMES


@dataclass(frozen=True)
class _RegisteredVariant(ModelSettings):
    """What :class:`ModelConfig` adds to :class:`ModelSettings` besides its options sections:
    the checks and properties that read the variant registry."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ConfigError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        spec = variant_spec(self.variant)
        if spec.check is not None:
            spec.check(self, self.options)

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
    def from_dict(cls, data: Dict[str, Any]) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        _reject_unknown(cls, data, "model config")
        kwargs = dict(data)
        for key, option_cls in option_sections().items():
            if isinstance(kwargs.get(key), dict):
                _reject_unknown(option_cls, kwargs[key], f"{key} options")
                kwargs[key] = option_cls(**kwargs[key])
        return cls(**kwargs)


#: Everything needed to build a model: :class:`ModelSettings` and, for each variant with settings,
#: its options section (``grpe``, ``moire``, ``gradformer``, ``graphormer``: one field per entry
#: of the variant registry, so a new variant's section appears here by itself). Frozen: derive
#: changed configs with ``dataclasses.replace``.
ModelConfig = dataclasses.make_dataclass(
    "ModelConfig",
    [(name, options, field(default_factory=options)) for name, options in option_sections().items()],
    bases=(_RegisteredVariant,),
    frozen=True,
    namespace={"__module__": __name__},
)
ModelConfig.__doc__ = """Everything needed to build a model: the fields of :class:`ModelSettings` and one options
section per variant with settings (named after the variant; it applies to that variant only).

Example:
    >>> cfg = ModelConfig(variant="moire", moire=MoireOptions(focus="cauchy"))
    >>> ModelConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> {"grpe", "moire", "gradformer", "graphormer"} <= {f.name for f in dataclasses.fields(cfg)}
    True
    >>> cfg.options.focus
    'cauchy'
"""


def _reject_unknown(cls: type, data: Dict[str, Any], what: str) -> None:
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ConfigError(f"unknown {what} keys: {sorted(unknown)}")
