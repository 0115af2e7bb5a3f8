"""Checkpoints: one file with weights, model config, featurization and relation settings, target
names and normalisation, and the package version. Written atomically; read with
``torch.load(..., weights_only=True)`` so opening a checkpoint cannot execute code."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Union

import torch

from ._version import __version__
from .atomic_io import atomic_torch_save
from .errors import CheckpointError, ConfigError
from .featurize import FeaturizerConfig
from .models import MoleculeModel, ModelConfig, build_model
from .relation_graph import RelationConfig

CHECKPOINT_KIND = "dgl_graphtx-checkpoint"
CHECKPOINT_VERSION = 1

PathLike = Union[str, Path]


@dataclass
class CheckpointMeta:
    """What, besides the weights, is needed to run a model on new molecules."""

    featurizer: FeaturizerConfig
    relation: RelationConfig
    target_names: List[str]
    extra: Dict[str, Any] = field(default_factory=dict)


class LoadedCheckpoint(NamedTuple):
    """A model restored from a checkpoint (in eval mode), with its metadata and package version;
    ``training_state`` is what a resumable checkpoint (``last.pt``) adds, else ``None``."""

    model: MoleculeModel
    meta: CheckpointMeta
    package_version: str
    training_state: Optional[Dict[str, Any]] = None


def save_checkpoint(path: PathLike, model: MoleculeModel, meta: CheckpointMeta,
                    training_state: Optional[Dict[str, Any]] = None) -> Path:
    """Write ``model`` and ``meta`` to ``path`` atomically; ``training_state`` (plain data, see
    :mod:`dgl_graphtx.training.resume`) makes the checkpoint resumable.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", hidden_dim=16, num_heads=2, num_layers=1)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
        ...                        CheckpointMeta(p.featurizer, p.relation, ["y"]))
        >>> load_checkpoint(path).meta.target_names
        ['y']
    """
    if len(meta.target_names) != model.config.num_tasks:
        raise ConfigError(f"{len(meta.target_names)} target names for a model with {model.config.num_tasks} tasks")
    payload = {
        "kind": CHECKPOINT_KIND,
        "version": CHECKPOINT_VERSION,
        "package_version": __version__,
        "model_config": model.config.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "featurizer": meta.featurizer.to_dict(),
        "relation": dataclasses.asdict(meta.relation),
        "target_names": list(meta.target_names),
        "extra": dict(meta.extra),
    }
    if training_state is not None:
        payload["training_state"] = training_state
    return atomic_torch_save(payload, path)


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device] = "cpu") -> LoadedCheckpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (safely: ``weights_only=True``).

    Raises :class:`CheckpointError` if the file is missing, corrupt, not a dgl_graphtx checkpoint,
    from a newer format, or its weights do not fit its own configuration.

    Example:
        >>> load_checkpoint("no/such/file.pt")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: checkpoint not found: no/such/file.pt
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # pickle, zip and torch errors all mean "not a readable checkpoint"
        raise CheckpointError(f"cannot read checkpoint {path}: corrupt or not a torch checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(payload, dict) or payload.get("kind") != CHECKPOINT_KIND:
        raise CheckpointError(f"{path} is not a dgl_graphtx checkpoint")
    if payload.get("version", 0) > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{path} was written by dgl_graphtx {payload.get('package_version')} in checkpoint format "
            f"{payload['version']}; this is {__version__} (format {CHECKPOINT_VERSION}); upgrade dgl_graphtx"
        )
    try:
        config = ModelConfig.from_dict(payload["model_config"])
        meta = CheckpointMeta(
            FeaturizerConfig(**payload["featurizer"]),
            RelationConfig(**payload["relation"]),
            list(payload["target_names"]),
            dict(payload.get("extra", {})),
        )
        model = build_model(config)
        model.load_state_dict(payload["state_dict"], strict=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:  # ConfigError is a ValueError
        raise CheckpointError(f"checkpoint {path} is inconsistent: {type(err).__name__}: {err}") from None
    model.eval()
    return LoadedCheckpoint(model.to(map_location), meta, str(payload.get("package_version")), payload.get("training_state"))
