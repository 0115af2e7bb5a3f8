"""Model configuration as dataclasses (serialisable to plain dicts for checkpoints)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..bond_classes import BondVocabulary
from ..errors import ConfigError
from ..featurize.ogb_features import OGB_ATOM_FEATURE_DIMS, OGB_BOND_FEATURE_DIMS
from ..nn.focus import FOCUS_FUNCTIONS
from ..nn.gradformer import GRADFORMER_MODES, REFERENCE_SLOPE, check_slope
from ..nn.grpe import GRPE_MODES
from ..nn.moire import DISTANCES, MOIRE_MODES
from .local_models import LOCAL_MODELS
from ..validation import check_number

VARIANTS = ("grpe", "moire", "gradformer", "vanilla", "graphormer")
READOUTS = ("virtual", "mean", "max", "sum")
TASKS = ("regression", "classification")

#: Upper bounds on model sizes. They are far above any published configuration and keep a
#: damaged or hostile checkpoint from asking for terabytes or a million layers before any check.
MAX_LAYERS = 256
MAX_WIDTH = 16384
MAX_TASKS = 65536
MAX_CATEGORIES = 1 << 20


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class GRPEOptions:
    """GRPE settings: ``L`` (max hop class), ``paper``/``reference`` mode, table sharing."""

    max_distance: int = 5
    mode: str = "paper"
    share_encodings: bool = True

    def __post_init__(self) -> None:
        _check(self.mode in GRPE_MODES, f"grpe.mode must be one of {GRPE_MODES}, got {self.mode!r}")
        check_number("grpe.max_distance", self.max_distance, 1, 1024, integer=True)


@dataclass
class MoireOptions:
    """MoireGT settings (see :class:`~dgl_graphtx.nn.MoireTerm`)."""

    focus: str = "gaussian"
    distance: str = "spd"
    mode: str = "paper"
    max_shift: float = 4.0
    init_width: float = 2.0

    def __post_init__(self) -> None:
        _check(self.focus in FOCUS_FUNCTIONS, f"moire.focus must be one of {sorted(FOCUS_FUNCTIONS)}, got {self.focus!r}")
        _check(self.distance in DISTANCES, f"moire.distance must be one of {DISTANCES}, got {self.distance!r}")
        _check(self.mode in MOIRE_MODES, f"moire.mode must be one of {MOIRE_MODES}, got {self.mode!r}")
        check_number("moire.init_width", self.init_width, 0, low_open=True)
        check_number("moire.max_shift", self.max_shift, 0)


@dataclass
class GradformerOptions:
    """Gradformer settings: decay mode, lambda, start points, normalisation and local model of
    the GPS block.

    ``slope`` is the LeakyReLU slope of ``mode="reference"`` (the authors' ``process_hop``:
    0 in their ``config.py`` and NCI1 script, 0.1 in the ZINC/CLUSTER scripts, 0.2 for
    ogbg-molhiv); the other modes use ReLU and need ``slope=0``. ``local_model`` is the GPS
    block's message passing over bonds, ``"gine"`` or ``"gatedgcn"``; ``pe_gate`` (GatedGCN only)
    gates its edges by the random-walk encodings, as the authors' MolHIV model.

    Example:
        >>> GradformerOptions(mode="reference", slope=0.2, local_model="gatedgcn").local_model
        'gatedgcn'
    """

    mode: str = "paper"
    decay: float = 0.5
    learn_decay: bool = False
    init_start: float = 2.0
    share_start: bool = True
    norm: str = "batch"
    slope: float = REFERENCE_SLOPE
    local_model: str = "gine"
    pe_gate: bool = False

    def __post_init__(self) -> None:
        _check(self.local_model in LOCAL_MODELS, f"gradformer.local_model must be one of {LOCAL_MODELS}, got {self.local_model!r}")
        _check(not self.pe_gate or self.local_model == "gatedgcn", "gradformer.pe_gate needs gradformer.local_model='gatedgcn'")
        _check(self.mode in GRADFORMER_MODES, f"gradformer.mode must be one of {GRADFORMER_MODES}, got {self.mode!r}")
        try:
            check_slope(self.mode, self.slope)
        except ValueError as err:
            raise ConfigError(f"gradformer.slope: {err}") from None
        check_number("gradformer.decay (lambda)", self.decay, 0, 1, low_open=True, high_open=True)
        check_number("gradformer.init_start", self.init_start, 0)
        _check(self.norm in ("batch", "layer"), f"gradformer.norm must be 'batch' or 'layer', got {self.norm!r}")


@dataclass
class GraphormerOptions:
    """Graphormer-bias baseline settings."""

    max_distance: int = 5

    def __post_init__(self) -> None:
        check_number("graphormer.max_distance", self.max_distance, 1, 1024, integer=True)


@dataclass
class ModelConfig:
    """Everything needed to build a model; nested options apply to their own variant only.

    Args:
        variant: ``grpe``, ``moire``, ``gradformer``, ``vanilla`` or ``graphormer``.
        num_layers, hidden_dim, num_heads: transformer size.
        ffn_dim: hidden width of the feed-forward sublayer (default ``hidden_dim``; Gradformer's
            GPS block uses ``2 * hidden_dim``).
        dropout, attn_dropout: dropout after sublayers / on attention weights.
        readout: ``virtual`` (the virtual node's output), ``mean``, ``max`` or ``sum`` pooling.
        virtual_node: whether the relation graphs carry a virtual node (with its own learned
            input embedding); must match the dataset's ``RelationConfig``.
        num_tasks, task: number of targets, ``regression`` or (multi-task binary) ``classification``.
        atom_features: ``ogb`` (categorical, embedded) or ``canonical`` (dense, projected).
        atom_feature_dims, bond_feature_dims: category counts (``ogb``) or ``(width,)`` (``canonical``).
        bond_radices: radices of the relation graphs' bond classes.
        rwse_steps: width of the random-walk structural encoding in ``ndata["rwse"]`` (0: none).
        rwse_norm: BatchNorm the random-walk encodings before using them (Gradformer's
            ``pe_norm``).
        input_mlp: pass node inputs through a 2-layer MLP (MoireGT's input layers).
        head_layers: 1 (Linear) or 2 (MLP) output layers.
        molecule_features: width of the molecule-level extra features (``ndata["mol_features"]``,
            see :mod:`dgl_graphtx.extra_features`) concatenated to the pooled embedding before the head.
        atom_extra_features: width of the atom-level extra features (``ndata["atom_extra"]``),
            projected and added to the atom encodings.

    Example:
        >>> cfg = ModelConfig(variant="moire", moire=MoireOptions(focus="cauchy"))
        >>> ModelConfig.from_dict(cfg.to_dict()) == cfg
        True
    """

    variant: str = "grpe"
    num_layers: int = 4
    hidden_dim: int = 64
    num_heads: int = 8
    ffn_dim: Optional[int] = None
    dropout: float = 0.1
    attn_dropout: float = 0.1
    readout: str = "virtual"
    virtual_node: bool = True
    num_tasks: int = 1
    task: str = "regression"
    atom_features: str = "ogb"
    atom_feature_dims: Tuple[int, ...] = OGB_ATOM_FEATURE_DIMS
    bond_feature_dims: Tuple[int, ...] = OGB_BOND_FEATURE_DIMS
    bond_radices: Tuple[int, ...] = OGB_BOND_FEATURE_DIMS
    rwse_steps: int = 0
    rwse_norm: bool = False
    input_mlp: bool = False
    head_layers: int = 1
    molecule_features: int = 0
    atom_extra_features: int = 0
    grpe: GRPEOptions = field(default_factory=GRPEOptions)
    moire: MoireOptions = field(default_factory=MoireOptions)
    gradformer: GradformerOptions = field(default_factory=GradformerOptions)
    graphormer: GraphormerOptions = field(default_factory=GraphormerOptions)

    def __post_init__(self) -> None:
        for name in ("atom_feature_dims", "bond_feature_dims", "bond_radices"):
            values = getattr(self, name)
            _check(isinstance(values, (list, tuple)) and 0 < len(values) <= 64, f"{name} must be a list of 1 to 64 sizes, got {values!r}")
            for value in values:
                check_number(f"each of {name}", value, 1, MAX_CATEGORIES, integer=True)
            setattr(self, name, tuple(int(v) for v in values))
        check_number("num_layers", self.num_layers, 1, MAX_LAYERS, integer=True)
        check_number("hidden_dim", self.hidden_dim, 1, MAX_WIDTH, integer=True)
        check_number("num_heads", self.num_heads, 1, MAX_WIDTH, integer=True)
        if self.ffn_dim is not None:
            check_number("ffn_dim", self.ffn_dim, 1, 4 * MAX_WIDTH, integer=True)
        check_number("dropout", self.dropout, 0, 1, high_open=True)
        check_number("attn_dropout", self.attn_dropout, 0, 1, high_open=True)
        check_number("num_tasks", self.num_tasks, 1, MAX_TASKS, integer=True)
        check_number("rwse_steps", self.rwse_steps, 0, 1024, integer=True)
        check_number("molecule_features", self.molecule_features, 0, MAX_CATEGORIES, integer=True)
        check_number("atom_extra_features", self.atom_extra_features, 0, MAX_WIDTH, integer=True)
        _check(self.variant in VARIANTS, f"variant must be one of {VARIANTS}, got {self.variant!r}")
        _check(self.readout in READOUTS, f"readout must be one of {READOUTS}, got {self.readout!r}")
        _check(self.task in TASKS, f"task must be one of {TASKS}, got {self.task!r}")
        _check(self.hidden_dim % self.num_heads == 0, f"hidden_dim={self.hidden_dim} must be divisible by num_heads={self.num_heads}")
        _check(self.head_layers in (1, 2), f"head_layers must be 1 or 2, got {self.head_layers}")
        _check(self.atom_features in ("ogb", "canonical"), f"atom_features must be 'ogb' or 'canonical', got {self.atom_features!r}")
        _check(not (self.readout == "virtual" and not self.virtual_node), "readout 'virtual' needs virtual_node=True")
        _check(
            not (self.variant == "gradformer" and self.virtual_node),
            "Gradformer's GPS block uses no virtual node; set virtual_node=False and readout 'mean', 'sum' or 'max'",
        )
        _check(not (self.rwse_norm and not self.rwse_steps), "rwse_norm needs rwse_steps > 0")
        _check(
            not (self.variant == "gradformer" and self.gradformer.pe_gate and not self.rwse_steps),
            "gradformer.pe_gate gates by the random-walk encodings: set rwse_steps > 0",
        )

    @property
    def feedforward_dim(self) -> int:
        """The FFN width actually used."""
        if self.ffn_dim is not None:
            return self.ffn_dim
        return 2 * self.hidden_dim if self.variant == "gradformer" else self.hidden_dim

    @property
    def bond_vocab(self) -> BondVocabulary:
        """Bond vocabulary matching the relation graphs' ``bond`` classes."""
        return BondVocabulary(self.bond_radices)

    def to_dict(self) -> Dict[str, Any]:
        """Plain nested dict (JSON- and ``weights_only``-safe)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ModelConfig":
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        _reject_unknown(cls, data, "model config")
        kwargs = dict(data)
        for key, option_cls in _OPTION_TYPES.items():
            if isinstance(kwargs.get(key), dict):
                _reject_unknown(option_cls, kwargs[key], f"{key} options")
                kwargs[key] = option_cls(**kwargs[key])
        return cls(**kwargs)


_OPTION_TYPES = {"grpe": GRPEOptions, "moire": MoireOptions, "gradformer": GradformerOptions, "graphormer": GraphormerOptions}


def _reject_unknown(cls: type, data: Dict[str, Any], what: str) -> None:
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    _check(not unknown, f"unknown {what} keys: {sorted(unknown)}")
