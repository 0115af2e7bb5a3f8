"""Import :mod:`ogb` without its version check, before anything in the package imports it.

``ogb/version.py`` starts a (non-daemon) thread that asks the package index for ogb's latest
version with no time-out whenever the optional ``outdated`` package is installed; on a machine
without network a process can then hang at exit. ogb skips the check when ``outdated`` cannot be
imported, so the package hides it while ogb is first imported (and only then: a program that
imported ogb before keeps whatever it did). The package's ``__init__`` imports this module first:
ogb is imported by the package's own modules and by ``import dgl`` itself (``dgl.data``).
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

#: The optional package ogb's version check comes from.
OUTDATED = "outdated"


def import_without_version_check(name: str = "ogb") -> ModuleType:
    """Import ``name`` (ogb) with ``outdated`` hidden, so that its version check never starts.

    Example:
        >>> import_without_version_check().__name__
        'ogb'
    """
    if name in sys.modules:
        return sys.modules[name]
    hide = OUTDATED not in sys.modules
    if hide:
        sys.modules[OUTDATED] = None  # type: ignore[assignment]  # "import outdated" raises ImportError
    try:
        return importlib.import_module(name)
    finally:
        if hide and sys.modules.get(OUTDATED, 0) is None:
            del sys.modules[OUTDATED]


import_without_version_check()
