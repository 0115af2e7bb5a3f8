"""A CSV table written chunk by chunk that an interrupted run continues without losing, gluing or
shifting a row.

The rows go to ``<path>.partial``; after each chunk is flushed to disk, ``<path>.partial.json``
records (atomically) how many whole rows and bytes the ``.partial`` holds, its columns, what
the rows were made from (``source``: input and model digests, settings), and a SHA-256 of those
bytes bound to the row count and columns. Only what the record counts is written: a resume first
cuts the ``.partial`` back to the recorded length (a chunk a crash cut short, or one flushed just
before the crash, is computed again), and refuses a ``.partial`` whose record is missing, names
another source, or whose digest no longer matches (an edited value, an edited row count). A write that fails (a full disk)
cuts the ``.partial`` back to its last recorded chunk, so the rows the message counts are the rows
in the file. :meth:`ProgressiveCSV.finish` renames the ``.partial`` to ``path`` and drops the record.

A character device or FIFO (see :func:`~dgl_graphtx.atomic_io.output_destination`) is written
through as the rows come; there is nothing to resume there.

While a writer is open it holds a lock on ``<path>.partial.lock`` (:class:`WriterLock`, an
advisory POSIX lock that ends with the process, so a killed run leaves no lock behind): a second
run writing the same table is refused in one line instead of both deleting and appending to one
``.partial``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import weakref
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Mapping, Optional

try:
    import fcntl
except ImportError:  # not POSIX: tables are written without a lock
    fcntl = None  # type: ignore[assignment]

import pandas as pd

from .atomic_io import PathLike, atomic_write_text, check_writable, default_file_mode, describe_os_error, output_destination
from .errors import OutputError

logger = logging.getLogger("dgl_graphtx")


def _shown(value: Any) -> str:
    """``value`` for a message: a SHA-256 hex digest by its first 12 digits."""
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return f"sha256 {value[:12]}"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value)


def _bound_digest(content: "hashlib._Hash", rows: int, size: int, columns: List[str]) -> str:
    """The SHA-256 a record keeps: of the ``.partial``'s bytes (``content``, a running SHA-256),
    bound to the row count, byte count and columns the record gives for them."""
    return hashlib.sha256(json.dumps([content.hexdigest(), rows, size, columns]).encode()).hexdigest()


def _digest_of_start(path: "os.PathLike[str]", size: int) -> "hashlib._Hash":
    """A running SHA-256 of the first ``size`` bytes of ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        left = size
        while left:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
    return digest


