"""Device selection that works the same with CPU-only and CUDA builds of torch and DGL, and the
compute path a run takes there: DGL's kernels over DGLGraphs, or plain torch ops over the
graphs' :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`."""
from __future__ import annotations

import functools
from typing import Optional, Union

import torch

from .errors import ConfigError


def resolve_device(device: Union[str, torch.device] = "auto") -> torch.device:
    """``"auto"`` picks CUDA when torch can use it, else CPU; anything else is passed to torch.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError as err:
        raise ConfigError(f"unknown device {device!r}: {err}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available to torch; use 'cpu' or 'auto'")
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        names = ", ".join(f"cuda:{i}" for i in range(count))
        raise ConfigError(f"device {device!r} requested but torch sees {count} CUDA device{'s' if count != 1 else ''} "
                          f"({names}); choose one of them (CUDA_VISIBLE_DEVICES renumbers the visible GPUs from 0)")
    return resolved


#: How a model computes on its graphs: ``auto`` (DGL on the CPU and with a CUDA build of DGL,
#: plain tensors on a GPU that DGL cannot use), ``dgl`` or ``tensors``.
COMPUTE_PATHS = ("auto", "dgl", "tensors")


@functools.lru_cache(maxsize=None)
def dgl_cuda_error() -> Optional[str]:
    """Why DGL cannot put a graph on CUDA (the first line of its error, or that torch sees no
    CUDA device), or ``None`` when it can. Probed once per process."""
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    import dgl

    try:
        dgl.graph(([0], [0])).to("cuda")
    except Exception as err:  # a CPU-only DGL build raises here
        return f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
    return None


def resolve_compute(compute: str, device: Union[str, torch.device]) -> str:
    """``"dgl"`` or ``"tensors"``: ``compute`` itself, or for ``"auto"`` DGL's kernels on the CPU
    (the fast CPU default) and on a GPU that DGL can use, and plain tensors on a GPU that it
    cannot (a CPU-only DGL build beside a CUDA torch).

    Example:
        >>> resolve_compute("auto", "cpu"), resolve_compute("tensors", "cpu")
        ('dgl', 'tensors')
    """
    if compute not in COMPUTE_PATHS:
        raise ConfigError(f"compute must be one of {COMPUTE_PATHS}, got {compute!r}")
    on_cpu = resolve_device(device).type == "cpu"
    if compute == "dgl" and not on_cpu and dgl_cuda_error() is not None:
        raise ConfigError(f"compute='dgl' on {device} needs a CUDA build of DGL, and this DGL cannot use CUDA "
                          f"({dgl_cuda_error()}); use compute='tensors' or 'auto' (plain tensors on the GPU)")
    if compute != "auto":
        return compute
    return "dgl" if on_cpu or dgl_cuda_error() is None else "tensors"
