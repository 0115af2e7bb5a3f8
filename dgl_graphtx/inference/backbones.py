"""Pretrained backbones: those shipped inside the package (``dgl_graphtx/pretrained/<name>/``:
``backbone.pt`` and its model card ``card.json``) and those written by ``dgl-graphtx pretrain``;
found by name or path and loaded offline with ``weights_only=True`` after checking the file's
SHA-256 against the card. Fine-tuning one is :mod:`dgl_graphtx.runs.fine_tuning`'s part.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple, Union

from ..checkpoint import LoadedCheckpoint, load_checkpoint
from ..checksums import file_sha256
from ..errors import CheckpointError, ConfigError
from ..saved_files import verified
from .model_card import ModelCard

PathLike = Union[str, Path]

#: Folder of the shipped pretrained models (package data: one folder per model).
PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"
BACKBONE_FILE = "backbone.pt"
CARD_FILE = "card.json"


class Pretrained(NamedTuple):
    """A pretrained backbone: its checkpoint, model card, file and the name or path it was asked by."""

    checkpoint: LoadedCheckpoint
    card: ModelCard
    path: Path
    source: str


def list_pretrained() -> List[ModelCard]:
    """The model cards of the shipped pretrained models, by name.

    Example:
        >>> [card.name for card in list_pretrained()]
        ['gradformer-moses500k', 'gradformer-moses50k', 'gradformer-tiny-moses3k', 'grpe-tiny-moses20k']
    """
    return [read_card(folder / CARD_FILE, folder.name) for folder in sorted(PRETRAINED_DIR.iterdir())
            if (folder / CARD_FILE).is_file() and (folder / BACKBONE_FILE).is_file()]


def is_shipped(name_or_path: PathLike) -> bool:
    """Whether ``name_or_path`` is the name of a pretrained model shipped in the package.

    Example:
        >>> is_shipped("gradformer-tiny-moses3k"), is_shipped("runs/pretrained")
        (True, False)
    """
    text = str(name_or_path)
    return "/" not in text and (PRETRAINED_DIR / text / CARD_FILE).is_file()


def _locate(name_or_path: PathLike) -> Tuple[Path, Path]:
    """(backbone file, card file) of a shipped name, a folder holding both, or a backbone file."""
    if is_shipped(name_or_path):
        shipped = PRETRAINED_DIR / str(name_or_path)
        return shipped / BACKBONE_FILE, shipped / CARD_FILE
    text = str(name_or_path)
    path = Path(text)
    if path.is_dir():
        return path / BACKBONE_FILE, path / CARD_FILE
    if path.is_file():
        return path, path.with_name(CARD_FILE)
    names = [card.name for card in list_pretrained()]
    raise ConfigError(f"no pretrained model {text!r}: give one of {names} (see 'dgl-graphtx pretrained') or the "
                      "folder / backbone.pt written by 'dgl-graphtx pretrain'")


def is_pretrained_reference(name_or_path: PathLike) -> bool:
    """Whether ``name_or_path`` names a pretrained backbone rather than a trained checkpoint: a
    shipped name, or a folder written by ``dgl-graphtx pretrain`` (it holds ``backbone.pt``).

    Example:
        >>> is_pretrained_reference("gradformer-tiny-moses3k"), is_pretrained_reference("runs/x/best.pt")
        (True, False)
    """
    path = Path(name_or_path)
    return is_shipped(name_or_path) or (path.is_dir() and (path / BACKBONE_FILE).is_file())


def get_pretrained(name_or_path: PathLike) -> Pretrained:
    """Load a pretrained backbone by name (``dgl-graphtx pretrained`` lists them) or path, after
    checking its SHA-256 against its model card; loads with ``weights_only=True``, offline.

    Example:
        >>> get_pretrained("no-such-model")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: no pretrained model 'no-such-model': give one of [...] (see 'dgl-graphtx pretrained') or the ...
    """
    backbone, card_path = _locate(name_or_path)
    if not backbone.is_file():
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: {backbone} is missing")
    if not card_path.is_file():
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: its model card {card_path} is missing; "
                          "a backbone without a card cannot be checked")
    card = read_card(card_path, name_or_path)
    actual = file_sha256(backbone)
    if actual != card.sha256 and backbone.name != BACKBONE_FILE:  # best.pt or last.pt of a pretraining folder, say
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: {backbone} is not the backbone its card {card_path} "
                          f"describes; give the folder {backbone.parent} or its {BACKBONE_FILE}")
    if actual != card.sha256:
        raise CheckpointError(f"pretrained model {str(name_or_path)!r}: {backbone} has SHA-256 {actual[:12]}..., its card "
                              f"says {card.sha256[:12]}...; the file is damaged or replaced: reinstall "
                              "dgl_graphtx or re-run 'dgl-graphtx pretrain'")
    return Pretrained(load_checkpoint(backbone), card, backbone, str(name_or_path))


def read_card(path: Path, name_or_path: PathLike) -> ModelCard:
    """The model card at ``path`` of the backbone asked for as ``name_or_path``, or one
    :class:`ConfigError` saying what is wrong with it (not JSON, not an object, a field missing).

    Example:
        >>> import tempfile, pathlib
        >>> card = pathlib.Path(tempfile.mkdtemp()) / "card.json"
        >>> _ = card.write_text("{")
        >>> read_card(card, "mine")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: pretrained model 'mine': its model card ... is not valid JSON (line 1, column 2: Expecting ...
    """
    fix = "restore it or re-run 'dgl-graphtx pretrain'"
    verified(path, fix)  # against the record of the folder pretraining wrote
    try:
        card = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: its model card {path} is not valid JSON "
                          f"(line {err.lineno}, column {err.colno}: {err.msg}); {fix}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"pretrained model {str(name_or_path)!r}: its model card {path} is not text; {fix}") from None
    try:
        return ModelCard.from_dict(card, f"pretrained model {str(name_or_path)!r}: its model card {path}")
    except ConfigError as err:
        raise ConfigError(f"{err}; {fix}") from None


def describe(card: ModelCard) -> str:
    """One line about a pretrained model.

    Example:
        >>> print(describe(read_card(PRETRAINED_DIR / "gradformer-tiny-moses3k" / CARD_FILE, "gradformer-tiny-moses3k")))
        ... # doctest: +NORMALIZE_WHITESPACE
        gradformer-tiny-moses3k: gradformer, 35,069 parameters, pretrained on 3,000 molecules of MOSES for 40 epochs,
        held-out descriptor R2 0.574
    """
    return f"{card.name}: {_facts(card)}"


def describe_loaded(pretrained: Pretrained) -> str:
    """One line about a loaded backbone: what it was asked by, its checked hash and its card.

    Example:
        >>> describe_loaded(get_pretrained("gradformer-tiny-moses3k"))  # doctest: +ELLIPSIS
        'pretrained backbone gradformer-tiny-moses3k (SHA-256 ..., as its card says): gradformer, ... parameters, pretrained on ...'
    """
    sha = pretrained.card.sha256[:12]
    return f"pretrained backbone {pretrained.source} (SHA-256 {sha}, as its card says): {_facts(pretrained.card)}"


def _facts(card: ModelCard) -> str:
    objective = card.recipe.get("pretrain", {}).get("objective", "descriptors")
    facts = (f"{card.variant}, {card.parameters:,} parameters, pretrained on {card.corpus.molecules:,} molecules of "
             f"{card.corpus.name} for {card.epochs} epochs")
    if objective != "descriptors":
        facts += f" ({objective} objective), held-out masked-atom accuracy {_number(card.heldout_element_accuracy)}"
    return f"{facts}, held-out descriptor R2 {_number(card.heldout_r2)}" + (" (probe)" if objective == "atoms" else "")


def _number(value: Optional[float]) -> str:
    return "undefined" if value is None else f"{value:.3f}"
