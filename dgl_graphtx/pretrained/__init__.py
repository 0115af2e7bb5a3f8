"""Pretrained backbones shipped inside the package (``dgl_graphtx/pretrained/<name>/``: ``backbone.pt``
and its model card ``card.json``), or written by ``dgl-graphtx pretrain``; loaded offline with
``weights_only=True`` after checking the file's SHA-256 against the card; and the fine-tuning
helpers that put a new head on them.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import torch

from ..checkpoint import LoadedCheckpoint, load_checkpoint
from ..errors import CheckpointError, ConfigError
from ..featurize import FeaturizerConfig
from ..models import MoleculeModel, Preset
from ..relation_graph import RelationConfig

PathLike = Union[str, Path]

#: Folder of the shipped pretrained models.
PRETRAINED_DIR = Path(__file__).resolve().parent
BACKBONE_FILE = "backbone.pt"
CARD_FILE = "card.json"

#: Model settings a fine-tuning run chooses itself; everything else comes from the backbone.
HEAD_FIELDS = ("num_tasks", "task", "num_classes", "uncertainty_head", "head_layers", "molecule_features", "atom_extra_features",
               "dropout", "attn_dropout")


class Pretrained(NamedTuple):
    """A pretrained backbone: its checkpoint, model card, file and the name or path it was asked by."""

    checkpoint: LoadedCheckpoint
    card: Dict[str, Any]
    path: Path
    source: str


def file_sha256(path: PathLike) -> str:
    """SHA-256 hex digest of a file's bytes.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> _ = p.write_bytes(b"abc")
        >>> file_sha256(p)[:16]
        'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def list_pretrained() -> List[Dict[str, Any]]:
    """The model cards of the shipped pretrained models, by name.

    Example:
        >>> all(card["name"] for card in list_pretrained())
        True
    """
    return [json.loads((folder / CARD_FILE).read_text()) for folder in sorted(PRETRAINED_DIR.iterdir())
            if (folder / CARD_FILE).is_file() and (folder / BACKBONE_FILE).is_file()]


def _locate(name_or_path: PathLike) -> Tuple[Path, Path]:
    """(backbone file, card file) of a shipped name, a folder holding both, or a backbone file."""
    text = str(name_or_path)
    shipped = PRETRAINED_DIR / text
    if "/" not in text and (shipped / CARD_FILE).is_file():
        return shipped / BACKBONE_FILE, shipped / CARD_FILE
    path = Path(text)
    if path.is_dir():
        return path / BACKBONE_FILE, path / CARD_FILE
    if path.is_file():
        return path, path.with_name(CARD_FILE)
    names = [card["name"] for card in list_pretrained()]
    raise ConfigError(f"no pretrained model {text!r}: give one of {names} (see 'dgl-graphtx pretrained') or the "
                      "folder / backbone.pt written by 'dgl-graphtx pretrain'")


def is_pretrained_reference(name_or_path: PathLike) -> bool:
    """Whether ``name_or_path`` names a pretrained backbone rather than a trained checkpoint: a
    shipped name, or a folder written by ``dgl-graphtx pretrain`` (it holds ``backbone.pt``).

    Example:
        >>> is_pretrained_reference("gradformer-tiny-moses3k"), is_pretrained_reference("runs/x/best.pt")
        (True, False)
    """
    text = str(name_or_path)
    if "/" not in text and (PRETRAINED_DIR / text / CARD_FILE).is_file():
        return True
    path = Path(text)
    return path.is_dir() and (path / BACKBONE_FILE).is_file()


def get_pretrained(name_or_path: PathLike) -> Pretrained:
    """Load a pretrained backbone by name (``dgl-graphtx pretrained`` lists them) or path, after
    checking its SHA-256 against its model card; loads with ``weights_only=True``, offline.

    Example:
        >>> get_pretrained("no-such-model")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: no pretrained model 'no-such-model': give one of [...] (see 'dgl-graphtx pretrained') or the folder / backbone.pt written by 'dgl-graphtx pretrain'
    """
    backbone, card_path = _locate(name_or_path)
    if not backbone.is_file():
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: {backbone} is missing")
    if not card_path.is_file():
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: its model card {card_path} is missing; "
                          "a backbone without a card cannot be checked")
    card = json.loads(card_path.read_text())
    actual = file_sha256(backbone)
    if actual != card.get("sha256"):
        raise CheckpointError(f"pretrained model {str(name_or_path)!r}: {backbone} has SHA-256 {actual[:12]}..., its card "
                              f"says {str(card.get('sha256'))[:12]}...; the file is damaged or replaced: reinstall "
                              "dgl_graphtx or re-run 'dgl-graphtx pretrain'")
    return Pretrained(load_checkpoint(backbone), card, backbone, str(name_or_path))


