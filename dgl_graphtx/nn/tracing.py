"""Whether code runs under ``torch.export``, whose programs take no branch on tensor values."""
from __future__ import annotations

import torch

#: ``torch.compiler.is_exporting`` (torch 2.6 on), looked up once: torch.compile before 2.3 cannot
#: trace the lookup of a missing attribute.
_IS_EXPORTING = getattr(torch.compiler, "is_exporting", None)
#: Whether this torch can export the library's models (``torch.compiler.is_exporting``: torch 2.6 on).
CAN_EXPORT = _IS_EXPORTING is not None


def exporting() -> bool:
    """Whether ``torch.export`` is tracing the code that asks (its programs take no branch on tensor
    values: checks that read data are left out, masks applied whatever they hold); ``False`` on a
    torch without ``torch.compiler.is_exporting``, which cannot export this library's models.

    Example:
        >>> exporting()
        False
    """
    return bool(_IS_EXPORTING()) if _IS_EXPORTING is not None else False
