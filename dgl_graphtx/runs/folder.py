"""Run folders: one training run per folder, locked while it writes, never silently replaced.

Opening a :class:`RunFolder` (before any featurization or training):

* checks that the path is a folder that can be written (else one :class:`OutputError` naming it);
* takes a lock file ``.run.lock`` (created exclusively: of two concurrent runs, one gets a clear
  error naming the other's process);
* refuses a folder that already holds a run's files unless ``overwrite=True``, in which case the
  previous run's files are deleted first, so every file in the folder comes from the same run;
* keeps a record of the SHA-256 of every file the run writes (``SHA256SUMS``, see
  :func:`~dgl_graphtx.atomic_io.keep_record`), against which reading a file back checks it;
* writes ``run.json`` with a fresh ``run_id`` and ``status: "running"``; :meth:`RunFolder.finish`
  marks it ``"complete"``, an error that would recur (:data:`RECURRING_ERRORS`) after the run wrote
  results ``"failed"``, with the error (not in a resumed run, whose results came before). The
  same ``run_id`` is stored in the checkpoint and ``metrics.json``;
* with ``resume=True`` continues the run already in the folder instead: nothing is deleted, its
  ``run_id`` and ``run.json`` are kept, and the lock of a killed run is taken over (training then
  continues from ``last.pt``, see :meth:`~dgl_graphtx.training.Trainer.fit`); a folder holding a
  run's results but no ``last.pt`` is refused, since resuming would train it again over them.

Other files in the folder (a ``cache/`` of featurized molecules, say) are left alone.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from ..atomic_io import atomic_write_text, describe_os_error, keep_record
from ..checksums import RECORD
from ..errors import ConfigError, InvalidMoleculeError, NonFiniteError, OutputError, one_line
from ..saved_files import read_json
from ..inference.checkpoint_paths import RUN_INFO
from ..inference.cross_conformal import CV_REPORT, OOF_FILE

PathLike = Union[str, Path]

LOCK_NAME = ".run.lock"
#: Files a training run writes; their presence marks a folder as holding a run.
RUN_FILES: Tuple[str, ...] = (RUN_INFO, "best.pt", "last.pt", "log.csv", "learning_curve.png", "metrics.json",
                              "test_predictions.csv", "input_report.csv", "config.yaml", "train.log", RECORD)
#: The files that make a run worth keeping; a folder with only the others (``run.json``,
#: ``config.yaml``, ``train.log`` and the record of a run that failed before training) is reused without asking.
RESULT_FILES: Tuple[str, ...] = tuple(name for name in RUN_FILES if name not in (RUN_INFO, "config.yaml", "train.log", RECORD))
#: Errors that stop a run the same way whenever it runs with its settings (a run they stop after it
#: wrote results is marked ``failed``); an interruption or an I/O failure leaves it ``running``.
RECURRING_ERRORS = (ConfigError, InvalidMoleculeError, NonFiniteError)
#: What an ensemble or a cross-validation writes at its top beside its runs' folders (``replicate_<r>/``,
#: ``fold_<k>/``); like a run's results, they make a folder worth keeping.
TREE_REPORTS: Tuple[str, ...] = ("ensemble_test_predictions.csv", "ensemble_metrics.json", OOF_FILE, CV_REPORT, "cv_metrics.csv")
_TREE_PART = re.compile(r"(replicate|fold)_\d+")
#: What the command line writes into a folder before its runs start: never cleared by them.
_COMMAND_FILES = ("config.yaml", "train.log")


def held_files(folder: Path) -> List[str]:
    """What ``folder`` holds of a run (:data:`RUN_FILES`), an ensemble or a cross-validation (their
    reports and runs' folders).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); (folder / "fold_0").mkdir(); _ = (folder / "best.pt").write_bytes(b"")
        >>> held_files(folder)
        ['best.pt', 'fold_0']
    """
    if not folder.is_dir():
        return []
    runs = [name for name in RUN_FILES if (folder / name).exists()]
    return runs + sorted(p.name for p in folder.iterdir() if p.name in TREE_REPORTS or (p.is_dir() and _TREE_PART.fullmatch(p.name)))


def _worth_keeping(held: List[str]) -> bool:
    """Whether ``held`` (of :func:`held_files`) holds results, not only what a run that failed before training wrote."""
    return any(name in RESULT_FILES or name in TREE_REPORTS or _TREE_PART.fullmatch(name) for name in held)


def _stopped_in_first_epoch(folder: Path, held: List[str]) -> bool:
    """Whether ``folder`` holds a run stopped (Ctrl-C, a kill) while it recorded its first epoch:
    that epoch's ``log.csv`` row and ``best.pt`` are written before ``last.pt``, and ``run.json``
    still says running. Nothing of it can be continued, and nothing finished is lost by starting it again.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp()); _ = (folder / "run.json").write_text('{"status": "running"}')
        >>> _ = (folder / "log.csv").write_text("epoch,train_loss\\n1,0.5\\n")
        >>> _stopped_in_first_epoch(folder, ["run.json", "log.csv"])
        True
        >>> _ = (folder / "log.csv").write_text("epoch,train_loss\\n1,0.5\\n2,0.4\\n")
        >>> _stopped_in_first_epoch(folder, ["run.json", "log.csv"])
        False
    """
    if not {name for name in held if name in RESULT_FILES} <= {"log.csv", "best.pt"} or any(_TREE_PART.fullmatch(n) for n in held):
        return False
    if _status(folder) != "running":
        return False
    try:
        rows = (folder / "log.csv").read_text().splitlines() if "log.csv" in held else []
    except (OSError, ValueError):
        return False
    return len([row for row in rows if row.strip()]) <= 2


def _refusal(folder: Path, held: List[str]) -> OutputError:
    return OutputError(f"{folder} already holds a run ({', '.join(held)}); use --overwrite (overwrite=True) to replace it, "
                       "or choose another output folder")


def _status(folder: Path) -> Optional[str]:
    """The ``status`` in ``folder``'s ``run.json`` (``running``, ``complete``, ``failed``), or None
    when it is missing or unreadable."""
    try:
        info = json.loads((folder / RUN_INFO).read_text())
    except (OSError, ValueError):
        return None
    return info.get("status") if isinstance(info, dict) else None


def _clear(folder: Path, names: List[str]) -> None:
    """Delete ``names`` (files, or runs' folders) from ``folder``."""
    for name in names:
        if (folder / name).is_dir():
            shutil.rmtree(folder / name)
        else:
            (folder / name).unlink(missing_ok=True)


def check_run_tree(root: PathLike, overwrite: bool = False) -> None:
    """Refuse now what :func:`open_run_tree` would refuse: a file in the place of ``root``, or a
    ``root`` holding a run, an ensemble or a cross-validation, unless ``overwrite``.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "replicate_0").mkdir()
        >>> check_run_tree(root)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: ... already holds a run (replicate_0); use --overwrite (overwrite=True) to replace it, ...
    """
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise OutputError(f"output folder {root} is an existing file; choose a folder name")
    held = held_files(root)
    if _worth_keeping(held) and not overwrite:
        raise _refusal(root, held)


def open_run_tree(root: PathLike, overwrite: bool = False) -> Path:
    """The top folder of an ensemble or a cross-validation, ready for its runs: checked as
    :func:`check_run_tree`; with ``overwrite`` what it held is deleted first (runs' folders,
    reports, a run's files and the record; not the ``config.yaml`` and ``train.log`` the command
    line wrote for this run), so that no member or fold of an earlier run is averaged with the new
    ones; then it keeps a record of its files.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "replicate_3").mkdir(); _ = (root / "config.yaml").write_text("")
        >>> sorted(p.name for p in open_run_tree(root, overwrite=True).iterdir())
        ['SHA256SUMS', 'config.yaml']
    """
    root = Path(root)
    check_run_tree(root, overwrite)
    _clear(root, [name for name in held_files(root) if name not in _COMMAND_FILES])
    keep_record(root, fresh=True)
    return root


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _read_lock(lock: Path) -> Dict[str, Any]:
    """What a lock file says of its holder (``{}`` when it cannot be read: it is written once, not atomically)."""
    try:
        return json.loads(lock.read_text())
    except (OSError, ValueError):
        return {}


class RunFolder:
    """The output folder of one training run (a context manager holding its lock).

    Args:
        path: the folder (created if missing).
        overwrite: replace a previous run's files instead of refusing the folder.
        resume: continue the run already in the folder (keep its files and ``run_id``).

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "run"
        >>> with RunFolder(out) as run:
        ...     _ = (out / "metrics.json").write_text("{}")  # a result of the run
        ...     run.finish()
        >>> json.loads((out / "run.json").read_text())["status"]
        'complete'
        >>> RunFolder(out).open()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.OutputError: ... already holds a run (run.json, metrics.json, SHA256SUMS); use --overwrite ...
    """

    def __init__(self, path: PathLike, overwrite: bool = False, resume: bool = False) -> None:
        if overwrite and resume:
            raise OutputError("--overwrite replaces the run in the output folder and --resume continues it; give one of them")
        self.path = Path(path)
        self.overwrite = overwrite
        self.resume = resume
        self.run_id = uuid.uuid4().hex[:12]
        self._locked = False
        self._created = False
        self._wrote_info = False
        self._details: Dict[str, Any] = {}
        self._made_record = False

    @property
    def lock_file(self) -> Path:
        """The lock file inside the folder."""
        return self.path / LOCK_NAME

    def check(self) -> None:
        """Refuse now what :meth:`open` would refuse, without touching the folder: a file in its
        place, a run already in it (unless ``overwrite`` or ``resume``), a lock held by a running
        process. The launcher of a distributed run checks this before starting its processes.

        Example:
            >>> import tempfile
            >>> RunFolder(Path(tempfile.mkdtemp()) / "new").check()
        """
        if self.path.exists() and not self.path.is_dir():
            raise OutputError(f"output folder {self.path} is an existing file; choose a folder name")
        if not self.path.is_dir():
            return
        if self.lock_file.exists():
            stale, problem = self._lock_holder()
            if not (stale and (self.overwrite or self.resume)):
                raise OutputError(problem)
        previous = held_files(self.path)
        if self.resume:
            self._refuse_resume_without_last(previous)
        else:
            self._refuse_previous(previous)

    def _lock_holder(self) -> Tuple[bool, str]:
        """Whether the lock in the folder was left by a killed run, and the error refusing it."""
        holder = _read_lock(self.lock_file)
        same_host = holder.get("host") == socket.gethostname()
        stale = same_host and isinstance(holder.get("pid"), int) and not _process_alive(holder["pid"])
        who = f"process {holder.get('pid')} on {holder.get('host')}" if holder else "another process"
        state = ("was killed before finishing; use --resume to continue it or --overwrite to replace its files"
                 if stale else "is writing to it")
        return stale, f"{self.path} is locked by a run of {who} that {state} (lock file {self.lock_file})"

    def _refuse_previous(self, previous: List[str]) -> None:
        """Refuse a folder holding the files ``previous`` of a run worth keeping, unless ``overwrite``;
        a run stopped before it finished (``run.json`` still says running, ``last.pt`` kept) is
        named as such, with ``--resume`` first, since replacing it throws its epochs away."""
        if not _worth_keeping(previous) or self.overwrite:
            return
        if "last.pt" in previous and _status(self.path) == "running":
            raise OutputError(f"{self.path} holds a run that stopped before it finished ({', '.join(previous)}); use --resume "
                              "(resume=True) to continue it, --overwrite (overwrite=True) to replace it, or choose another "
                              "output folder")
        raise _refusal(self.path, previous)

    def open(self) -> "RunFolder":
        """Check the folder, take the lock, clear a previous run (``overwrite``), write ``run.json``."""
        if self.path.exists() and not self.path.is_dir():
            raise OutputError(f"output folder {self.path} is an existing file; choose a folder name")
        try:
            self._created = not self.path.exists()
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OutputError(f"cannot create output folder {self.path}: {describe_os_error(err)}") from None
        self._take_lock()
        try:
            previous = held_files(self.path)
            self._made_record = RECORD not in previous
            if self.resume:
                keep_record(self.path)
                self._continue(previous)
                return self
            self._refuse_previous(previous)
            _clear(self.path, previous)
            for name in RUN_FILES:  # temporary files of a run killed while writing (never renamed)
                for leftover in self.path.glob(f".{name}.*.tmp"):
                    leftover.unlink(missing_ok=True)
            keep_record(self.path, fresh=True)
            self._write_info("running")
        except BaseException:
            self.close(failed=True)
            raise
        return self

    def _continue(self, previous: List[str]) -> None:
        """Take up the run in the folder (``resume``): its ``run_id`` and ``run.json`` stay as they
        are until training continues; a folder with a run's results but no ``last.pt`` to continue
        from is refused (resuming would train it again from the start, over its results)."""
        self._refuse_resume_without_last(previous)
        info = read_json(self.path / RUN_INFO, "restore it, or use --overwrite (overwrite=True) to train the run again",
                         optional=True) or {}
        self.run_id = info.get("run_id", self.run_id)
        if not info:
            self._write_info("running")

    def _refuse_resume_without_last(self, previous: List[str]) -> None:
        """Refuse to resume a folder holding a run's results (``previous``) but no ``last.pt``; a run
        stopped while it recorded its first epoch is started again (see :func:`_stopped_in_first_epoch`)."""
        if _worth_keeping(previous) and "last.pt" not in previous and not _stopped_in_first_epoch(self.path, previous):
            raise OutputError(f"{self.path} holds a run ({', '.join(previous)}) but no last.pt to continue it from, so --resume "
                              "would train it again from the start; use --overwrite (overwrite=True) to replace it, or choose "
                              "another output folder")

    def _take_lock(self) -> None:
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "run_id": self.run_id, "started": time.time()})
        for attempt in range(2):
            try:
                fd = os.open(self.lock_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                stale, problem = self._lock_holder()
                if attempt == 0 and stale and (self.overwrite or self.resume):
                    self.lock_file.unlink(missing_ok=True)  # left by a killed run; O_EXCL settles races
                    continue
                raise OutputError(problem) from None
            except OSError as err:
                raise OutputError(f"cannot write to output folder {self.path}: {describe_os_error(err)}") from None
            with os.fdopen(fd, "w") as handle:
                handle.write(info)
            self._locked = True
            return

    def _write_info(self, status: str) -> None:
        info = {"run_id": self.run_id, "status": status, "time": time.time(), **self._details}
        atomic_write_text(json.dumps(info), self.path / RUN_INFO)
        self._wrote_info = True

    def record(self, **details: Any) -> None:
        """Record ``details`` of the run (the device it trains on, say) in ``run.json``: now, and
        with every later status; a resumed run's ``run.json`` stays as it was until the run
        finishes.

        Example:
            >>> import tempfile
            >>> with RunFolder(Path(tempfile.mkdtemp()) / "run") as run:
            ...     run.record(device="cpu")
            ...     json.loads((run.path / "run.json").read_text())["device"]
            'cpu'
        """
        self._details.update(details)
        if not self.resume:
            self._write_info("running")

    def finish(self) -> None:
        """Mark the run complete (``run.json``): every file of the folder is now from this run."""
        self._write_info("complete")

    def fail(self, reason: str) -> None:
        """Mark the run failed (``run.json``, with ``reason`` as its ``error``): stopped by an error
        that running it again with the same settings would meet again, after it had written results
        (a ``best.pt`` without what the run adds after training, say).

        Example:
            >>> import tempfile
            >>> with RunFolder(Path(tempfile.mkdtemp()) / "run") as run:
            ...     run.fail("the mc_dropout uncertainty predicts no spread")
            ...     info = json.loads((run.path / "run.json").read_text())
            >>> info["status"], info["error"]
            ('failed', 'the mc_dropout uncertainty predicts no spread')
        """
        self._details["error"] = reason
        self._write_info("failed")

    def close(self, failed: bool = False) -> None:
        """Release the lock. An unfinished run keeps ``status: "running"`` in ``run.json``; with
        ``failed`` and nothing but ``run.json`` written, the folder is left as it was found."""
        if not self._locked:
            return
        if failed and self._wrote_info and not any((self.path / name).exists() for name in RESULT_FILES):
            (self.path / RUN_INFO).unlink(missing_ok=True)
            if self._made_record:
                (self.path / RECORD).unlink(missing_ok=True)
        self.lock_file.unlink(missing_ok=True)
        self._locked = False
        if failed and self._created and not any(self.path.iterdir()):
            self.path.rmdir()

    def __enter__(self) -> "RunFolder":
        return self.open() if not self._locked else self

    def __exit__(self, kind: Optional[type], error: Optional[BaseException], *rest: object) -> None:
        wrote = self._locked and not self.resume and any((self.path / name).exists() for name in RESULT_FILES)
        if isinstance(error, RECURRING_ERRORS) and wrote:  # a refused --resume leaves the run as it was
            self.fail(one_line(error))  # not an interruption or a full disk: --resume continues those
        self.close(failed=kind is not None)