def _append_flushed(path: PathLike, data: bytes) -> None:
    """Append ``data`` to ``path`` and flush it to disk."""
    with open(path, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


#: The writer's locks this process holds: lock file -> [its descriptor, holders]. POSIX locks belong to
#: the process, and closing any descriptor of the file drops them all: a lock taken again by the same
#: process shares the first one's descriptor, which closes when its last holder lets go.
_HELD: Dict[str, List[int]] = {}


def _let_go(key: str) -> None:
    """One holder of the lock file ``key`` lets go (released, or dropped unreleased); the last one
    removes the file and closes the descriptor, which gives the lock up."""
    held = _HELD[key]
    held[1] -= 1
    if held[1] == 0:
        Path(key).unlink(missing_ok=True)
        os.close(held[0])
        del _HELD[key]


class WriterLock:
    """The lock of the one process writing the table ``path`` (the file ``<path>.partial.lock``),
    taken at once or refused with :class:`~dgl_graphtx.errors.OutputError`; :meth:`release` gives it
    up and removes the file once no holder in this process is left. The same process may take it
    again (a resume in the same session, a join of parts by the process that holds the output).

    Example:
        >>> import tempfile
        >>> lock = WriterLock(Path(tempfile.mkdtemp()) / "p.csv")
        >>> again = WriterLock(lock.file.with_name("p.csv"))
        >>> again.release(); lock.file.exists()
        True
        >>> lock.release(); lock.file.exists()
        False
    """

    def __init__(self, path: PathLike) -> None:
        self.file = Path(path).with_name(Path(path).name + ".partial.lock")
        self._holding: Optional[weakref.finalize] = None
        if fcntl is None:
            return
        key = os.path.abspath(self.file)
        if key in _HELD:
            _HELD[key][1] += 1
            self._holding = weakref.finalize(self, _let_go, key)
            return
        try:
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OutputError(f"cannot write {path}: {describe_os_error(err)}") from None
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if isinstance(err, BlockingIOError):
                raise OutputError(f"{path} is being written by another run (it holds {self.file.name}); wait for it to "
                                  "finish, or write to another file") from None
            raise OutputError(f"cannot write {path}: {describe_os_error(err)}") from None
        _HELD[key] = [fd, 1]
        self._holding = weakref.finalize(self, _let_go, key)  # a lock dropped unreleased lets go too

    def release(self) -> None:
        """Give the lock up; the last holder in this process removes its file."""
        if self._holding is not None:
            self._holding()  # runs once


class ProgressiveCSV:
    """A CSV written chunk by chunk, resumable after an interruption (see the module's notes).

    Args:
        path: the finished table.
        resume: continue the rows an interrupted run left in ``<path>.partial`` (after checking
            that its record names the same ``source``) instead of starting again.
        sep: the delimiter (a tab for TSV).
        source: what the rows are made from, as plain JSON data (digests of the input and the
            model, settings); a resume with another source is refused, naming the keys that differ.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> out = Path(tempfile.mkdtemp()) / "p.csv"
        >>> writer = ProgressiveCSV(out, source={"input": "a"})
        >>> writer.append(pd.DataFrame({"a": [1, 2]}))
        >>> writer = ProgressiveCSV(out, resume=True, source={"input": "a"})  # a new run continues
        >>> writer.rows_done
        2
        >>> writer.append(pd.DataFrame({"a": [3]})); writer.finish().read_text()
        'a\\n1\\n2\\n3\\n'
        >>> sorted(p.name for p in out.parent.iterdir())
        ['p.csv']
    """

    def __init__(self, path: PathLike, resume: bool = False, sep: str = ",", source: Optional[Mapping[str, Any]] = None) -> None:
        self.path, self.through = output_destination(path)
        check_writable(self.path)
        self.sep = sep
        self.source: Dict[str, Any] = dict(source or {})
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.record = self.partial.with_name(self.partial.name + ".json")
        self.rows_done = 0
        self._bytes_done = 0
        self._columns: Optional[List[str]] = None
        self._content = hashlib.sha256()
        self._stream: Optional[BinaryIO] = None
        self._lock = None if self.through else WriterLock(self.path)
        try:
            if self.through:
                if resume:
                    raise OutputError(f"cannot resume into {self.path}: it is a character device or FIFO, written through as "
                                      "the rows come, so there is nothing to continue; drop --resume")
            elif resume and self.partial.exists():
                self._continue()
            else:
                self.partial.unlink(missing_ok=True)
                self.record.unlink(missing_ok=True)
        except BaseException:
            self.close()
            raise

    def _continue(self) -> None:
        """Take up the rows the record of ``.partial`` counts (the ``.partial`` is cut back to them)."""
        try:
            record = json.loads(self.record.read_text())
            rows, size, columns, source = int(record["rows"]), int(record["bytes"]), list(record["columns"]), record["source"]
        except (OSError, ValueError, KeyError, TypeError):
            raise OutputError(f"cannot resume from {self.partial}: it has no readable record of what it was made from "
                              f"({self.record.name}); delete it to start again") from None
        changed = [key for key in sorted(set(source) | set(self.source)) if source.get(key) != self.source.get(key)]
        if changed:
            what = "; ".join(f"another {key} ({_shown(source.get(key))} then, {_shown(self.source.get(key))} now)" for key in changed)
            raise OutputError(f"cannot resume from {self.partial}: it was made from {what}; delete it, or drop --resume to start again")
        actual = self.partial.stat().st_size
        if actual < size:
            raise OutputError(f"cannot resume from {self.partial}: it holds {actual} bytes but {size} were written; "
                              "delete it to start again")
        content = _digest_of_start(self.partial, size)
        if "sha256" not in record:  # written by a version without digests
            logger.warning("%s has no digest of its rows (an older version wrote it): they are continued unchecked", self.partial)
        elif record["sha256"] != _bound_digest(content, rows, size, columns):
            raise OutputError(f"cannot resume from {self.partial}: its rows or its record ({self.record.name}) changed after they "
                              "were written (they do not match the SHA-256 recorded then); delete both to start again")
        if actual > size:  # a chunk cut short (or flushed but not yet recorded) by the interruption
            os.truncate(self.partial, size)
        self.rows_done, self._bytes_done, self._columns, self._content = rows, size, columns, content

    def append(self, frame: pd.DataFrame) -> None:
        """Add ``frame``'s rows (the header comes with the first rows; an empty ``frame`` writes
        only the header)."""
        columns = [str(c) for c in frame.columns]
        if self._columns is not None and columns != self._columns:
            raise OutputError(f"cannot append to {self.partial}: it has the columns {self._columns}, the new rows {columns}")
        data = frame.to_csv(None, header=self._columns is None, index=False, sep=self.sep).encode("utf-8")
        if self.through:
            self._write_through(data)
        else:
            self._write_partial(data, len(frame), columns)
        self.rows_done += len(frame)
        self._bytes_done += len(data)
        self._columns = columns

    def _write_through(self, data: bytes) -> None:
        try:
            if self._stream is None:
                self._stream = open(self.path, "wb")
            self._stream.write(data)
            self._stream.flush()
        except OSError as err:
            raise OutputError(f"cannot write {self.path}: {describe_os_error(err)}; {self.rows_done} rows were written") from None

    def _write_partial(self, data: bytes, rows: int, columns: List[str]) -> None:
        content = self._content.copy()
        content.update(data)
        total, size = self.rows_done + rows, self._bytes_done + len(data)
        record = {"rows": total, "bytes": size, "columns": columns, "source": self.source,
                  "sha256": _bound_digest(content, total, size, columns)}
        try:
            _append_flushed(self.partial, data)
        except OSError as err:
            raise self._failed(f"cannot write {self.partial}: {describe_os_error(err)}") from None
        try:
            atomic_write_text(json.dumps(record), self.record)
        except OutputError as err:
            raise self._failed(str(err)) from None
        self._content = content

    def _failed(self, what: str) -> OutputError:
        """The error of a chunk that could not be written, after cutting the ``.partial`` back to
        the rows written before it."""
        self._cut_back()
        kept = (f"the {self.rows_done} rows written before are kept in {self.partial} (rerun with --resume to continue)"
                if self.rows_done else "no row was kept")
        return OutputError(f"{what}; {kept}")

    def _cut_back(self) -> None:
        """Back to the last recorded chunk (nothing at all before the first)."""
        try:
            if self._bytes_done:
                os.truncate(self.partial, self._bytes_done)
            else:
                self.partial.unlink(missing_ok=True)
        except OSError:
            pass  # the record still marks where the whole rows end; a resume cuts there

    def finish(self) -> "os.PathLike[str]":
        """Rename the finished ``.partial`` to ``path`` (a device or FIFO is closed); returns ``path``."""
        if self.through:
            if self._stream is not None:
                self._stream.close()
            return self.path
        try:
            os.chmod(self.partial, default_file_mode())
            os.replace(self.partial, self.path)
        except OSError as err:
            raise OutputError(f"cannot write {self.path}: {describe_os_error(err)}; the rows are in {self.partial}") from None
        self.record.unlink(missing_ok=True)
        self.close()
        return self.path

    def close(self) -> None:
        """Give up the writer's lock, leaving the ``.partial`` and its record as they are (a part
        that another process joins, or rows to resume)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
