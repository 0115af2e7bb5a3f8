"""Range checks for numeric settings, shared by the dataclass configs and the command line.

Every message names the setting, the allowed range and the value given, so a user can fix it
without reading code.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Union, cast

from .errors import ConfigError

Number = Union[int, float]


def describe_range(low: Optional[Number] = None, high: Optional[Number] = None, *, integer: bool = False,
                   low_open: bool = False, high_open: bool = False) -> str:
    """Words for an allowed range, e.g. ``"an integer >= 1"`` or ``"a finite number in (0, 1]"``.

    Example:
        >>> describe_range(0, 1, low_open=True)
        'a finite number in (0, 1]'
        >>> describe_range(1, integer=True)
        'an integer >= 1'
    """
    kind = "an integer" if integer else "a finite number"
    if low is not None and high is not None:
        return f"{kind} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{kind} {'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{kind} {'<' if high_open else '<='} {high}"
    return kind


def check_number(name: str, value: object, low: Optional[Number] = None, high: Optional[Number] = None, *,
                 integer: bool = False, low_open: bool = False, high_open: bool = False) -> Number:
    """Return ``value`` if it is a (finite) number in the range, else raise :class:`ConfigError`
    naming ``name``, the allowed range and the value. Booleans are not numbers here.

    Example:
        >>> check_number("lr", 1e-3, 0, low_open=True)
        0.001
        >>> check_number("lr", float("nan"), 0, low_open=True)
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: lr must be a finite number > 0, got nan
    """
    allowed = describe_range(low, high, integer=integer, low_open=low_open, high_open=high_open)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    real = cast(float, value)  # read only once ``ok`` says it is a numbers.Real
    if ok and integer:
        ok = isinstance(value, numbers.Integral)
    if ok and not integer:
        ok = math.isfinite(real)
    if ok and low is not None:
        ok = real > low if low_open else real >= low
    if ok and high is not None:
        ok = real < high if high_open else real <= high
    if not ok:
        raise ConfigError(f"{name} must be {allowed}, got {value!r}")
    return real
