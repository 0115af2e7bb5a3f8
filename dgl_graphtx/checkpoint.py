"""Checkpoints: one file with weights, model config, featurization and relation settings, target
names and normalisation, and the package version. Written atomically; read with
``torch.load(..., weights_only=True)`` so opening a checkpoint cannot execute code.

A SHA-256 digest of the whole content is stored at save time and verified at load, so damaged
files are refused rather than used. Metadata is validated against the model before anything is
allocated: sizes are bounded (see :data:`~dgl_graphtx.models.settings.MAX_LAYERS`), the model is
first built on PyTorch's ``meta`` device and its parameter shapes compared with the stored ones,
and target names and featurization settings must fit the model."""
from __future__ import annotations

import dataclasses
import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Union

import torch

from ._version import __version__
from .atomic_io import atomic_torch_save
from .errors import CheckpointError, ConfigError, DamagedFileError
from .featurize import FeaturizerConfig, MoleculeFeaturizer
from .models import MoleculeModel, ModelConfig, build_model, variant_spec
from .relation_graph import RelationConfig
from .saved_files import torch_load_problem, verified

CHECKPOINT_KIND = "dgl_graphtx-checkpoint"
CHECKPOINT_VERSION = 1
#: Featurization generation the weights were trained on: 2 = canonical atom order and CIP
#: chirality labels (1, implicit in older files: input atom order and RDKit's CW/CCW tags).
FEATURIZATION_VERSION = 2

PathLike = Union[str, Path]


@dataclass(frozen=True)
class CheckpointExtras:
    """What a checkpoint records about its training run, as plain data (tensors, lists, dicts):
    stored as the checkpoint's ``extra`` entry (:meth:`to_dict`), read back by :meth:`from_dict`.
    A field is ``None`` when the checkpoint does not record it (older files, or a run without it);
    keys this version does not know stay in ``other``, so saving a loaded checkpoint loses nothing.
    Change a field with :func:`dataclasses.replace`.

    Example:
        >>> extras = CheckpointExtras.from_dict({"epoch": 3, "added_later": {"a": 1}})
        >>> extras.epoch, extras.train_config, extras.other
        (3, None, {'added_later': {'a': 1}})
        >>> dataclasses.replace(extras, epoch=4).to_dict()
        {'epoch': 4, 'added_later': {'a': 1}}
    """

    #: How the data were split: a split name (``random``, ``scaffold``...) or ``predefined``.
    split: Optional[str] = None
    #: The train / valid / test fractions of the split.
    fractions: Optional[List[float]] = None
    #: The training data's record (:func:`~dgl_graphtx.datasets.data_record.training_data_record`).
    data: Optional[Dict[str, Any]] = None
    #: The training molecules' domain (:meth:`~dgl_graphtx.inference.Domain.to_dict`).
    domain: Optional[Dict[str, Any]] = None
    #: The run folder's identifier.
    run_id: Optional[str] = None
    #: Per classification target mapped from text classes: ``target``, ``negative``, ``positive``.
    class_labels: Optional[List[Dict[str, str]]] = None
    #: The uncertainty settings, with the ``calibration`` and ``calibrated_on`` record once calibrated.
    uncertainty: Optional[Dict[str, Any]] = None
    #: The extra features and their fitted scalers (:class:`~dgl_graphtx.datasets.extra_features.FittedExtraFeatures`).
    extra_features: Optional[Dict[str, Any]] = None
    #: The backbone fine-tuned from: ``source``, ``name``, ``sha256``, ``newly_initialised``.
    pretrained: Optional[Dict[str, Any]] = None
    #: A pretrained backbone's descriptor ``targets``, their ``scaler`` and the ``recipe``.
    pretraining: Optional[Dict[str, Any]] = None
    #: The training part's packed fingerprints (``[N, 256]`` uint8), for similarity-binned calibration.
    training_fingerprints: Optional[torch.Tensor] = None
    #: The epoch of these weights.
    epoch: Optional[int] = None
    #: The validation metrics of the best epoch so far.
    valid_metrics: Optional[Dict[str, float]] = None
    #: The run's training settings (``TrainConfig`` as a dict), compared on resumption.
    train_config: Optional[Dict[str, Any]] = None
    #: The columns holding each row's molecules and their mixture weights
    #: (:class:`~dgl_graphtx.datasets.molecule_columns.MoleculeColumns`), for a model of several molecules per row.
    molecule_columns: Optional[Dict[str, Any]] = None
    #: The atom- and bond-level targets and how they were read
    #: (:class:`~dgl_graphtx.datasets.level_targets.LevelTargets`), for a model with such targets.
    levels: Optional[Dict[str, Any]] = None
    #: Stored keys this version does not know, kept as they were.
    other: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> CheckpointExtras:
        """The record of a checkpoint's ``extra`` entry (a key stored as ``None`` reads as absent)."""
        if not isinstance(stored, Mapping):
            raise TypeError(f"extra must be a dict, got {type(stored).__name__}")
        known = {f.name for f in dataclasses.fields(cls)} - {"other"}
        return cls(**{k: v for k, v in stored.items() if k in known},
                   other={k: v for k, v in stored.items() if k not in known})

    def to_dict(self) -> Dict[str, Any]:
        """The checkpoint's ``extra`` entry: the recorded fields, then the unknown keys."""
        recorded = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "other"}
        return {**{k: v for k, v in recorded.items() if v is not None}, **self.other}


