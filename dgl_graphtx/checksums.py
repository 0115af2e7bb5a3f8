"""Content digests of files: what checkpoints, backbones, stores and streamed outputs record to
tell their inputs apart and to catch damaged files."""
from __future__ import annotations

import hashlib
import os
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]


def file_sha256(path: PathLike) -> str:
    """The SHA-256 hex digest of the file at ``path``, read 1 MiB at a time.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> _ = p.write_bytes(b"abc")
        >>> file_sha256(p)[:16]
        'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
