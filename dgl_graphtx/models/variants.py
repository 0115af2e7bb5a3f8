"""The attention variants a model can use: one table, the single source of the variant names,
their settings (``model.<variant>`` config sections), how their attention layers are built, the
model architecture they run in and their default preset.

The CLI's ``--model`` choices, :func:`~dgl_graphtx.models.build_model`, the presets and the test
catalogue are derived from :data:`VARIANT_SPECS`; :class:`~dgl_graphtx.models.ModelConfig` declares
one options section per entry with settings, and a test keeps the two equal. docs/attention.md
"Adding a variant" shows a new entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..errors import ConfigError
from ..nn.attention import RelationAttention
from ..nn.focus import FOCUS_FUNCTIONS
from ..nn.gradformer import GRADFORMER_MODES, REFERENCE_SLOPE, DecayParameters, GradformerAttention, check_slope
from ..nn.graphormer import GraphormerAttention
from ..nn.grpe import GRPE_MODES, GRPEAttention, GRPEEncodings
from ..nn.moire import DISTANCES, MOIRE_MODES, MoireAttention
from ..validation import check_number
from .architectures import ARCHITECTURES
from .search_params import Param
from .settings import ModelSettings

def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


# -- settings of each variant (the ``model.<variant>`` config sections) -------------------------
@dataclass(frozen=True)
class GRPEOptions:
    """GRPE settings: ``L`` (max hop class), ``paper``/``reference`` mode, table sharing."""

    max_distance: int = 5
    mode: str = "paper"
    share_encodings: bool = True

    def __post_init__(self) -> None:
        _check(self.mode in GRPE_MODES, f"grpe.mode must be one of {GRPE_MODES}, got {self.mode!r}")
        check_number("grpe.max_distance", self.max_distance, 1, 1024, integer=True)


@dataclass(frozen=True)
class MoireOptions:
    """MoireGT settings (see :class:`~dgl_graphtx.nn.MoireTerm`); ``rbf`` > 0 lets the distance
    also enter through ``rbf`` Gaussian basis functions up to ``rbf_cutoff``: a learned bias on each
    head's logits and a learned value vector per pair (:class:`~dgl_graphtx.nn.radial.RadialPairTerms`)."""

    focus: str = "gaussian"
    distance: str = "spd"
    mode: str = "paper"
    max_shift: float = 4.0
    init_width: float = 2.0
    rbf: int = 0
    rbf_cutoff: float = 8.0

    def __post_init__(self) -> None:
        _check(self.focus in FOCUS_FUNCTIONS, f"moire.focus must be one of {sorted(FOCUS_FUNCTIONS)}, got {self.focus!r}")
        _check(self.distance in DISTANCES, f"moire.distance must be one of {DISTANCES}, got {self.distance!r}")
        _check(self.mode in MOIRE_MODES, f"moire.mode must be one of {MOIRE_MODES}, got {self.mode!r}")
        check_number("moire.init_width", self.init_width, 0, low_open=True)
        check_number("moire.max_shift", self.max_shift, 0)
        _check(self.rbf == 0 or 2 <= self.rbf <= 1024, f"moire.rbf must be 0 (off) or 2 to 1024 basis functions, got {self.rbf!r}")
        check_number("moire.rbf_cutoff", self.rbf_cutoff, 0, low_open=True)


@dataclass(frozen=True)
class GradformerOptions:
    """Gradformer settings: decay mode, lambda and start points (the GPS block it runs in has its
    own section, :class:`~dgl_graphtx.models.architectures.GPSOptions`).

    ``slope`` is the LeakyReLU slope of ``mode="reference"`` (the authors' ``process_hop``:
    0 in their ``config.py`` and NCI1 script, 0.1 in the ZINC/CLUSTER scripts, 0.2 for
    ogbg-molhiv); the other modes use ReLU and need ``slope=0``.

    Example:
        >>> GradformerOptions(mode="reference", slope=0.2).slope
        0.2
    """

    mode: str = "paper"
    decay: float = 0.5
    learn_decay: bool = False
    init_start: float = 2.0
    share_start: bool = True
    slope: float = REFERENCE_SLOPE

    def __post_init__(self) -> None:
        _check(self.mode in GRADFORMER_MODES, f"gradformer.mode must be one of {GRADFORMER_MODES}, got {self.mode!r}")
        try:
            check_slope(self.mode, self.slope)
        except ValueError as err:
            raise ConfigError(f"gradformer.slope: {err}") from None
        check_number("gradformer.decay (lambda)", self.decay, 0, 1, low_open=True, high_open=True)
        check_number("gradformer.init_start", self.init_start, 0)


@dataclass(frozen=True)
class GraphormerOptions:
    """Graphormer-bias baseline settings."""

    max_distance: int = 5

    def __post_init__(self) -> None:
        check_number("graphormer.max_distance", self.max_distance, 1, 1024, integer=True)


# -- how each variant's layers are built ---------------------------------------------------------
def _vanilla_layers(settings: ModelSettings, options: None) -> List[RelationAttention]:
    return [RelationAttention(settings.hidden_dim, settings.num_heads, None, settings.attn_dropout)
            for _ in range(settings.num_layers)]


def _graphormer_layers(settings: ModelSettings, o: GraphormerOptions) -> List[RelationAttention]:
    d, h, drop = settings.hidden_dim, settings.num_heads, settings.attn_dropout
    return [GraphormerAttention(d, h, o.max_distance, settings.bond_vocab, drop) for _ in range(settings.num_layers)]