@dataclass
class CheckpointMeta:
    """What, besides the weights, is needed to run a model on new molecules. ``extra`` may be
    given as a plain dict (as before :class:`CheckpointExtras` existed); it is read into one.

    Example:
        >>> meta = CheckpointMeta(FeaturizerConfig(), RelationConfig(), ["y"], {"epoch": 2})
        >>> meta.extra.epoch
        2
    """

    featurizer: FeaturizerConfig
    relation: RelationConfig
    target_names: List[str]
    extra: CheckpointExtras = field(default_factory=CheckpointExtras)

    def __post_init__(self) -> None:
        if isinstance(self.extra, Mapping):
            self.extra = CheckpointExtras.from_dict(self.extra)


class LoadedCheckpoint(NamedTuple):
    """A model restored from a checkpoint (in eval mode), with its metadata and package version;
    ``training_state`` is what a resumable checkpoint (``last.pt``) adds, else ``None``."""

    model: MoleculeModel
    meta: CheckpointMeta
    package_version: str
    training_state: Optional[Dict[str, Any]] = None


def save_checkpoint(path: PathLike, model: MoleculeModel, meta: CheckpointMeta,
                    training_state: Optional[Dict[str, Any]] = None) -> Path:
    """Write ``model`` and ``meta`` to ``path`` atomically, with a content checksum;
    ``training_state`` (plain data, see :mod:`dgl_graphtx.training.resume`) makes the checkpoint
    resumable and is covered by the checksum too.

    Raises :class:`ConfigError` if the metadata does not fit the model, and
    :class:`CheckpointError` (writing nothing) if a weight is NaN or infinite.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", hidden_dim=16, num_heads=2, num_layers=1)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
        ...                        CheckpointMeta(p.featurizer, p.relation, ["y"]))
        >>> load_checkpoint(path).meta.target_names
        ['y']
    """
    validate_meta(model.config, meta)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise CheckpointError(f"refusing to write {path}: weight {bad[0]!r} holds NaN or inf values "
                              f"({len(bad)} tensor(s) affected); the model diverged")
    payload = {
        "kind": CHECKPOINT_KIND,
        "version": CHECKPOINT_VERSION,
        "package_version": __version__,
        "model_config": model.config.to_dict(),
        "state_dict": state,
        "featurizer": meta.featurizer.to_dict(),
        "relation": dataclasses.asdict(meta.relation),
        "target_names": list(meta.target_names),
        "extra": meta.extra.to_dict(),
        "featurization_version": FEATURIZATION_VERSION,
    }
    if training_state is not None:
        payload["training_state"] = training_state
    payload["checksum"] = content_checksum(payload)
    return atomic_torch_save(payload, path)


