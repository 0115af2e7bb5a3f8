"""Versions of the stack and whether CUDA is usable by torch and by DGL."""
from __future__ import annotations

import platform
from typing import Dict

import torch

from . import _dgl_env
import dgl
import dgllife
import ogb
import rdkit

from ._version import __version__


def _dgl_cuda() -> str:
    if not torch.cuda.is_available():
        return "no (torch sees no CUDA device)"
    try:
        dgl.graph(([0], [0])).to("cuda")
    except Exception as err:  # a CPU-only DGL build raises here
        return f"no ({type(err).__name__}: {str(err).splitlines()[0][:80]})"
    return "yes"


def _graphbolt_state() -> str:
    if _dgl_env.GRAPHBOLT_PLACEHOLDER:
        return f"placeholder (dgl {dgl.__version__} ships no graphbolt library for torch {torch.__version__}; unused here)"
    return "dgl's own"


def environment_report() -> Dict[str, str]:
    """Versions of python, torch, dgl, dgllife, ogb, rdkit, CUDA usability, and whether
    ``dgl.graphbolt`` is the placeholder (:mod:`dgl_graphtx._dgl_env`).

    Example:
        >>> sorted(environment_report())[:3]
        ['cuda (dgl)', 'cuda (torch)', 'dgl']
    """
    cuda_torch = f"yes ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "no"
    return {
        "dgl_graphtx": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "dgl": dgl.__version__,
        "dgllife": dgllife.__version__,
        "ogb": ogb.__version__,
        "rdkit": rdkit.__version__,
        "cuda (torch)": cuda_torch,
        "cuda (dgl)": _dgl_cuda(),
        "dgl.graphbolt": _graphbolt_state(),
    }