def _grpe_layers(settings: ModelSettings, o: GRPEOptions) -> List[RelationAttention]:
    d, h, drop, vocab = settings.hidden_dim, settings.num_heads, settings.attn_dropout, settings.bond_vocab
    shared = GRPEEncodings(d, h, o.max_distance, vocab) if o.share_encodings else None
    return [GRPEAttention(d, h, shared, o.max_distance, vocab, o.mode, drop) for _ in range(settings.num_layers)]


def _moire_layers(settings: ModelSettings, o: MoireOptions) -> List[RelationAttention]:
    d, h, drop = settings.hidden_dim, settings.num_heads, settings.attn_dropout
    return [MoireAttention(d, h, o.focus, o.distance, o.mode, o.max_shift, o.init_width, drop, o.rbf, o.rbf_cutoff)
            for _ in range(settings.num_layers)]


def _gradformer_layers(settings: ModelSettings, o: GradformerOptions) -> List[RelationAttention]:
    d, h, drop = settings.hidden_dim, settings.num_heads, settings.attn_dropout
    shared = DecayParameters(h, o.init_start, o.decay, o.learn_decay) if o.share_start else None
    return [GradformerAttention(d, h, shared, o.init_start, o.decay, o.learn_decay, o.mode, drop, o.slope)
            for _ in range(settings.num_layers)]


#: The relation graph's mode, searched for variants whose attention does not mask by hops itself.
_RELATION_MODE = Param("relation.mode", choices=("complete", "hops"))


# -- the registry ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class VariantSpec:
    """One attention variant.

    Args:
        name: the variant's name (``--model``, ``preset.model``, ``model.variant``).
        summary: one line on what it is, shown by ``--help`` and the docs.
        options: dataclass of its settings, the config section ``model.<name>`` (``None``: none).
        build_layers: one attention layer per transformer layer, from the settings every model
            has and the variant's own options (an instance of ``options``; ``None`` without one).
        architecture: the model its layers run in by default, one of :data:`ARCHITECTURES` (a
            config's ``architecture`` may choose the other).
        default_preset: the preset used when none is named (``dgl-graphtx presets NAME`` lists
            them; a variant without paper presets gets the library-size ``tiny``).
        ffn_multiplier: default feed-forward width in units of ``hidden_dim``.
        uses_coordinates: whether a config of this variant reads 3-D distances (then its
            checkpoints need a featurizer with coordinates), from the same two arguments.
        search: its own knobs for ``dgl-graphtx hpopt``, searched after the shared ones
            (:data:`~dgl_graphtx.runs.hpopt.space.COMMON`).

    Example:
        >>> spec = VARIANT_SPECS["moire"]
        >>> spec.options.__name__, spec.architecture, spec.default_preset
        ('MoireOptions', 'transformer', '2d')
    """

    name: str
    summary: str
    options: Optional[type]
    build_layers: Callable[[ModelSettings, Any], List[RelationAttention]]
    architecture: str = "transformer"
    default_preset: str = "tiny"
    ffn_multiplier: int = 1
    uses_coordinates: Callable[[ModelSettings, Any], bool] = lambda settings, options: False
    search: Tuple[Param, ...] = ()

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"variant {self.name!r}: architecture must be one of {ARCHITECTURES}, got {self.architecture!r}")


def _table(*specs: VariantSpec) -> Dict[str, VariantSpec]:
    return {spec.name: spec for spec in specs}


#: Every attention variant, in the order the CLI and the docs list them.
VARIANT_SPECS: Dict[str, VariantSpec] = _table(
    VariantSpec("grpe", "GRPE: query/key-aware hop and bond encodings (Park et al.)", GRPEOptions, _grpe_layers,
                search=(Param("model.grpe.max_distance", 3, 8, integer=True), _RELATION_MODE)),
    VariantSpec("moire", "MoiréGT: learned focus functions of hop or 3-D distance", MoireOptions, _moire_layers,
                default_preset="2d", uses_coordinates=lambda settings, options: options.distance == "dist",
                search=(Param("model.moire.focus", choices=tuple(FOCUS_FUNCTIONS)),
                        Param("model.moire.init_width", 0.5, 4.0), _RELATION_MODE)),
    VariantSpec("gradformer", "Gradformer: hop-decay mask in GPS blocks (Liu et al.)", GradformerOptions,
                _gradformer_layers, architecture="gps", default_preset="default", ffn_multiplier=2,
                search=(Param("model.gradformer.decay", 0.1, 0.9),)),
    VariantSpec("vanilla", "baseline: plain attention over the relation graph", None, _vanilla_layers,
                search=(_RELATION_MODE,)),
    VariantSpec("graphormer", "baseline: Graphormer's hop and bond biases", GraphormerOptions, _graphormer_layers,
                search=(Param("model.graphormer.max_distance", 3, 8, integer=True),)),
)

#: The variant names, in table order.
VARIANT_NAMES: Tuple[str, ...] = tuple(VARIANT_SPECS)


def variant_spec(name: str) -> VariantSpec:
    """The entry of variant ``name``, or a one-line :class:`ConfigError` listing the choices.

    Example:
        >>> variant_spec("grpe").options.__name__
        'GRPEOptions'
    """
    if name not in VARIANT_SPECS:
        raise ConfigError(f"unknown model {name!r} (--model, preset.model, model.variant); choose one of {', '.join(VARIANT_NAMES)}")
    return VARIANT_SPECS[name]


def option_sections() -> Dict[str, type]:
    """``{variant: options class}`` for the variants that have settings: the ``model.<variant>``
    sections of a config.

    Example:
        >>> option_sections()["moire"].__name__, "vanilla" in option_sections()
        ('MoireOptions', False)
    """
    return {name: spec.options for name, spec in VARIANT_SPECS.items() if spec.options is not None}