def pretrained_preset(pretrained: Pretrained, base: Preset) -> Preset:
    """``base`` with the backbone's model architecture, featurizer and relation settings; the
    head settings (:data:`HEAD_FIELDS`) and the training recipe stay ``base``'s.

    Raises :class:`ConfigError` when ``base`` asks for other featurizer or relation settings than
    the backbone was pretrained with and they differ from its model's defaults (what a user set).
    """
    meta = pretrained.checkpoint.meta
    model = dataclasses.replace(pretrained.checkpoint.model.config, **{f: getattr(base.model, f) for f in HEAD_FIELDS})
    return dataclasses.replace(base, model=model, featurizer=meta.featurizer, relation=meta.relation)


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


def pretrained_run_config(run: Any) -> Any:
    """A :class:`~dgl_graphtx.run_config.RunConfig` with ``train.from_pretrained`` resolved: the
    backbone's architecture, featurizer and relation settings replace the run's (its head
    settings, :data:`HEAD_FIELDS`, stay), and ``from_pretrained`` becomes the shipped name or an
    absolute path, as config.yaml records it. Featurizer or relation settings the user changed
    from the preset's to values the backbone was not pretrained with are an error."""
    from ..models import get_preset
    from ..run_config import PresetChoice

    pretrained = get_pretrained(run.train.from_pretrained)
    base = get_preset(run.preset.model, run.preset.name)
    check_pretrained_settings(pretrained, run.featurizer, run.relation, (base.featurizer, base.relation))
    meta = pretrained.checkpoint.meta
    model = dataclasses.replace(pretrained.checkpoint.model.config, **{f: getattr(run.model, f) for f in HEAD_FIELDS})
    text = str(run.train.from_pretrained)
    shipped = "/" not in text and (PRETRAINED_DIR / text / CARD_FILE).is_file()
    train = dataclasses.replace(run.train, from_pretrained=text if shipped else str(Path(text).resolve()))
    return dataclasses.replace(run, preset=PresetChoice(model.variant, None), model=model, featurizer=meta.featurizer,
                               relation=meta.relation, train=train)


def load_backbone(model: MoleculeModel, pretrained: Pretrained) -> List[str]:
    """Copy the backbone's weights into ``model``: everything but the head and the per-target
    values (target statistics, atom references); parts ``model`` has and the backbone lacks (e.g. an atom extra-feature encoder)
    keep their initialisation and are returned."""
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


def start_from_pretrained(model: MoleculeModel, name_or_path: PathLike, dataset: Any) -> Dict[str, Any]:
    """Load the backbone ``name_or_path`` into ``model`` for fine-tuning on ``dataset``, after
    checking that the data was featurized as the backbone was pretrained; returns what the
    checkpoint records about it (source, name, SHA-256)."""
    pretrained = get_pretrained(name_or_path)
    meta = pretrained.checkpoint.meta
    for what, used, needed in (("featurizer", dataset.featurizer.config, meta.featurizer), ("relation", dataset.relation, meta.relation)):
        if used != needed:
            raise ConfigError(f"pretrained model {pretrained.source!r} needs {what} {needed}, the fine-tuning data was "
                              f"featurized with {used}; featurize it with the pretrained model's settings")
    fresh = load_backbone(model, pretrained)
    return {"source": pretrained.source, "name": pretrained.card.get("name"), "sha256": pretrained.card.get("sha256"),
            "newly_initialised": fresh}


def describe(card: Dict[str, Any]) -> str:
    """One line about a pretrained model.

    Example:
        >>> describe({"name": "m", "variant": "grpe", "parameters": 1000, "corpus": {"name": "MOSES", "molecules": 10},
        ...           "heldout_r2": 0.5, "epochs": 2})
        'm: grpe, 1,000 parameters, pretrained on 10 molecules of MOSES for 2 epochs, held-out descriptor R2 0.500'
    """
    corpus = card.get("corpus", {})
    return (f"{card['name']}: {card.get('variant')}, {card.get('parameters', 0):,} parameters, pretrained on "
            f"{corpus.get('molecules', 0):,} molecules of {corpus.get('name')} for {card.get('epochs')} epochs, "
            f"held-out descriptor R2 {_number(card.get('heldout_r2'))}")


def _number(value: Optional[float]) -> str:
    return "undefined" if value is None else f"{value:.3f}"
