"""Dataclass settings from files and ``--set``: the generic layer under
:mod:`dgl_graphtx.runs.config`. Reads TOML/YAML files of sections, parses ``section.field=value``
items, checks values against the fields of dataclasses and coerces them to the field types, and
merges layers of settings.
"""
from __future__ import annotations

import dataclasses
import sys
import typing
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import yaml

from ..errors import ConfigError

PathLike = Union[str, Path]


def plain(value: Any) -> Any:
    """``value`` with tuples as lists, for YAML."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def read_settings_file(path: PathLike, sections: Sequence[str]) -> Dict[str, Any]:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) settings file into a nested dict whose
    top-level keys must be among ``sections``.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.yaml"
        >>> _ = p.write_text("train:\\n  epochs: 3\\n")
        >>> read_settings_file(p, ["train"])
        {'train': {'epochs': 3}}
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    text = path.read_text()
    try:
        if suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:
                try:
                    import tomli as tomllib
                except ModuleNotFoundError:
                    raise ConfigError(f"reading {path} needs Python >= 3.11 or the 'tomli' package; or use YAML") from None
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            raise ConfigError(f"config file {path} must end in .toml, .yaml or .yml")
    except (ValueError, yaml.YAMLError) as err:  # tomllib.TOMLDecodeError is a ValueError
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(f"cannot parse config file {path}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections {tuple(sections)}")
    unknown = sorted(set(data) - set(sections))
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown} in {path}; sections are {list(sections)}")
    return data


def field_types(cls: type) -> Dict[str, Any]:
    """The resolved type hints of the fields of dataclass ``cls``."""
    return typing.get_type_hints(cls)


def describe_value(value: Any) -> str:
    """``value`` as an error message shows it, with its kind when that is what is wrong.

    Example:
        >>> describe_value(None), describe_value([1, 2]), describe_value("x")
        ('an empty value', 'a list [1, 2]', "'x'")
    """
    if value is None:
        return "an empty value"
    if isinstance(value, (list, tuple)):
        return f"a list {list(value)!r}"
    if isinstance(value, Mapping):
        return f"a mapping {dict(value)!r}"
    return repr(value)


def expected_type(hint: Any) -> str:
    """What a field of type ``hint`` must be, in words.

    Example:
        >>> expected_type(Optional[int]), expected_type(Tuple[float, float, float]), expected_type(Tuple[str, ...])
        ('an integer or empty', 'a list of 3 numbers', 'a list of text')
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        options = [a for a in args if a is not type(None)]
        words = " or ".join(expected_type(a) for a in options)
        return f"{words} or empty" if type(None) in args else words
    if origin in (tuple, list):
        fixed = origin is tuple and len(args) > 1 and args[1] is not Ellipsis
        element = expected_type(args[0] if args else str)
        plural = {"a number": "numbers", "an integer": "integers", "text": "text", "true or false": "true/false values"}
        return f"a list of {len(args)} {plural.get(element, element)}" if fixed else f"a list of {plural.get(element, element)}"
    return {bool: "true or false", int: "an integer", float: "a number", str: "text"}.get(hint, getattr(hint, "__name__", str(hint)))


def coerce(value: Any, hint: Any, key: str, origin: str = "") -> Any:
    """``value`` (from a file, or text from ``--set``) converted to the field type ``hint``; a
    value of another type is a :class:`ConfigError` naming ``key``, the expected type and
    ``origin`` (the file, or ``--set``).

    Example:
        >>> coerce("3", int, "train.epochs"), coerce("a, b", Tuple[str, ...], "data.targets")
        (3, ('a', 'b'))
        >>> coerce(None, float, "train.lr", "run.yaml")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: train.lr must be a number, got an empty value (in run.yaml)
    """
    converted = _converted(value, hint)
    if converted is _WRONG:
        where = f" (in {origin})" if origin else ""
        raise ConfigError(f"{key} must be {expected_type(hint)}, got {describe_value(value)}{where}")
    return converted


#: What :func:`_converted` returns for a value that does not fit the type.
_WRONG = object()
_EMPTY_WORDS = ("none", "null")


def _is_empty_text(value: Any) -> bool:
    """Whether ``value`` is the text of an empty value: nothing, ``none`` or ``null`` (whitespace
    alone is a value: a tab delimiter)."""
    return isinstance(value, str) and (value == "" or value.strip().lower() in _EMPTY_WORDS)


