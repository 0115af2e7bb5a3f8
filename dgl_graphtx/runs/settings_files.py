"""Dataclass settings from files and ``--set``: the generic layer under
:mod:`dgl_graphtx.runs.config`. Reads TOML/YAML files of sections, parses ``section.field=value``
items, checks values against the fields of dataclasses and coerces them to the field types, and
merges layers of settings.
"""
from __future__ import annotations

import dataclasses
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
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                try:
                    import tomli as tomllib  # type: ignore[no-redef]
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


def coerce(value: Any, hint: Any, key: str) -> Any:
    """``value`` (from a file, or text from ``--set``) converted to the field type ``hint``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:  # Optional[X]
        if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
            return None
        return coerce(value, next(a for a in args if a is not type(None)), key)
    if origin in (tuple, list):
        items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        element = args[0] if args else str
        if origin is tuple and len(args) > 1 and args[1] is not Ellipsis:
            if len(items) != len(args):
                raise ConfigError(f"{key} must have {len(args)} values, got {value!r}")
        return tuple(coerce(v, element, key) for v in items)
    if hint is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        try:
            number = float(value) if hint is float else int(str(value).strip()) if isinstance(value, str) else value
        except ValueError:
            raise ConfigError(f"{key} must be {'an integer' if hint is int else 'a number'}, got {value!r}") from None
        if hint is int and (not isinstance(number, int) or isinstance(number, bool)):
            if isinstance(number, float) and number.is_integer():
                return int(number)
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return number
    if hint is str:
        return str(value)
    return value


def section_dict(cls: type, values: Mapping[str, Any], prefix: str,
                 check_field: Optional[Callable[[type, str, str], None]] = None) -> Dict[str, Any]:
    """``values`` checked against the fields of dataclass ``cls`` (nested dataclasses too) and
    coerced to their types; ``check_field(cls, name, key)`` may refuse a field (raise ``ConfigError``).

    Example:
        >>> from dgl_graphtx.training import TrainConfig
        >>> section_dict(TrainConfig, {"epochs": "3", "lr": "1e-3"}, "train")
        {'epochs': 3, 'lr': 0.001}
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"{prefix} must be a table/mapping of fields, got {values!r}")
    hints = field_types(cls)
    out: Dict[str, Any] = {}
    for name, value in values.items():
        key = f"{prefix}.{name}"
        if name not in hints:
            raise ConfigError(f"unknown setting {key}; {prefix} fields are {sorted(hints)} (see docs/configuration.md)")
        if check_field is not None:
            check_field(cls, name, key)
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            out[name] = section_dict(hint, value, key, check_field)
        else:
            out[name] = coerce(value, hint, key)
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
