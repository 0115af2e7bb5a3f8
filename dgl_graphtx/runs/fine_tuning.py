"""Fine-tuning from a pretrained backbone (see :mod:`dgl_graphtx.inference.backbones`): the run
takes the backbone's architecture, featurizer and relation settings with a head of its own, and
the model starts from the backbone's weights."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Union

import torch

from ..datasets import MoleculeDataset
from ..errors import ConfigError
from ..inference.backbones import PathLike, Pretrained, get_pretrained, is_shipped
from ..models import ModelConfig, MoleculeModel, Preset, get_preset
from ..models.settings import DEFAULT_MODEL
from .config import PresetChoice, RunConfig

#: Model settings a fine-tuning run chooses itself; everything else comes from the backbone.
HEAD_FIELDS = ("num_tasks", "task", "num_classes", "uncertainty_head", "head_layers", "molecule_features", "atom_extra_features",
               "dropout", "attn_dropout", "molecules", "levels")


def _with_head(pretrained: Pretrained, model: ModelConfig) -> ModelConfig:
    """The backbone's model settings with the head settings (:data:`HEAD_FIELDS`) of ``model``."""
    return dataclasses.replace(pretrained.checkpoint.model.config, **{f: getattr(model, f) for f in HEAD_FIELDS})


def pretrained_preset(pretrained: Pretrained, base: Preset) -> Preset:
    """``base`` with the backbone's model architecture, featurizer and relation settings, which
    replace ``base``'s; the head settings (:data:`HEAD_FIELDS`) and the training recipe stay
    ``base``'s.

    Example:
        >>> from dgl_graphtx.inference import get_pretrained
        >>> tuned = pretrained_preset(get_pretrained("gradformer-tiny-moses3k"), get_preset("vanilla", num_tasks=2))
        >>> tuned.model.variant, tuned.model.num_tasks
        ('gradformer', 2)
    """
    meta = pretrained.checkpoint.meta
    return dataclasses.replace(base, model=_with_head(pretrained, base.model), featurizer=meta.featurizer, relation=meta.relation)


