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
from .devices import dgl_cuda_error, resolve_compute, resolve_device


def _dgl_cuda() -> str:
    error = dgl_cuda_error()
    return "yes" if error is None else f"no ({error})"


def _compute_path() -> str:
    device = resolve_device("auto")
    path = resolve_compute("auto", device)
    how = "DGL's kernels over DGLGraphs" if path == "dgl" else "plain torch ops over GraphTensors"
    return f"{path} with device='auto' ({device.type}: {how}; choose with compute='dgl' or 'tensors')"


def _graphbolt_state() -> str:
    if _dgl_env.graphbolt_placeholder_in_use():
        return f"placeholder (dgl {dgl.__version__} ships no graphbolt library for torch {torch.__version__}; unused here)"
    return "dgl's own"


def environment_report() -> Dict[str, str]:
    """Versions of python, torch, dgl, dgllife, ogb, rdkit, CUDA usability, the compute path of
    a run with ``device="auto"`` (:func:`~dgl_graphtx.devices.resolve_compute`), and whether
    ``dgl.graphbolt`` is the placeholder (:mod:`dgl_graphtx._dgl_env`).

    Example:
        >>> sorted(environment_report())[:3]
        ['compute path', 'cuda (dgl)', 'cuda (torch)']
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
        "compute path": _compute_path(),
        "dgl.graphbolt": _graphbolt_state(),
    }