def _converted(value: Any, hint: Any) -> Any:
    """``value`` as type ``hint``, or :data:`_WRONG`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:  # Optional[X], or "auto"-or-a-number fields
        if value is None or _is_empty_text(value):
            return None if type(None) in args else _WRONG
        options = [a for a in args if a is not type(None)]
        if float in options and _is_number(value):
            return float(value)
        return _converted(value, options[0])
    if origin in (tuple, list):
        items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            return _WRONG
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis and len(items) != len(args):
            return _WRONG
        element = args[0] if args else str
        converted = [_converted(v, element) for v in items]
        return _WRONG if any(c is _WRONG for c in converted) else tuple(converted)
    if hint is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        return {"true": True, "yes": True, "1": True, "on": True,
                "false": False, "no": False, "0": False, "off": False}.get(text, _WRONG)  # type: ignore[arg-type]  # text None (not str/int) finds _WRONG
    if hint in (int, float):
        return _number(value, hint)
    if hint is str:
        return str(value) if isinstance(value, str) or _is_number(value) else _WRONG
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any, kind: type) -> Any:
    """``value`` (a number, or its text) as ``kind`` (``int`` or ``float``), or :data:`_WRONG`."""
    if isinstance(value, str):
        try:
            value = float(value) if kind is float else int(value.strip())
        except ValueError:
            return _WRONG
    if not _is_number(value):
        return _WRONG
    if kind is float:
        return float(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() else _WRONG
    return value


def section_dict(cls: type, values: Mapping[str, Any], prefix: str,
                 check_field: Optional[Callable[[type, str, str], None]] = None, origin: str = "") -> Dict[str, Any]:
    """``values`` checked against the fields of dataclass ``cls`` (nested dataclasses too) and
    coerced to their types; ``check_field(cls, name, key)`` may refuse a field (raise ``ConfigError``).
    Errors name ``origin`` (the file the values come from, or ``--set``).

    Example:
        >>> from dgl_graphtx.training import TrainConfig
        >>> section_dict(TrainConfig, {"epochs": "3", "lr": "1e-3"}, "train")
        {'epochs': 3, 'lr': 0.001}
    """
    where = f" (in {origin})" if origin else ""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix} must be a mapping of fields, got {describe_value(values)}{where}")
    hints = field_types(cls)
    out: Dict[str, Any] = {}
    for name, value in values.items():
        key = f"{prefix}.{name}"
        if name not in hints:
            raise ConfigError(f"unknown setting {key}{where}; {prefix} fields are {sorted(hints)} (see docs/configuration.md)")
        if check_field is not None:
            check_field(cls, name, key)
        hint = hints[name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            out[name] = section_dict(hint, value, key, check_field, origin)
        else:
            out[name] = coerce(value, hint, key, origin)
    return out


def parse_set_items(items: Sequence[str], sections: Sequence[str], whole: Sequence[str] = ()) -> Dict[str, Any]:
    """``--set`` items (``section.field=value``) -> a nested dict of (still textual) values; the
    sections named in ``whole`` may also be set as one value (``relation=hops=3``).

    Example:
        >>> parse_set_items(["train.epochs=3", "relation=hops=3"], ["train", "relation"], whole=["relation"])
        {'train': {'epochs': '3'}, 'relation': 'hops=3'}
    """
    out: Dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects section.field=value, got {item!r}")
        key, value = item.split("=", 1)
        parts = [p.strip() for p in key.strip().split(".")]
        if not all(parts) or parts[0] not in sections:
            raise ConfigError(f"--set {item!r}: the key must start with one of {list(sections)} (e.g. model.num_layers=6)")
        if len(parts) == 1 and parts[0] not in whole:
            raise ConfigError(f"--set {item!r}: name a field, e.g. {parts[0]}.<field>=value")
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part, {}), dict):
                raise ConfigError(f"--set {item!r} conflicts with an earlier --set of {part}")
            node = node.setdefault(part, {})
        node[parts[-1]] = value.strip()
    return out


def merge(base: Dict[str, Any], top: Mapping[str, Any]) -> Dict[str, Any]:
    """``top`` laid over ``base``, nested mappings merged key by key.

    Example:
        >>> merge({"train": {"epochs": 3, "lr": 0.1}}, {"train": {"lr": 0.2}})
        {'train': {'epochs': 3, 'lr': 0.2}}
    """
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def get_dotted(tree: Mapping[str, Any], dotted: str) -> Tuple[bool, Any]:
    """``(True, value)`` at the dotted path ``"section.field"`` of ``tree``, ``(False, None)`` if absent."""
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def set_dotted(tree: Dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``"section.field"`` of ``tree`` to ``value``."""
    section, name = dotted.split(".")
    tree[section][name] = value