def _flat(settings: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A nested settings dict as ``{"a.b": value}``."""
    out: Dict[str, Any] = {}
    for name, value in settings.items():
        key = f"{prefix}{name}"
        out.update(_flat(value, key + ".") if isinstance(value, Mapping) else {key: value})
    return out


def check_fits_backbone(preset: Preset, pretrained: Pretrained) -> None:
    """One clear error when ``preset`` is not the architecture of the backbone it fine-tunes: its
    model variant, featurizer, relation settings or a model setting outside the head
    (:data:`HEAD_FIELDS`) differs from the backbone's, which fine-tuning keeps.

    Example:
        >>> from dgl_graphtx.inference import get_pretrained
        >>> backbone = get_pretrained("gradformer-tiny-moses3k")
        >>> check_fits_backbone(pretrained_preset(backbone, get_preset("vanilla")), backbone)
        >>> check_fits_backbone(get_preset("grpe"), backbone)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: pretrained model 'gradformer-tiny-moses3k' is a gradformer backbone, which fixes the model; ...
    """
    theirs, meta, source = pretrained.checkpoint.model.config, pretrained.checkpoint.meta, pretrained.source
    if preset.model.variant != theirs.variant:
        raise ConfigError(f"pretrained model {source!r} is a {theirs.variant} backbone, which fixes the model; this run asks "
                          f"for {preset.model.variant} (--model, preset.model): drop it")
    for what, given, used in (("featurizer", preset.featurizer, meta.featurizer), ("relation", preset.relation, meta.relation)):
        if given != used:
            raise ConfigError(f"pretrained model {source!r} was pretrained with {what} {used}, this run asks "
                              f"for {given}; drop the {what} settings (the pretrained model's are used)")
    mine = _flat(preset.model.to_dict())
    for key, value in _flat(theirs.to_dict()).items():
        if key.split(".")[0] not in HEAD_FIELDS and mine.get(key) != value:
            raise ConfigError(f"model.{key}={mine.get(key)} but pretrained model {source!r} has {key}={value}: fine-tuning keeps "
                              f"the backbone's architecture (the run sets only the head: {', '.join(HEAD_FIELDS)}); drop model.{key}")


def _changed(given: Mapping[str, Any], base: Mapping[str, Any]) -> Dict[str, Any]:
    """The settings of ``given`` (a nested dict) that differ from ``base``'s, as ``{"a.b": value}``."""
    preset = _flat(base)
    return {key: value for key, value in _flat(given).items() if value != preset.get(key)}


def _with(settings: Dict[str, Any], changes: Mapping[str, Any]) -> Dict[str, Any]:
    """``settings`` (a nested dict) with the dotted ``changes`` laid over it."""
    out = copy.deepcopy(settings)
    for key, value in changes.items():
        *path, name = key.split(".")
        node = out
        for part in path:
            node = node[part]
        node[name] = value
    return out


def pretrained_run_config(run: RunConfig, pretrained: Optional[Pretrained] = None) -> RunConfig:
    """A :class:`~dgl_graphtx.runs.config.RunConfig` with ``train.from_pretrained`` resolved: the
    backbone's architecture, featurizer and relation settings replace the run's where the run
    keeps its preset's (the head settings, :data:`HEAD_FIELDS`, stay the run's), and
    ``from_pretrained`` becomes the shipped name or an absolute path, as config.yaml records it.
    Settings the run changed from its preset's, and a model (other than the default) or preset
    it names, are kept, so that the run's plan refuses those that contradict the backbone
    (:func:`check_fits_backbone`) instead of dropping them. ``pretrained`` is the backbone when
    it is loaded already (else it is loaded here).

    Example:
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> run = resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k"])
        >>> tuned = pretrained_run_config(run)
        >>> tuned.model.variant, tuned.model.hidden_dim, tuned.model.num_tasks, tuned.train.from_pretrained
        ('gradformer', 32, 1, 'gradformer-tiny-moses3k')
        >>> pretrained_run_config(resolve_run_config(overrides=["train.from_pretrained=gradformer-tiny-moses3k",
        ...                                                     "model.num_layers=6"])).model.num_layers
        6
    """
    source = run.train.from_pretrained
    if source is None:
        raise ConfigError("the run names no pretrained model to fine-tune: set train.from_pretrained (--from-pretrained)")
    pretrained = pretrained if pretrained is not None else get_pretrained(source)
    meta = pretrained.checkpoint.meta
    train = dataclasses.replace(run.train, from_pretrained=source if is_shipped(source) else str(Path(source).resolve()))
    if run.preset.name is not None or run.preset.model not in (DEFAULT_MODEL, pretrained.checkpoint.model.config.variant):
        return dataclasses.replace(run, train=train)  # the run names a model of its own: kept whole, for its plan to compare
    base = get_preset(run.preset.model, run.preset.name)
    model = ModelConfig.from_dict(_with(_with_head(pretrained, run.model).to_dict(), _changed(run.model.to_dict(), base.model.to_dict())))
    featurizer = dataclasses.replace(meta.featurizer, **_changed(run.featurizer.to_dict(), base.featurizer.to_dict()))
    relation = dataclasses.replace(meta.relation, **_changed(dataclasses.asdict(run.relation), dataclasses.asdict(base.relation)))
    return dataclasses.replace(run, preset=PresetChoice(model.variant, None), model=model, featurizer=featurizer,
                               relation=relation, train=train)


def load_backbone(model: MoleculeModel, pretrained: Pretrained) -> List[str]:
    """Copy the backbone's weights into ``model``: everything but the head and the per-target
    values (target statistics, atom references); parts ``model`` has and the backbone lacks (e.g.
    an atom extra-feature encoder) keep their initialisation and are returned."""
    source = pretrained.checkpoint.model.state_dict()
    target = model.state_dict()
    skip = ("head.", "target_mean", "target_std", "atom_reference.")
    copied = {}
    for key, value in source.items():
        if key.startswith(skip):
            continue
        if key not in target or target[key].shape != value.shape:
            raise ConfigError(f"pretrained model {pretrained.source!r} does not fit this model at {key!r}; fine-tune "
                              "with the pretrained architecture (--from-pretrained sets it)")
        copied[key] = value
    with torch.no_grad():
        model.load_state_dict(copied, strict=False)
    return [key for key in target if key not in copied and not key.startswith(skip)]


def start_from_pretrained(model: MoleculeModel, backbone: Union[PathLike, Pretrained], dataset: MoleculeDataset) -> Dict[str, Any]:
    """Load ``backbone`` (a :class:`~dgl_graphtx.inference.backbones.Pretrained`, or its name or
    path) into ``model`` for fine-tuning on ``dataset``, after checking that the data was
    featurized as the backbone was pretrained; returns what the checkpoint records about it
    (source, name, SHA-256)."""
    pretrained = backbone if isinstance(backbone, Pretrained) else get_pretrained(backbone)
    meta = pretrained.checkpoint.meta
    dataset.check_featurized_as(meta.featurizer, meta.relation, f"pretrained model {pretrained.source!r}",
                                "featurize it with the pretrained model's settings", name="the fine-tuning data")
    fresh = load_backbone(model, pretrained)
    return {"source": pretrained.source, "name": pretrained.card.name, "sha256": pretrained.card.sha256,
            "newly_initialised": fresh}
