"""Fine-tuning from a pretrained backbone (see :mod:`dgl_graphtx.inference.backbones`): the run
takes the backbone's architecture, featurizer and relation settings with a head of its own, and
the model starts from the backbone's weights."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from ..datasets import MoleculeDataset
from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from ..inference.backbones import PathLike, Pretrained, get_pretrained, is_shipped
from ..models import ModelConfig, MoleculeModel, Preset, get_preset
from ..relation_graph import RelationConfig
from .config import PresetChoice, RunConfig

#: Model settings a fine-tuning run chooses itself; everything else comes from the backbone.
HEAD_FIELDS = ("num_tasks", "task", "num_classes", "uncertainty_head", "head_layers", "molecule_features", "atom_extra_features",
               "dropout", "attn_dropout")


def _with_head(pretrained: Pretrained, model: ModelConfig) -> ModelConfig:
    """The backbone's model settings with the head settings (:data:`HEAD_FIELDS`) of ``model``."""
    return dataclasses.replace(pretrained.checkpoint.model.config, **{f: getattr(model, f) for f in HEAD_FIELDS})


def pretrained_preset(pretrained: Pretrained, base: Preset) -> Preset:
    """``base`` with the backbone's model architecture, featurizer and relation settings, which
    replace ``base``'s; the head settings (:data:`HEAD_FIELDS`) and the training recipe stay
    ``base``'s. (:func:`pretrained_run_config` refuses featurizer or relation settings a user
    chose that differ from the backbone's; here ``base``'s are simply replaced.)

    Example:
        >>> from dgl_graphtx.inference import get_pretrained
        >>> tuned = pretrained_preset(get_pretrained("gradformer-tiny-moses3k"), get_preset("vanilla", num_tasks=2))
        >>> tuned.model.variant, tuned.model.num_tasks
        ('gradformer', 2)
    """
    meta = pretrained.checkpoint.meta
    return dataclasses.replace(base, model=_with_head(pretrained, base.model), featurizer=meta.featurizer, relation=meta.relation)


def check_pretrained_settings(pretrained: Pretrained, featurizer: FeaturizerConfig, relation: RelationConfig,
                              defaults: Tuple[FeaturizerConfig, RelationConfig]) -> None:
    """One clear error when ``featurizer`` / ``relation`` were set (differ from ``defaults``) to
    values the backbone was not pretrained with."""
    meta = pretrained.checkpoint.meta
    for what, given, default, used in (("featurizer", featurizer, defaults[0], meta.featurizer),
                                       ("relation", relation, defaults[1], meta.relation)):
        if given != default and given != used:
            raise ConfigError(f"pretrained model {pretrained.source!r} was pretrained with {what} {used}, this run asks "
                              f"for {given}; drop the {what} settings (the pretrained model's are used)")


def pretrained_run_config(run: RunConfig, pretrained: Optional[Pretrained] = None) -> RunConfig:
    """A :class:`~dgl_graphtx.runs.config.RunConfig` with ``train.from_pretrained`` resolved: the
    backbone's architecture, featurizer and relation settings replace the run's (its head
    settings, :data:`HEAD_FIELDS`, stay), and ``from_pretrained`` becomes the shipped name or an
    absolute path, as config.yaml records it. Featurizer or relation settings the user changed
    from the preset's to values the backbone was not pretrained with are an error. ``pretrained``
    is the backbone when it is loaded already (else it is loaded here).

    Example:
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> run = resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k"])
        >>> tuned = pretrained_run_config(run)
        >>> tuned.model.variant, tuned.model.hidden_dim, tuned.model.num_tasks, tuned.train.from_pretrained
        ('gradformer', 32, 1, 'gradformer-tiny-moses3k')
    """
    source = run.train.from_pretrained
    if source is None:
        raise ConfigError("the run names no pretrained model to fine-tune: set train.from_pretrained (--from-pretrained)")
    pretrained = pretrained if pretrained is not None else get_pretrained(source)
    base = get_preset(run.preset.model, run.preset.name)
    check_pretrained_settings(pretrained, run.featurizer, run.relation, (base.featurizer, base.relation))
    meta = pretrained.checkpoint.meta
    model = _with_head(pretrained, run.model)
    train = dataclasses.replace(run.train, from_pretrained=source if is_shipped(source) else str(Path(source).resolve()))
    return dataclasses.replace(run, preset=PresetChoice(model.variant, None), model=model, featurizer=meta.featurizer,
                               relation=meta.relation, train=train)


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
