"""Reading back the files the library writes (JSON sidecars, CSV tables, NumPy arrays, torch
payloads), guarded: a file that is missing, cut short, changed or not what it should be is one
:class:`~dgl_graphtx.errors.DamagedFileError` naming it and saying what to do (``fix``: rerun,
rebuild, delete), never a parser's traceback. Callers that hold a cache catch it and compute the
file again.

Where the file's folder keeps a record (:func:`~dgl_graphtx.atomic_io.keep_record`), the file is
first compared with the SHA-256 recorded when it was written: a flipped byte that still parses (a
digit of a calibration quantile, a row count) is refused like a broken file, and a file the record
lists but the folder lacks is refused as deleted, even where a reader takes the file as optional.

Example:
    >>> import tempfile
    >>> from dgl_graphtx.atomic_io import atomic_write_text, keep_record
    >>> folder = Path(tempfile.mkdtemp()); _ = keep_record(folder)
    >>> path = atomic_write_text('{"coverage": 0.9}', folder / "calibration.json")
    >>> read_json(path, "train again")
    {'coverage': 0.9}
    >>> _ = path.write_text('{"coverage": 0.8}')
    >>> read_json(path, "train again")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dgl_graphtx.errors.DamagedFileError: .../calibration.json is damaged: it does not match the SHA-256 recorded when it was written ...
"""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any, Dict, Literal, Optional, Sequence, Set, Union

import numpy as np
import pandas as pd
import torch

from .checksums import RECORD, file_sha256, parse_record
from .errors import DamagedFileError

PathLike = Union[str, Path]


def _recorded_digests(path: Path, fix: str) -> Optional[Set[str]]:
    """The digests ``path``'s folder recorded for it; ``None`` where it keeps no record or the
    record does not list it. A record with unreadable lines is damaged itself."""
    record = path.parent / RECORD
    try:
        text = record.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise DamagedFileError(f"{record} is damaged ({type(err).__name__}: {err}); {fix}") from None
    entries, bad = parse_record(text)
    if bad:
        raise DamagedFileError(f"{record} is damaged (line {bad[0]} is not '<SHA-256>  <file name>'); {fix}")
    return entries.get(path.name)


def verified(path: PathLike, fix: str, optional: bool = False) -> Optional[Path]:
    """``path`` after comparing it with its folder's record; ``None`` when it is absent, ``optional``
    and not recorded. A file that is absent otherwise, or differs from the record, is a
    :class:`DamagedFileError` naming it.

    Example:
        >>> verified("no/such.json", "rerun", optional=True) is None
        True
        >>> verified("no/such.json", "rerun")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.DamagedFileError: no/such.json is missing; rerun
    """
    path = Path(path)
    if path.name == RECORD:
        return path
    digests = _recorded_digests(path, fix)
    if not path.is_file():
        if digests is not None:
            raise DamagedFileError(f"{path} is missing (the folder's {RECORD} lists it: it was written there and "
                                   f"deleted since); {fix}")
        if optional:
            return None
        raise DamagedFileError(f"{path} is missing; {fix}")
    if digests is not None and file_sha256(path) not in digests:
        raise DamagedFileError(f"{path} is damaged: it does not match the SHA-256 recorded when it was written "
                               f"(in {path.parent / RECORD}); {fix}")
    return path


def _damaged(path: Path, what: str, err: BaseException, fix: str) -> DamagedFileError:
    """The error for ``path`` that could not be read as ``what``."""
    detail = str(err).strip().splitlines()
    return DamagedFileError(f"{path} is damaged: it is not {what} ({type(err).__name__}"
                            f"{': ' + detail[0] if detail else ''}); {fix}")


