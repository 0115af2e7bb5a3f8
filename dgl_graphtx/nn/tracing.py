"""Whether code runs under ``torch.export``, whose programs take no branch on tensor values."""
from __future__ import annotations

import torch


def exporting() -> bool:
    """Whether ``torch.export`` is tracing the code that asks (its programs take no branch on tensor
    values: checks that read data are left out, masks applied whatever they hold); ``False`` on a
    torch without ``torch.compiler.is_exporting``, which cannot export this library's models.

    Example:
        >>> exporting()
        False
    """
    check = getattr(torch.compiler, "is_exporting", None)
    return bool(check()) if check is not None else False
