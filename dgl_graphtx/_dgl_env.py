"""Prepare the environment for :mod:`dgl` before it is imported anywhere in the package.

1. Select DGL's PyTorch backend.
2. On a torch for which the installed DGL ships no compiled graphbolt library (dgl 2.1.0 ships
   them for torch 2.0.0-2.2.1 only), register an empty placeholder module as ``dgl.graphbolt``.
   ``import dgl`` reaches graphbolt only through ``dgl.distributed``, and this library never uses
   graphbolt; without the placeholder, ``import dgl`` fails on every newer torch. Nothing else in
   DGL is touched, and on a torch that has its library the real graphbolt is imported as usual.

Import :mod:`dgl_graphtx` before :mod:`dgl` (or :mod:`dgllife`, which imports it) so that this
runs first.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Optional

os.environ.setdefault("DGLBACKEND", "pytorch")

#: Name under which the placeholder is registered.
GRAPHBOLT = "dgl.graphbolt"


def graphbolt_library(torch_version: str, dgl_dir: Optional[Path]) -> Optional[Path]:
    """The compiled graphbolt library DGL would load for ``torch_version``, or ``None`` when
    ``dgl_dir`` (the installed ``dgl`` package folder) has none for it.

    Example:
        >>> graphbolt_library("2.13.0+cpu", None) is None
        True
    """
    if dgl_dir is None:
        return None
    release = torch_version.split("+", maxsplit=1)[0]
    for suffix in ("so", "dylib"):
        path = dgl_dir / "graphbolt" / f"libgraphbolt_pytorch_{release}.{suffix}"
        if path.exists():
            return path
    windows = dgl_dir / "graphbolt" / f"graphbolt_pytorch_{release}.dll"
    return windows if windows.exists() else None


def _dgl_package_dir() -> Optional[Path]:
    spec = importlib.util.find_spec("dgl")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _register_graphbolt_placeholder() -> bool:
    """Register the placeholder when DGL is installed, not yet imported, and has no graphbolt
    library for the running torch; return whether the placeholder is (now) in use."""
    if GRAPHBOLT in sys.modules:
        return getattr(sys.modules[GRAPHBOLT], "__dgl_graphtx_placeholder__", False)
    if "dgl" in sys.modules:  # imported before us: whatever it did stands
        return False
    dgl_dir = _dgl_package_dir()
    if dgl_dir is None:
        return False
    import torch

    if graphbolt_library(torch.__version__, dgl_dir) is not None:
        return False
    placeholder = types.ModuleType(GRAPHBOLT, "Placeholder registered by dgl_graphtx: DGL ships no graphbolt library for this torch.")
    placeholder.__dgl_graphtx_placeholder__ = True  # type: ignore[attr-defined]
    sys.modules[GRAPHBOLT] = placeholder
    return True


#: Whether ``dgl.graphbolt`` is the placeholder (reported by ``dgl-graphtx info``).
GRAPHBOLT_PLACEHOLDER: bool = _register_graphbolt_placeholder()
