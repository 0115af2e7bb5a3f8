"""Make ``import dgl`` work on every supported torch, whatever is imported first.

DGL 2.1.0 ships its compiled graphbolt library for torch 2.0.0-2.2.1 only, and ``import dgl``
imports ``dgl.graphbolt`` (through ``dgl.distributed``), which fails on every newer torch. This
library never uses graphbolt. :class:`GraphboltPlaceholder`, an import hook on ``sys.meta_path``,
answers the import of ``dgl.graphbolt`` with an empty placeholder module exactly when DGL's package
folder has no graphbolt library for the running torch, and stands aside for every other import (on
torch 2.2.1 DGL's own graphbolt loads as usual). Nothing else in DGL is touched.

The hook is installed at interpreter start by ``dgl_graphtx-graphbolt.pth``, which pip puts in
site-packages with the package (wheel and editable installs alike). That line imports nothing: it
puts a small finder first on ``sys.meta_path`` that answers ``None`` to every import but
``dgl.graphbolt``, and for that one hands the question to :class:`GraphboltPlaceholder`, importing
this module then. A Python that never imports DGL pays a few microseconds, and ``import dgl`` or
``import dgllife`` may come first in any script. Importing :mod:`dgl_graphtx` installs the hook
too (and selects DGL's PyTorch backend), which covers a copy outside site-packages
(``PYTHONPATH``, ``pip install --target``), where ``.pth`` files are not read.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence, Union

#: The module the placeholder stands in for.
GRAPHBOLT = "dgl.graphbolt"
#: Attribute marking the hook (on ``sys.meta_path``) and the placeholder module.
MARKER = "__dgl_graphtx_placeholder__"


def graphbolt_library(torch_version: str, dgl_dir: Union[None, str, "os.PathLike[str]"]) -> Optional[Path]:
    """The compiled graphbolt library DGL would load for ``torch_version``, or ``None`` when
    ``dgl_dir`` (the installed ``dgl`` package folder) has none for it.

    Example:
        >>> graphbolt_library("2.13.0+cpu", None) is None
        True
    """
    if dgl_dir is None:
        return None
    release = torch_version.split("+", maxsplit=1)[0]
    folder = Path(dgl_dir) / "graphbolt"
    for name in (f"libgraphbolt_pytorch_{release}.so", f"libgraphbolt_pytorch_{release}.dylib", f"graphbolt_pytorch_{release}.dll"):
        if (folder / name).exists():
            return folder / name
    return None


class GraphboltPlaceholder:
    """Import hook for ``sys.meta_path``: an empty ``dgl.graphbolt`` when DGL has no graphbolt
    library for the running torch; every other import, and ``dgl.graphbolt`` where the library
    exists, is left to the usual finders (``find_spec`` returns ``None``).

    Example:
        >>> GraphboltPlaceholder().find_spec("dgl.function", ["/no/dgl"]) is None
        True
        >>> GraphboltPlaceholder().find_spec("dgl.graphbolt", ["/no/dgl"]).name
        'dgl.graphbolt'
    """

    __dgl_graphtx_placeholder__ = True

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None, target: Any = None) -> Any:
        """A spec of the placeholder for ``dgl.graphbolt`` (``path``: DGL's package folder) when
        DGL lacks the library for the running torch, else ``None``."""
        if fullname != GRAPHBOLT or not path:
            return None
        import torch  # dgl imported it before reaching graphbolt

        if graphbolt_library(torch.__version__, next(iter(path))) is not None:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(fullname, self)  # type: ignore[arg-type]  # a Loader by its methods, not by base class

    def create_module(self, spec: Any) -> None:
        """The default module object."""
        return None

    def exec_module(self, module: Any) -> None:
        """Mark ``module`` as the placeholder; it holds nothing else."""
        module.__doc__ = "Placeholder registered by dgl_graphtx: DGL ships no graphbolt library for this torch."
        setattr(module, MARKER, True)


def install() -> None:
    """Put :class:`GraphboltPlaceholder` first on ``sys.meta_path`` unless a hook is there already
    (the start-up hook's, or one installed before).

    Example:
        >>> install(); install()
        >>> sum(getattr(f, MARKER, False) for f in sys.meta_path)
        1
    """
    if not any(getattr(finder, MARKER, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, GraphboltPlaceholder())


def graphbolt_placeholder_in_use() -> bool:
    """Whether the imported ``dgl.graphbolt`` is the placeholder (reported by ``dgl-graphtx info``).

    Example:
        >>> import dgl, torch
        >>> graphbolt_placeholder_in_use() == (graphbolt_library(torch.__version__, dgl.__path__[0]) is None)
        True
    """
    return bool(getattr(sys.modules.get(GRAPHBOLT), MARKER, False))
