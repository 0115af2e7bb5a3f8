"""The model card of a pretrained backbone (``card.json`` beside its ``backbone.pt``): what it is,
how and on what it was pretrained, and the SHA-256 that loading checks the backbone against.
Read and checked once (:meth:`ModelCard.from_dict`: every field present and of its type); keys
this version does not know are kept, so writing a card read back gives the same JSON.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar

from ..errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class CardCorpus:
    """The corpus a backbone was pretrained on."""

    #: Its name (``MOSES``...).
    name: str
    #: The file it was read from (the name, without its folder).
    source: str
    #: The file's SHA-256.
    sha256: str
    #: Molecules drawn at random from it, or ``None`` for all.
    subset: Optional[int]
    #: The seed of that draw.
    subset_seed: int
    #: Molecules pretrained on, and how many of them were trained on and held out.
    molecules: int
    train: int
    heldout: int
    #: The corpus's licence.
    licence: str
    #: Keys this version does not know, kept as they were.
    other: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class CardTargets:
    """The descriptors a backbone learned to predict."""

    #: Their generator (``rdkit2d``).
    generator: str
    #: How many, and their names in output order.
    count: int
    names: List[str]
    #: How they were scaled, in words.
    normalisation: str
    #: Keys this version does not know, kept as they were.
    other: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ModelCard:
    """A pretrained backbone's model card, field for field as ``card.json`` holds it.

    Example:
        >>> from dgl_graphtx.inference.backbones import list_pretrained
        >>> card = next(c for c in list_pretrained() if c.name == "gradformer-tiny-moses3k")
        >>> card.variant, card.corpus.name, card.targets.generator, ModelCard.from_dict(card.to_dict()) == card
        ('gradformer', 'MOSES', 'rdkit2d', True)
    """

    #: The backbone's name and model variant.
    name: str
    variant: str
    #: Its model configuration (:meth:`~dgl_graphtx.models.ModelConfig.to_dict`) and parameter count.
    architecture: Dict[str, Any]
    parameters: int
    corpus: CardCorpus
    targets: CardTargets
    #: The pretraining settings (``pretrain``) and training settings (``train``).
    recipe: Dict[str, Any]
    #: Epochs trained and the one kept.
    epochs: int
    best_epoch: int
    #: Seconds of training and of computing the descriptors.
    wall_time_s: float
    descriptor_time_s: float
    #: Where it was trained, in words.
    hardware: str
    #: Held-out fit of the descriptors (``None`` where undefined) and how many descriptors it is defined for.
    heldout_r2: Optional[float]
    heldout_rmse: Optional[float]
    heldout_r2_descriptors: int
    #: Held-out share of masked atoms whose element the backbone told (masked-atom objectives; ``None`` otherwise).
    heldout_element_accuracy: Optional[float] = None
    #: Versions of dgl_graphtx and torch, and the command that made it.
    library_version: str
    torch_version: str
    created_with: str
    #: Free text about the backbone (absent from the earliest cards).
    notes: str = ""
    #: SHA-256 of ``backbone.pt``.
    sha256: str
    #: Keys this version does not know, kept as they were.
    other: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, stored: Any, source: str = "the model card") -> ModelCard:
        """The card ``stored`` (parsed JSON) holds; one :class:`ConfigError` starting with
        ``source`` when it is not an object, lacks a field or holds one of another type.

        Example:
            >>> ModelCard.from_dict({"name": "m", "variant": "grpe"})  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            dgl_graphtx.errors.ConfigError: the model card lacks 'architecture', 'parameters', ..., 'sha256'
            >>> from dgl_graphtx.inference.backbones import list_pretrained
            >>> card = next(c for c in list_pretrained() if c.name == "gradformer-tiny-moses3k").to_dict()
            >>> ModelCard.from_dict({**card, "sha256": None})
            Traceback (most recent call last):
            ...
            dgl_graphtx.errors.ConfigError: the model card's 'sha256' should be text, it holds None
        """
        values = _record_values(cls, stored, source, "")
        return cls(**{**values, "corpus": CardCorpus(**_record_values(CardCorpus, values["corpus"], source, "corpus.")),
                      "targets": CardTargets(**_record_values(CardTargets, values["targets"], source, "targets."))})

    def to_dict(self) -> Dict[str, Any]:
        """The card as ``card.json`` holds it, keys in the order pretraining writes them."""
        return _plain(self)


#: Card fields written only where set (a descriptor-only backbone has no masked-atom accuracy).
OPTIONAL_FIELDS = ("heldout_element_accuracy",)

#: A record of a model card: the card, its corpus or its targets.
CardPart = TypeVar("CardPart", CardCorpus, CardTargets, ModelCard)


def _record_values(cls: Type[CardPart], stored: Any, source: str, prefix: str) -> Dict[str, Any]:
    """Keyword arguments of ``cls`` from ``stored``: its fields, and the other keys as ``other``."""
    if not isinstance(stored, dict):
        where = f"'s {prefix.rstrip('.')!r}" if prefix else ""
        raise ConfigError(f"{source}{where} is not a JSON object (it holds a {type(stored).__name__})")
    fields = dataclasses.fields(cls)
    missing = [f"{prefix}{f.name}" for f in fields if f.name not in stored
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{source} lacks {', '.join(repr(name) for name in missing)}")
    known = {f.name for f in fields} - {"other"}
    hints = typing.get_type_hints(cls)
    for name in sorted(known & set(stored)):
        expected = hints[name]
        if not dataclasses.is_dataclass(expected) and not _holds(expected, stored[name]):  # records: read as records
            raise ConfigError(f"{source}'s {prefix + name!r} should be {_TYPE_WORDS.get(expected, 'an object')}, it holds {stored[name]!r}")
    return {**{k: v for k, v in stored.items() if k in known}, "other": {k: v for k, v in stored.items() if k not in known}}


#: The types of card fields, in words.
_TYPE_WORDS: Dict[Any, str] = {str: "text", int: "a whole number", float: "a number", Optional[float]: "a number or null",
                               Optional[int]: "a whole number or null", List[str]: "a list of text", Dict[str, Any]: "an object"}


def _holds(expected: Any, value: Any) -> bool:
    """Whether the JSON ``value`` is of the card field type ``expected``."""
    if expected in (Optional[float], Optional[int]):
        return value is None or _holds(typing.get_args(expected)[0], value)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is str:
        return isinstance(value, str)
    if expected == List[str]:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, dict)  # the free-form objects


def _plain(record: Any) -> Dict[str, Any]:
    """A card record as JSON-ready data: its fields in order (records nested as dicts), then
    ``other``; fields that only some backbones have (:data:`OPTIONAL_FIELDS`) only where they are set."""
    values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)
              if f.name != "other" and not (f.name in OPTIONAL_FIELDS and getattr(record, f.name) is None)}
    return {**{k: _plain(v) if dataclasses.is_dataclass(v) else v for k, v in values.items()}, **record.other}