def read_json(path: PathLike, fix: str, optional: bool = False, kind: type = dict) -> Any:
    """The JSON value in ``path`` (checked as :func:`verified` does), which must be a ``kind``
    (an object by default); ``None`` for an absent ``optional`` file.

    Example:
        >>> import tempfile
        >>> bad = Path(tempfile.mkdtemp()) / "m.json"; _ = bad.write_text('{"a": ')
        >>> read_json(bad, "delete it")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.DamagedFileError: .../m.json is damaged: it is not JSON (JSONDecodeError: Expecting value: ...); delete it
    """
    found = verified(path, fix, optional)
    if found is None:
        return None
    try:
        value = json.loads(found.read_bytes().decode("utf-8"))
    except (ValueError, OSError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _damaged(found, "JSON", err, fix) from None
    if not isinstance(value, kind):
        raise DamagedFileError(f"{found} is damaged: it holds a JSON {type(value).__name__}, not a {kind.__name__}; {fix}")
    return value


def read_csv(path: PathLike, fix: str, columns: Sequence[str] = (), sep: str = ",", optional: bool = False) -> Optional[pd.DataFrame]:
    """The table in ``path`` (checked as :func:`verified` does), which must hold ``columns``;
    ``None`` for an absent ``optional`` file.

    Example:
        >>> import tempfile
        >>> table = Path(tempfile.mkdtemp()) / "t.csv"; _ = table.write_text("row,y\\n0,1.5\\n")
        >>> read_csv(table, "rerun", ["row", "fold"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.DamagedFileError: .../t.csv is damaged: it lacks the column(s) ['fold'] (it has ['row', 'y']); rerun
    """
    found = verified(path, fix, optional)
    if found is None:
        return None
    try:
        frame = pd.read_csv(found, sep=sep)
    except (ValueError, OSError, pd.errors.EmptyDataError, pd.errors.ParserError) as err:
        raise _damaged(found, "a readable table", err, fix) from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DamagedFileError(f"{found} is damaged: it lacks the column(s) {missing} (it has {list(frame.columns)}); {fix}")
    return frame


def read_npz(path: PathLike, fix: str, names: Sequence[str] = (), optional: bool = False) -> Optional[Dict[str, np.ndarray]]:
    """The arrays ``names`` (all when none are named) of the ``.npz`` file ``path`` (checked as
    :func:`verified` does, no pickles); ``None`` for an absent ``optional`` file.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.atomic_io import atomic_savez
        >>> read_npz(atomic_savez(tempfile.mkdtemp() + "/a.npz", x=np.arange(2)), "rerun", ["x"])["x"].tolist()
        [0, 1]
    """
    found = verified(path, fix, optional)
    if found is None:
        return None
    try:
        with np.load(found, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in (names or stored.files) if name in stored.files}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise _damaged(found, "a NumPy .npz archive", err, fix) from None
    missing = [n for n in names if n not in arrays]
    if missing:
        raise DamagedFileError(f"{found} is damaged: it lacks the array(s) {missing}; {fix}")
    return arrays


def open_npy(path: PathLike, fix: str, mmap_mode: Optional[Literal["r+", "r", "w+", "c"]] = "c") -> np.ndarray:
    """The ``.npy`` array in ``path`` (checked as :func:`verified` does, no pickles), memory-mapped
    with ``mmap_mode``.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "a.npy"; np.save(target, np.arange(3))
        >>> open_npy(target, "rebuild it").tolist()
        [0, 1, 2]
    """
    found = verified(path, fix)
    assert found is not None  # not optional
    try:
        array: np.ndarray = np.load(found, mmap_mode=mmap_mode, allow_pickle=False)  # a .npy file gives an array
        return array
    except (OSError, EOFError, ValueError) as err:
        raise _damaged(found, "a NumPy .npy array", err, fix) from None


def torch_load_problem(err: BaseException) -> str:
    """Why ``torch.load(..., weights_only=True)`` failed, in words, without torch's advice to
    retry with ``weights_only=False`` (loading such a file could run code: never do that).

    Example:
        >>> torch_load_problem(RuntimeError("PytorchStreamReader failed reading zip archive"))
        'corrupt, truncated or not a torch file (RuntimeError: PytorchStreamReader failed reading zip archive)'
    """
    text = str(err)
    if "weights_only" in text or "WeightsUnpickler" in text:
        found = re.search(r"WeightsUnpickler error: (.*)", text)
        detail = f" ({found.group(1).strip()})" if found and found.group(1).strip() else ""
        return ("it contains objects other than tensors and plain data, which are refused because loading them "
                f"could run code{detail}")
    return f"corrupt, truncated or not a torch file ({type(err).__name__}: {text.splitlines()[0] if text else ''})"


def read_torch(path: PathLike, fix: str, mmap: bool = False) -> Any:
    """The payload of the torch file ``path`` (checked as :func:`verified` does), loaded on the
    CPU with ``weights_only=True`` (never running code); memory-mapped with ``mmap``.

    Example:
        >>> import tempfile
        >>> bad = Path(tempfile.mkdtemp()) / "shard.pt"; _ = bad.write_bytes(b"not a zip")
        >>> read_torch(bad, "featurize it again")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.DamagedFileError: .../shard.pt is damaged: ...; featurize it again
    """
    found = verified(path, fix)
    try:
        return torch.load(str(found), map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as err:  # pickle, zip, torch and OS errors all mean "not a readable payload"
        raise DamagedFileError(f"{found} is damaged: {torch_load_problem(err)}; {fix}") from None