def content_checksum(payload: Dict[str, Any]) -> str:
    """``"sha256:<hex>"`` over every entry of ``payload`` except ``"checksum"``: tensors by dtype,
    shape and bytes, everything else by ``repr``, dict keys in sorted order.

    Example:
        >>> a = content_checksum({"w": torch.zeros(2), "names": ["y"]})
        >>> a == content_checksum({"names": ["y"], "w": torch.zeros(2)}), a == content_checksum({"w": torch.ones(2), "names": ["y"]})
        (True, False)
    """
    digest = hashlib.sha256()
    _feed(digest, {k: v for k, v in payload.items() if k != "checksum"})
    return "sha256:" + digest.hexdigest()


def _feed(digest: "hashlib._Hash", obj: Any) -> None:
    if isinstance(obj, dict):
        digest.update(b"{")
        for key in sorted(obj, key=repr):
            _feed(digest, key)
            _feed(digest, obj[key])
        digest.update(b"}")
    elif isinstance(obj, (list, tuple)):
        digest.update(b"[")
        for item in obj:
            _feed(digest, item)
        digest.update(b"]")
    elif isinstance(obj, torch.Tensor):
        data = obj.detach().cpu().contiguous().reshape(-1)
        digest.update(f"T{data.dtype}{tuple(obj.shape)}:".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    else:
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())


