"""Write files atomically: a temporary file in the same folder, flushed to disk, then ``os.replace``.

Readers (and a run killed at any moment) see either the previous file or the new one, never half
of one. Files get the usual permissions (``0666`` less the umask), like any other output. A write
that fails (full disk, read-only folder, permission denied) raises :class:`OutputError` naming the
path, and leaves the previous file untouched and no temporary file behind.

A file written into a folder that keeps a record (:func:`keep_record`: run folders, ensembles,
cross-validations, stores) has its SHA-256 listed there (:data:`~dgl_graphtx.checksums.RECORD`),
so that reading it back (:mod:`~dgl_graphtx.saved_files`) tells a damaged or deleted file from
the one written. While a file is replaced the record accepts its old and new content, so a run
killed at any moment leaves a record that agrees with its files.

A destination that is not a regular file is never replaced (see :func:`output_destination`): a
symbolic link keeps pointing where it did and its target is written (atomically, as above); a
character device (``/dev/null``, a terminal) or a FIFO is written through, as ``cp`` would; a link
to nothing, a block device or a socket is refused.
"""
from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, NamedTuple, Optional, Set, Union

import numpy as np
import pandas as pd
import torch

from .checksums import RECORD, file_sha256, format_record, parse_record
from .errors import OutputError, raised_by_interruption

PathLike = Union[str, "os.PathLike[str]"]


def default_file_mode() -> int:
    """The permissions of a new file: ``0666`` less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def describe_os_error(err: BaseException) -> str:
    """A short reason for an I/O failure: ``"No space left on device"``, ``"Permission denied"``...

    Example:
        >>> describe_os_error(PermissionError(13, "Permission denied"))
        'Permission denied'
    """
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


class OutputDestination(NamedTuple):
    """Where an output named ``path`` is written: ``path`` itself, or the file a symbolic link
    names; ``through`` when it is a character device or a FIFO, written as it is (never replaced)."""

    path: Path
    through: bool


def output_destination(path: PathLike) -> OutputDestination:
    """Where to write the output named ``path``: a regular file (existing or not) is written
    atomically; a symbolic link, at the file it names (the link stays); a character device or FIFO
    (``/dev/null``, ``/dev/stdout``, a named pipe) is written through. A folder, a link to nothing,
    a block device or a socket raises :class:`OutputError`.

    Example:
        >>> output_destination("/dev/null")
        OutputDestination(path=PosixPath('/dev/null'), through=True)
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); (folder / "link.csv").symlink_to(folder / "real.csv")
        >>> output_destination(folder / "link.csv")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: cannot write .../link.csv: it is a symbolic link to .../real.csv, which does not exist; ...
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise OutputError(f"cannot write {path}: it is a symbolic link to {os.readlink(path)}, which does not exist; "
                              "create the file it names, or remove the link") from None
        return OutputDestination(path, False)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {describe_os_error(err)}") from None
    if stat.S_ISDIR(mode):
        raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputDestination(path, True)
    if not stat.S_ISREG(mode):
        kind = "block device" if stat.S_ISBLK(mode) else "socket" if stat.S_ISSOCK(mode) else "special file"
        raise OutputError(f"cannot write {path}: it is a {kind}; give a file, a character device or a FIFO")
    return OutputDestination(Path(os.path.realpath(path)) if path.is_symlink() else path, False)


def _temporary_beside(path: Path) -> Path:
    """A new empty temporary file in ``path``'s folder (created if missing)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as err:
        raise OutputError(f"cannot write {path}: {describe_os_error(err)}") from None
    return Path(name)


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block ends without error, the temporary
    file is flushed to disk and renamed to ``path``; on error it is removed. A link is followed
    and a character device or FIFO is yielded itself (see :func:`output_destination`).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "t.txt"
        >>> with atomic_path(target) as tmp:
        ...     _ = tmp.write_text("done")
        >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
        ('done', ['t.txt'])
    """
    path, through = output_destination(path)
    if through:
        try:
            yield path
        except (OSError, RuntimeError) as err:
            _interruption_goes_on(err)
            raise OutputError(f"cannot write {path}: {describe_os_error(err)}") from None
        return
    tmp = _temporary_beside(path)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, default_file_mode())
        digest = file_sha256(tmp) if _recorded_folder(path) else None
        if digest is not None:  # the old and the new content are both accepted while the name changes hands
            _set_digests(path, (_record_entries(path.parent) or {}).get(path.name, set()) | {digest})
        os.replace(tmp, path)
        if digest is not None:
            _set_digests(path, {digest})
    except (OSError, RuntimeError) as err:  # torch reports a full disk as RuntimeError
        _interruption_goes_on(err)
        raise OutputError(f"cannot write {path}: {describe_os_error(err)}; the previous file, if any, is unchanged") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _interruption_goes_on(err: BaseException) -> None:
    """Raise ``KeyboardInterrupt`` if ``err`` was raised while one unwound: Ctrl-C during
    ``torch.save`` surfaces as the zip writer's ``RuntimeError`` ("unexpected pos ..."), an
    interruption, not a failure to write."""
    if raised_by_interruption(err):
        raise KeyboardInterrupt from err


