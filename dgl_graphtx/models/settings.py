"""The settings every model has, whatever its attention variant (:class:`ModelSettings`), and the
bounds they are checked against. :class:`~dgl_graphtx.models.ModelConfig` adds one options section
per variant and checks a config against the variant registry."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ..errors import ConfigError
from ..featurize.ogb_features import OGB_ATOM_FEATURE_DIMS, OGB_BOND_FEATURE_DIMS
from ..relation_graph.bond_classes import BondVocabulary
from ..uncertainty.methods import head_methods, head_outputs
from ..validation import check_number
from .architectures import ARCHITECTURES, GPSOptions
from .levels import LevelOptions
from .molecule_sets import MoleculeSetOptions

#: The model that ``dgl-graphtx train`` (and so ``dgl-graphtx demo``) uses when none is named, with
#: its default preset and that preset's recipe: chosen by measurement on FreeSolv, Lipophilicity and
#: BBBP (docs/decisions/default-model.md, docs/training.md "The default model"). A bare
#: :class:`ModelSettings` is this variant, with settings it accepts (no virtual node).
DEFAULT_MODEL = "gradformer"

READOUTS = ("virtual", "mean", "max", "sum", "atomwise")
TASKS = ("regression", "classification", "multiclass")

#: Upper bounds on model sizes. They are far above any published configuration and keep a
#: damaged or hostile checkpoint from asking for terabytes or a million layers before any check.
MAX_LAYERS = 256
MAX_WIDTH = 16384
MAX_TASKS = 65536
MAX_CATEGORIES = 1 << 20


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _check_rows(settings: "ModelSettings") -> None:
    """What rows of several molecules and atom- or bond-level outputs allow of the rest."""
    several, levels = settings.molecules.several, settings.levels.any
    _check(not (several and (settings.atom_reference or settings.readout == "atomwise")),
           "a model of several molecules per row pools each molecule and combines the encodings: it takes no atom_reference "
           "and no atomwise readout")
    _check(not (several and levels), "atom- and bond-level targets belong to one molecule per row, not to rows of several: "
           "drop --atom-targets/--bond-targets or --smiles-cols")
    _check(not (levels and (settings.task != "regression" or settings.uncertainty_head != "none")),
           "atom- and bond-level targets are regression targets of a model without an uncertainty head")


@dataclass(frozen=True)
class ModelSettings:
    """The settings every model has: :class:`~dgl_graphtx.models.ModelConfig` adds one options
    section per variant and checks ``variant`` and the whole config against the variant registry.

    Args:
        variant: a name of :data:`~dgl_graphtx.models.variants.VARIANT_SPECS` (:data:`DEFAULT_MODEL` by default; ``grpe``,
            ``moire``, ``gradformer``, ``vanilla`` or ``graphormer``).
        num_layers, hidden_dim, num_heads: transformer size.
        ffn_dim: hidden width of the feed-forward sublayer (default ``hidden_dim``; Gradformer's
            GPS block uses ``2 * hidden_dim``).
        dropout, attn_dropout: dropout after sublayers / on attention weights.
        readout: ``virtual`` (the virtual node's output), ``mean`` (the default), ``max`` or ``sum`` pooling, or
            ``atomwise``: the head on every atom and its outputs summed (SchNet's per-atom
            contributions, extensive in the molecule's size by construction).
        virtual_node: whether the relation graphs carry a virtual node (with its own learned
            input embedding; off by default, as in ``RelationConfig``); must match the dataset's ``RelationConfig``.
        num_tasks, task: number of targets, ``regression``, (multi-task binary) ``classification``
            or ``multiclass`` (labels 0 .. ``num_classes - 1`` per target).
        num_classes: classes per target of a ``multiclass`` task (the head gives that many logits per target).
        atom_features: ``ogb`` (categorical, embedded) or ``canonical`` (dense, projected).
        atom_feature_dims, bond_feature_dims: category counts (``ogb``) or ``(width,)`` (``canonical``).
        bond_radices: radices of the relation graphs' bond classes.
        rwse_steps: width of the random-walk structural encoding in ``ndata["rwse"]`` (0: none).
        rwse_norm: BatchNorm the random-walk encodings before using them (Gradformer's
            ``pe_norm``).
        input_mlp: pass node inputs through a 2-layer MLP (MoireGT's input layers).
        head_layers: 1 (Linear) or 2 (MLP) output layers.
        uncertainty_head: ``none``, or an uncertainty method with a distribution head: ``mve``
            (a variance per target) or ``evidential`` (Normal-Inverse-Gamma parameters per
            target); see :mod:`dgl_graphtx.uncertainty.methods`.
        molecule_features: width of the molecule-level extra features (``ndata["mol_features"]``,
            see :mod:`dgl_graphtx.datasets.extra_features`) concatenated to the pooled embedding before the head.
        atom_extra_features: width of the atom-level extra features (``ndata["atom_extra"]``),
            projected and added to the atom encodings.
        atom_reference: add per-element reference values to the regression outputs (a sum over
            the atoms, fitted by least squares on the training targets before training and saved
            with the model; see :mod:`~dgl_graphtx.models.atom_reference`): the baseline of
            extensive targets such as energies, so that the network learns only the rest.
        kernel_references: molecules the fitted fingerprint kernel keeps (0: no kernel; set when it
            is fitted after training, see :mod:`~dgl_graphtx.models.kernel`), ``kernel_size``
            the width of its count fingerprints (``ndata["kernel_fp"]``), and
            ``kernel_probabilities`` whether its values are Platt-scaled to probabilities
            (classification kernels fitted since this setting; earlier ones blend raw values), and
            ``kernel_logit_blend`` whether the blend is in logits (classification kernels fitted
            since log-linear pooling; earlier ones blend probabilities), and ``kernel_segments``
            the bins of each count fingerprint side by side in them (empty: one fingerprint, as
            kernels fitted before several were).
        architecture: the model the attention runs in, ``"transformer"`` or ``"gps"`` (default
            ``None``: the variant's own, from the registry).
        gps: the GPS block's settings (local model over bonds, normalisation), used by the
            ``gps`` architecture.
        molecules: how a row of several molecules is read (count, shared or separate backbones,
            how their encodings combine; :mod:`~dgl_graphtx.models.molecule_sets`). One molecule by default.
        levels: the atom- and bond-level outputs (:mod:`~dgl_graphtx.models.levels`); with any,
            ``num_tasks`` may be 0 (no molecule-level target). None by default.

    Example:
        >>> ModelSettings(num_tasks=2, task="multiclass", num_classes=3).prediction_width
        6
    """

    variant: str = DEFAULT_MODEL
    num_layers: int = 4
    hidden_dim: int = 64
    num_heads: int = 8
    ffn_dim: Optional[int] = None
    dropout: float = 0.1
    attn_dropout: float = 0.1
    readout: str = "mean"
    virtual_node: bool = False
    num_tasks: int = 1
    task: str = "regression"
    num_classes: int = 2
    atom_features: str = "ogb"
    atom_feature_dims: Tuple[int, ...] = OGB_ATOM_FEATURE_DIMS
    bond_feature_dims: Tuple[int, ...] = OGB_BOND_FEATURE_DIMS
    bond_radices: Tuple[int, ...] = OGB_BOND_FEATURE_DIMS
    rwse_steps: int = 0
    rwse_norm: bool = False
    input_mlp: bool = False
    head_layers: int = 1
    uncertainty_head: str = "none"
    molecule_features: int = 0
    atom_extra_features: int = 0
    atom_reference: bool = False
    kernel_references: int = 0
    kernel_size: int = 2048
    kernel_probabilities: bool = False
    kernel_logit_blend: bool = False
    kernel_segments: Tuple[int, ...] = ()
    architecture: Optional[str] = None
    gps: GPSOptions = field(default_factory=GPSOptions)
    molecules: MoleculeSetOptions = field(default_factory=MoleculeSetOptions)
    levels: LevelOptions = field(default_factory=LevelOptions)

    @property
    def prediction_width(self) -> int:
        """Point outputs per molecule: ``num_tasks``, or ``num_tasks * num_classes`` logits (multiclass)."""
        return self.num_tasks * (self.num_classes if self.task == "multiclass" else 1)

    @property
    def output_width(self) -> int:
        """Outputs of the head: the point outputs, or all parameters of an uncertainty head's
        distribution (the point prediction first)."""
        return self.prediction_width * head_outputs(self.uncertainty_head)

    def __post_init__(self) -> None:
        for name in ("atom_feature_dims", "bond_feature_dims", "bond_radices"):
            values = getattr(self, name)
            _check(isinstance(values, (list, tuple)) and 0 < len(values) <= 64, f"{name} must be a list of 1 to 64 sizes, got {values!r}")
            for value in values:
                check_number(f"each of {name}", value, 1, MAX_CATEGORIES, integer=True)
            object.__setattr__(self, name, tuple(int(v) for v in values))
        check_number("num_layers", self.num_layers, 1, MAX_LAYERS, integer=True)
        check_number("hidden_dim", self.hidden_dim, 1, MAX_WIDTH, integer=True)
        check_number("num_heads", self.num_heads, 1, MAX_WIDTH, integer=True)
        if self.ffn_dim is not None:
            check_number("ffn_dim", self.ffn_dim, 1, 4 * MAX_WIDTH, integer=True)
        check_number("dropout", self.dropout, 0, 1, high_open=True)
        check_number("attn_dropout", self.attn_dropout, 0, 1, high_open=True)
        for name, section in (("molecules", MoleculeSetOptions), ("levels", LevelOptions)):  # given as a dict (to_dict's)
            if isinstance(getattr(self, name), dict):
                object.__setattr__(self, name, section(**getattr(self, name)))
        check_number("num_tasks", self.num_tasks, 0 if self.levels.any else 1, MAX_TASKS, integer=True)
        check_number("rwse_steps", self.rwse_steps, 0, 1024, integer=True)
        check_number("molecule_features", self.molecule_features, 0, MAX_CATEGORIES, integer=True)
        check_number("atom_extra_features", self.atom_extra_features, 0, MAX_WIDTH, integer=True)
        _check(self.readout in READOUTS, f"readout must be one of {READOUTS}, got {self.readout!r}")
        _check(self.task in TASKS, f"task must be one of {TASKS}, got {self.task!r}")
        check_number("num_classes", self.num_classes, 2, MAX_WIDTH, integer=True)
        _check(self.hidden_dim % self.num_heads == 0, f"hidden_dim={self.hidden_dim} must be divisible by num_heads={self.num_heads}")
        _check(self.head_layers in (1, 2), f"head_layers must be 1 or 2, got {self.head_layers}")
        _check(self.uncertainty_head == "none" or self.uncertainty_head in head_methods(),
               f"uncertainty_head must be 'none' or a method with a distribution head, one of {head_methods()}, "
               f"got {self.uncertainty_head!r}")
        _check(self.uncertainty_head == "none" or self.task == "regression",
               f"the {self.uncertainty_head} uncertainty head is for regression; use mc_dropout or an ensemble for classification")
        _check(self.atom_features in ("ogb", "canonical"), f"atom_features must be 'ogb' or 'canonical', got {self.atom_features!r}")
        _check(not (self.readout == "virtual" and not self.virtual_node), "readout 'virtual' needs virtual_node=True")
        _check(not (self.rwse_norm and not self.rwse_steps), "rwse_norm needs rwse_steps > 0")
        _check(not (self.atom_reference and self.task != "regression"), "atom_reference is for regression targets")
        check_number("kernel_references", self.kernel_references, 0, 1 << 24, integer=True)
        check_number("kernel_size", self.kernel_size, 1, 1 << 20, integer=True)
        _check(isinstance(self.kernel_segments, (list, tuple)) and len(self.kernel_segments) <= 16,
               f"kernel_segments must be a list of at most 16 sizes, got {self.kernel_segments!r}")
        for value in self.kernel_segments:
            check_number("each of kernel_segments", value, 1, 1 << 20, integer=True)
        object.__setattr__(self, "kernel_segments", tuple(int(v) for v in self.kernel_segments))
        _check(not self.kernel_segments or sum(self.kernel_segments) == self.kernel_size,
               f"kernel_segments {self.kernel_segments} must add up to kernel_size={self.kernel_size}")
        _check(not (self.kernel_references and self.task not in ("regression", "classification")),
               "the fingerprint kernel is for regression and binary classification, not multiclass targets")
        _check(not (self.kernel_probabilities and self.task != "classification"),
               "kernel_probabilities (Platt scaling of the fingerprint kernel) is for classification targets")
        _check(not (self.kernel_logit_blend and not self.kernel_probabilities),
               "kernel_logit_blend (the fingerprint kernel's blend in logits) needs kernel_probabilities")
        _check(not (self.readout == "atomwise" and (self.molecule_features or self.uncertainty_head != "none")),
               "the atomwise readout sums per-atom outputs: it takes no molecule-level features or uncertainty head")
        _check(self.architecture is None or self.architecture in ARCHITECTURES,
               f"architecture must be one of {ARCHITECTURES} (or None: the variant's own), got {self.architecture!r}")
        _check_rows(self)

    @property
    def bond_vocab(self) -> BondVocabulary:
        """Bond vocabulary matching the relation graphs' ``bond`` classes."""
        return BondVocabulary(self.bond_radices)

    def to_dict(self) -> Dict[str, Any]:
        """Plain nested dict (JSON- and ``weights_only``-safe)."""
        return dataclasses.asdict(self)