def validate_meta(config: ModelConfig, meta: CheckpointMeta) -> None:
    """Check that ``meta`` fits a model built from ``config``; raise :class:`ConfigError` naming the
    mismatch (target names: a list of distinct non-empty strings, one per output; featurizer and
    relation settings producing the inputs the model was built for).

    Example:
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla")
        >>> validate_meta(p.model, CheckpointMeta(p.featurizer, p.relation, ["a", "b"]))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: 2 target names ['a', 'b'] for a model with 1 output(s)
    """
    names = meta.target_names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError(f"target names must be a list of non-empty strings, got {names!r}")
    if len(names) != config.num_tasks:
        raise ConfigError(f"{len(names)} target names {list(names)} for a model with {config.num_tasks} output(s)")
    if len(set(names)) != len(names):
        raise ConfigError(f"target names must be distinct, got {list(names)}")
    if not isinstance(meta.featurizer, FeaturizerConfig) or not isinstance(meta.relation, RelationConfig):
        raise ConfigError("meta.featurizer / meta.relation must be a FeaturizerConfig / RelationConfig")
    if not isinstance(meta.extra, CheckpointExtras):
        raise ConfigError(f"meta.extra must be a CheckpointExtras (CheckpointExtras.from_dict reads a dict), "
                          f"got {type(meta.extra).__name__}")
    expected = {**MoleculeFeaturizer(meta.featurizer, meta.relation).model_inputs, "virtual_node": meta.relation.virtual_node}
    for key, value in expected.items():
        if getattr(config, key) != value:
            raise ConfigError(f"featurization does not match the model: model {key}={getattr(config, key)!r}, "
                              f"featurizer/relation give {value!r}")
    if config.rwse_steps and meta.featurizer.rwse_steps != config.rwse_steps:
        raise ConfigError(f"model expects rwse_steps={config.rwse_steps} but the featurizer has {meta.featurizer.rwse_steps}")
    levels = meta.extra.levels or {}
    for level, width in (("atom", config.levels.atom_tasks), ("bond", config.levels.bond_tasks)):
        level_names = levels.get(f"{level}_targets")
        if level_names is not None and len(level_names) != width:
            raise ConfigError(f"{len(level_names)} {level} target names {list(level_names)} for a model with {width} "
                              f"{level}-level output(s)")
    if variant_spec(config.variant).uses_coordinates(config, config.options) and not meta.featurizer.needs_coordinates:
        raise ConfigError(f"a {config.variant} model on 3-D distances needs a featurizer with coordinates")


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device] = "cpu") -> LoadedCheckpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (safely: ``weights_only=True``).

    Raises :class:`CheckpointError` if the file is missing, corrupt (checksum mismatch), not a
    dgl_graphtx checkpoint, from a newer format, or its metadata or weights do not fit its own
    configuration. Files from versions without checksums load with a warning.

    Example:
        >>> load_checkpoint("no/such/file.pt")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: checkpoint not found: no/such/file.pt
    """
    path = Path(path)
    try:
        if verified(path, "restore it from a backup or train again", optional=True) is None:
            raise CheckpointError(f"checkpoint not found: {path}")
    except DamagedFileError as err:  # changed or deleted since it was written (its folder's record says so)
        raise CheckpointError(str(err)) from None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle, zip, torch and OS errors all mean "not a readable checkpoint"
        raise CheckpointError(f"cannot read checkpoint {path}: {torch_load_problem(err)}") from None
    if not isinstance(payload, dict) or payload.get("kind") != CHECKPOINT_KIND:
        raise CheckpointError(f"{path} is not a dgl_graphtx checkpoint")
    version = payload.get("version", 0)
    if not isinstance(version, int) or version > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path} was written by dgl_graphtx {payload.get('package_version')} in checkpoint format "
            f"{version}; this is {__version__} (format {CHECKPOINT_VERSION}); upgrade dgl_graphtx"
        )
    stored = payload.get("checksum")
    if stored is None:
        warnings.warn(f"{path} has no content checksum (written by dgl_graphtx {payload.get('package_version')}); "
                      "it cannot be verified. Save it again to add one", stacklevel=2)
    elif stored != content_checksum(payload):
        raise CheckpointError(f"checkpoint {path} is damaged: its content does not match the checksum stored when it "
                              "was saved; restore it from a backup or train again")
    if payload.get("featurization_version", 1) < FEATURIZATION_VERSION:
        warnings.warn(f"{path} was trained on atom features in input order with RDKit's CW/CCW chirality tags; this "
                      "version uses canonical atom order and R/S labels, so predictions for chiral molecules can differ "
                      "from those at training time. Retrain to remove this warning", stacklevel=2)
    try:
        config = ModelConfig.from_dict(payload["model_config"])
        target_names = payload["target_names"]
        if not isinstance(target_names, (list, tuple)):
            raise ConfigError(f"target_names must be a list of names, got {type(target_names).__name__} {target_names!r}")
        meta = CheckpointMeta(
            FeaturizerConfig(**payload["featurizer"]),
            RelationConfig(**payload["relation"]),
            list(target_names),
            CheckpointExtras.from_dict(payload.get("extra", {})),
        )
        validate_meta(config, meta)
        state = payload["state_dict"]
        _check_shapes(config, state)
        model = build_model(config)
        model.load_state_dict(state, strict=True)
        kernel = getattr(model, "kernel", None)
        if kernel is not None:
            kernel.check_values()
    except (KeyError, TypeError, ValueError, RuntimeError) as err:  # ConfigError is a ValueError
        raise CheckpointError(f"checkpoint {path} is inconsistent: {type(err).__name__}: {err}") from None
    model.eval()
    return LoadedCheckpoint(model.to(map_location), meta, str(payload.get("package_version")), payload.get("training_state"))


def _check_shapes(config: ModelConfig, state: Any) -> None:
    """Compare the stored weights (names, shapes, integer or floating kinds) with a model built on the
    ``meta`` device (nothing allocated)."""
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError("state_dict must map names to tensors")
    with torch.device("meta"):
        expected = build_model(config).state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ConfigError(f"weights do not fit the model config: missing {missing[:3]}, unexpected {unexpected[:3]}")
    for name, value in expected.items():
        if tuple(state[name].shape) != tuple(value.shape):
            raise ConfigError(f"weights do not fit the model config: {name!r} has shape {tuple(state[name].shape)}, the model "
                              f"config needs {tuple(value.shape)}")
        stored = state[name].dtype
        if stored != value.dtype and not (stored.is_floating_point and value.dtype.is_floating_point):
            raise ConfigError(f"weights do not fit the model: {name!r} is stored as {stored}, the model holds {value.dtype} "
                              "(loading would convert its values)")