def check_writable(path: PathLike) -> Path:
    """Fail early, with :class:`OutputError` naming ``path``, if a file cannot be written there
    (a folder of that name, a read-only or missing-and-uncreatable folder, a device or FIFO without
    write permission, see :func:`output_destination`). Writes nothing; returns where the output goes.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> check_writable(folder)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: cannot write ...: it is a folder; give a file name
    """
    path, through = output_destination(path)
    if through:
        if not os.access(path, os.W_OK):
            raise OutputError(f"cannot write {path}: Permission denied")
        return path
    _temporary_beside(path).unlink()
    return path


def check_not_input(output: Optional[PathLike], given: Optional[PathLike], option: str = "--output") -> None:
    """Refuse, with :class:`OutputError`, an ``output`` that names the input file ``given`` (the
    same file, by any path): writing it would replace the input being read.

    Example:
        >>> import tempfile
        >>> data = Path(tempfile.mkdtemp()) / "in.csv"; _ = data.write_text("smiles\\nCCO\\n")
        >>> check_not_input(data.parent / "out.csv", data)
        >>> check_not_input(data.parent / "." / "in.csv", data)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: --output .../in.csv is the input file: writing it would replace the molecules ...
    """
    if output is not None and given is not None and Path(output).exists() and Path(given).exists() and os.path.samefile(output, given):
        raise OutputError(f"{option} {output} is the input file: writing it would replace the molecules being read; "
                          "give another file name")


def atomic_torch_save(obj: Any, path: PathLike) -> Path:
    """``torch.save`` to ``path`` such that readers never see a half-written file.

    Example:
        >>> import tempfile, torch
        >>> p = atomic_torch_save({"x": torch.ones(2)}, tempfile.mkdtemp() + "/a.pt")
        >>> torch.load(p, weights_only=True)["x"]
        tensor([1., 1.])
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(obj, handle)
    return Path(path)


def atomic_savez(path: PathLike, **arrays: Any) -> Path:
    """``numpy.savez`` of ``arrays`` to ``path`` (no ``.npz`` appended) such that readers never
    see a half-written file.

    Example:
        >>> import tempfile
        >>> p = atomic_savez(tempfile.mkdtemp() + "/a.npz", x=np.arange(3))
        >>> np.load(p)["x"].tolist()
        [0, 1, 2]
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    return Path(path)


def atomic_write_text(text: str, path: PathLike) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    Example:
        >>> import tempfile
        >>> atomic_write_text("{}", tempfile.mkdtemp() + "/m.json").read_text()
        '{}'
    """
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_to_csv(frame: pd.DataFrame, path: PathLike, **kwargs: Any) -> Path:
    """``frame.to_csv(path, **kwargs)`` atomically.

    Example:
        >>> import tempfile
        >>> p = atomic_to_csv(pd.DataFrame({"a": [1]}), tempfile.mkdtemp() + "/a.csv", index=False)
        >>> p.read_text()
        'a\\n1\\n'
    """
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, **kwargs)
    return Path(path)


def _recorded_folder(path: Path) -> bool:
    """Whether ``path`` is a file of a folder that keeps a record (and not the record itself)."""
    return path.name != RECORD and (path.parent / RECORD).is_file()


def _record_entries(folder: Path) -> Optional[Dict[str, Set[str]]]:
    """The entries of ``folder``'s record (lines that cannot be read are dropped), ``None`` without one."""
    try:
        return parse_record((folder / RECORD).read_text(encoding="utf-8", errors="replace"))[0]
    except FileNotFoundError:
        return None


def _write_record(folder: Path, entries: Dict[str, Set[str]]) -> None:
    """Replace ``folder``'s record atomically (a temporary file renamed; not flushed to disk: it
    keeps up with the files, whose writes are)."""
    tmp = _temporary_beside(folder / RECORD)
    try:
        tmp.write_text(format_record(entries), encoding="utf-8")
        os.chmod(tmp, default_file_mode())
        os.replace(tmp, folder / RECORD)
    except OSError as err:
        raise OutputError(f"cannot write {folder / RECORD}: {describe_os_error(err)}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _set_digests(path: Path, digests: Set[str]) -> None:
    """List ``digests`` for ``path`` in its folder's record (none: drop it)."""
    entries = _record_entries(path.parent)
    if entries is None:
        return
    if digests:
        entries[path.name] = set(digests)
    else:
        entries.pop(path.name, None)
    _write_record(path.parent, entries)


def keep_record(folder: PathLike, fresh: bool = False) -> Path:
    """Make ``folder`` (created if missing) keep a record of the files written into it from now
    on (an empty one, or with ``fresh`` a previous one cleared); returns the record.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> record = keep_record(folder)
        >>> _ = atomic_write_text("{}", folder / "a.json")
        >>> record.read_text().split()[1]
        'a.json'
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if fresh or not (folder / RECORD).is_file():
        _write_record(folder, {})
    return folder / RECORD


def remove_file(path: PathLike) -> None:
    """Delete the file ``path`` (if there) and its entry in its folder's record.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); _ = keep_record(folder)
        >>> remove_file(atomic_write_text("{}", folder / "a.json")); (folder / "SHA256SUMS").read_text()
        ''
    """
    path = Path(path)
    path.unlink(missing_ok=True)
    if _recorded_folder(path):
        _set_digests(path, set())
