"""Write files atomically: a temporary file in the same folder, then ``os.replace``."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Union

import torch

PathLike = Union[str, "os.PathLike[str]"]


def atomic_torch_save(obj: Any, path: PathLike) -> Path:
    """``torch.save`` to ``path`` such that readers never see a half-written file.

    Example:
        >>> import tempfile, torch
        >>> p = atomic_torch_save({"x": torch.ones(2)}, tempfile.mkdtemp() + "/a.pt")
        >>> torch.load(p, weights_only=True)["x"]
        tensor([1., 1.])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
