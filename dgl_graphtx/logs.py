"""Progress and log output that suits where it goes: a live bar on a terminal, one log line every
few seconds (or per epoch) in files, CI logs and ``nohup`` output, and a ``train.log`` per run."""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sized, Union

from tqdm.auto import tqdm

logger = logging.getLogger("dgl_graphtx")

#: Seconds between two progress log lines when stderr is not a terminal.
LOG_INTERVAL = 10.0
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class LogProgress:
    """Iterates like ``tqdm`` but reports as log lines: at most one every ``interval`` seconds
    (``0``: after every item), plus one at the end; :meth:`set_postfix` values are appended.
    ``initial`` items were done before (a resumed run): counts start there, so epoch 4 of 100
    reads ``4/100``. The rate reads ``items/s``, or ``s/item`` when an item takes over a second.

    Example:
        >>> bar = LogProgress(range(3), "demo", "step", interval=0)
        >>> sum(bar)
        3
        >>> LogProgress([], "training", "epoch").rate(2, 30.0), LogProgress([], "x", "mol").rate(50, 2.0)
        ('15.0 s/epoch', '25.0 mol/s')
    """

    def __init__(self, iterable: Iterable[Any], desc: str, unit: str, interval: float = LOG_INTERVAL,
                 total: Optional[int] = None, initial: int = 0) -> None:
        self.iterable = iterable
        self.desc, self.unit, self.interval, self.initial = desc, unit, interval, initial
        self.total = total if total is not None else (len(iterable) if isinstance(iterable, Sized) else None)
        self.postfix = ""

    def rate(self, done: int, elapsed: float) -> str:
        """``"12.0 mol/s"``, or ``"15.0 s/epoch"`` when one item takes more than a second."""
        if elapsed <= 0 or not done:
            return ""
        per_second = done / elapsed
        return f"{per_second:.1f} {self.unit}/s" if per_second >= 1 else f"{elapsed / done:.1f} s/{self.unit}"

    def set_postfix(self, **values: Any) -> None:
        """Values shown after the count in the next log line."""
        self.postfix = ", ".join(f"{k} {v}" for k, v in values.items())

    def _line(self, done: int, start: float) -> None:
        elapsed = time.perf_counter() - start
        count = f"{self.initial + done}/{self.total}" if self.total is not None else str(self.initial + done)
        rate = self.rate(done, elapsed)
        logger.info("%s: %s %s%s (%s%.1f s)", self.desc, count, self.unit,
                    f"; {self.postfix}" if self.postfix else "", f"{rate}, " if rate else "", elapsed)

    def __iter__(self) -> Iterator[Any]:
        start = last = time.perf_counter()
        done = 0
        for item in self.iterable:
            yield item
            done += 1
            now = time.perf_counter()
            if now - last >= self.interval and (self.total is None or self.initial + done < self.total):
                self._line(done, start)
                last = now
        self._line(done, start)


def progress(iterable: Iterable[Any], desc: str, unit: str, enabled: bool = True,
             interval: float = LOG_INTERVAL, total: Optional[int] = None, initial: int = 0) -> Iterable[Any]:
    """``iterable`` with progress reporting: a tqdm bar when stderr is a terminal, else
    :class:`LogProgress` log lines; unchanged when not ``enabled``. ``initial``: items already
    done (counted in, with ``total`` the whole count).

    Example:
        >>> list(progress(range(2), "x", "item", enabled=False))
        [0, 1]
    """
    if not enabled:
        return iterable
    if sys.stderr.isatty():
        return tqdm(iterable, desc=desc, unit=unit, total=total, initial=initial)
    return LogProgress(iterable, desc, unit, interval, total, initial)


def configure_logging(verbosity: int = 0) -> None:
    """Console logging for command-line use: ``-1`` quiet (warnings and errors only), ``0``
    progress and summaries, ``1`` verbose (debug). Only configures the console when the
    application has not (the root logger has no handler); ``dgl_graphtx`` records always reach
    INFO so run logs (:func:`log_to_file`) stay complete.

    Example:
        >>> configure_logging(0); logging.getLogger("dgl_graphtx").level == logging.INFO
        True
    """
    console = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}[max(-1, min(1, verbosity))]
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.setLevel(console)
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    logger.setLevel(logging.DEBUG if verbosity > 0 else logging.INFO)


@contextlib.contextmanager
def log_to_file(path: Union[str, Path]) -> Iterator[Path]:
    """Copy ``dgl_graphtx`` log records (INFO and up, with timestamps) to ``path`` while the
    block runs (appending; nested calls for the same file add no second copy).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "train.log"
        >>> with log_to_file(path):
        ...     logger.info("hello")
        >>> "hello" in path.read_text()
        True
    """
    path = Path(path).resolve()
    if any(isinstance(h, logging.FileHandler) and Path(h.baseFilename) == path for h in logger.handlers):
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.DEBUG if logger.getEffectiveLevel() <= logging.DEBUG else logging.INFO)
    previous = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(previous)
