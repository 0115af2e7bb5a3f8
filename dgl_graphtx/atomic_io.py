"""Write files atomically: a temporary file in the same folder, flushed to disk, then ``os.replace``.

Readers (and a run killed at any moment) see either the previous file or the new one, never half
of one. Files get the usual permissions (``0666`` less the umask), like any other output. A write
that fails (full disk, read-only folder, permission denied) raises :class:`OutputError` naming the
path, and leaves the previous file untouched and no temporary file behind.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, Union

import pandas as pd
import torch

from .errors import OutputError

PathLike = Union[str, "os.PathLike[str]"]


def _default_mode() -> int:
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


def _temporary_beside(path: Path) -> Path:
    """A new empty temporary file in ``path``'s folder (created if missing)."""
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder; give a file name")
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
    file is flushed to disk and renamed to ``path``; on error it is removed.

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "t.txt"
        >>> with atomic_path(target) as tmp:
        ...     _ = tmp.write_text("done")
        >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
        ('done', ['t.txt'])
    """
    path = Path(path)
    tmp = _temporary_beside(path)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as err:  # torch reports a full disk as RuntimeError
        raise OutputError(f"cannot write {path}: {describe_os_error(err)}; the previous file, if any, is unchanged") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def check_writable(path: PathLike) -> Path:
    """Fail early, with :class:`OutputError` naming ``path``, if a file cannot be written there
    (a folder of that name, a read-only or missing-and-uncreatable folder). Writes nothing.

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> check_writable(folder)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: cannot write ...: it is a folder; give a file name
    """
    path = Path(path)
    _temporary_beside(path).unlink()
    return path


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


class ProgressiveCSV:
    """A CSV written chunk by chunk: rows go to ``<path>.partial``, flushed to disk after every
    chunk, and :meth:`finish` renames it to ``path``. A run that stops early leaves the rows done
    so far in the ``.partial`` file, and ``resume=True`` continues after them. ``sep`` is the
    delimiter (a tab for TSV).

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "p.csv"
        >>> writer = ProgressiveCSV(out)
        >>> writer.append(pd.DataFrame({"a": [1, 2]})); writer.append(pd.DataFrame({"a": [3]}))
        >>> writer.partial.exists(), writer.rows_done
        (True, 3)
        >>> writer.finish().read_text()
        'a\\n1\\n2\\n3\\n'
    """

    def __init__(self, path: PathLike, resume: bool = False, sep: str = ",") -> None:
        self.path = Path(path)
        self.sep = sep
        self.partial = self.path.with_name(self.path.name + ".partial")
        check_writable(self.path)
        self.rows_done = 0
        if resume and self.partial.exists():
            try:
                self.rows_done = len(pd.read_csv(self.partial, dtype=str, keep_default_na=False, sep=self.sep))
            except (pd.errors.EmptyDataError, pd.errors.ParserError, OSError) as err:
                raise OutputError(f"cannot resume from {self.partial}: {describe_os_error(err)}; delete it to start again") from None
        elif self.partial.exists():
            self.partial.unlink()

    def append(self, frame: pd.DataFrame) -> None:
        """Add ``frame``'s rows (the header is written with the first rows)."""
        header = not self.partial.exists()
        try:
            with open(self.partial, "a", encoding="utf-8", newline="") as handle:
                frame.to_csv(handle, header=header, index=False, sep=self.sep)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as err:
            raise OutputError(f"cannot write {self.partial}: {describe_os_error(err)}; the {self.rows_done} rows "
                              "written before are kept there (rerun with --resume to continue)") from None
        self.rows_done += len(frame)

    def finish(self) -> Path:
        """Rename the finished file to its final name (an empty table gets a header only)."""
        try:
            os.chmod(self.partial, _default_mode())
            os.replace(self.partial, self.path)
        except OSError as err:
            raise OutputError(f"cannot write {self.path}: {describe_os_error(err)}; the rows are in {self.partial}") from None
        return self.path
