"""On-disk cache of featurized datasets, keyed by everything that determines the result."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Union


from ..atomic_io import atomic_torch_save, describe_os_error
from ..errors import DamagedFileError, OutputError
from ..saved_files import read_torch
from .compact import narrow_integers, widen_integers

logger = logging.getLogger("dgl_graphtx")

#: Bump when the layout or the meaning of cached payloads changes (2: atoms in canonical order,
#: with ``input_atom``; 3: integer tensors stored narrowed, see :mod:`.compact`).
CACHE_FORMAT = 3


def default_cache_dir() -> Path:
    """Where featurized datasets are cached when no folder is named: ``$XDG_CACHE_HOME/dgl_graphtx/datasets``
    (``~/.cache/dgl_graphtx/datasets`` when ``XDG_CACHE_HOME`` is unset), shared by all runs of
    this user, so reruns and resumes over an unchanged file skip featurization.

    Example:
        >>> default_cache_dir().parts[-2:]
        ('dgl_graphtx', 'datasets')
    """
    root = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(root) if root else Path.home() / ".cache") / "dgl_graphtx" / "datasets"


def check_cache_dir(folder: Union[str, Path]) -> None:
    """Refuse, before any featurizing, a cache folder no file can be written in (a file, a folder
    under a file, a read-only folder); a missing one is created, as the cache would create it.

    Example:
        >>> import tempfile
        >>> file = tempfile.mkstemp()[1]
        >>> check_cache_dir(file)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: cannot write the dataset cache in ...: it is a file; name another folder ...
    """
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as err:
        why = "it is a file" if isinstance(err, FileExistsError) else describe_os_error(err)
        raise OutputError(f"cannot write the dataset cache in {folder}: {why}; name another folder "
                          "(--cache-dir), or --no-cache") from None


def cache_key(settings: Dict[str, Any]) -> str:
    """Stable hex digest of JSON-serialisable ``settings`` (featurizer, relation, content hash...).

    Example:
        >>> cache_key({"a": 1, "b": [2]}) == cache_key({"b": [2], "a": 1})
        True
    """
    blob = json.dumps({"cache_format": CACHE_FORMAT, **settings}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def cache_path(cache_dir: Union[str, Path], settings: Dict[str, Any]) -> Path:
    """Where the dataset described by ``settings`` is cached inside ``cache_dir``."""
    return Path(cache_dir) / f"molecules-{cache_key(settings)}.pt"


def load_cached(path: Path) -> Optional[Dict[str, Any]]:
    """The cached payload, or ``None`` if absent or unreadable (then it is rebuilt, with a warning)."""
    if not path.exists():
        return None
    try:
        payload = read_torch(path, "rebuilding it")
    except DamagedFileError as err:  # a truncated or foreign file must not stop the user
        logger.warning("ignoring the dataset cache: %s", err)
        return None
    if not isinstance(payload, dict) or payload.get("cache_format") != CACHE_FORMAT:
        logger.warning("ignoring dataset cache %s written in another format; rebuilding it", path)
        return None
    return widen_integers(payload)


def save_cached(path: Path, payload: Dict[str, Any]) -> None:
    """Write ``payload`` atomically (concurrent readers never see half a file), its integer tensors
    in the smallest dtype holding their values (:func:`load_cached` restores the original dtypes)."""
    atomic_torch_save({"cache_format": CACHE_FORMAT, **narrow_integers(payload)}, path)
