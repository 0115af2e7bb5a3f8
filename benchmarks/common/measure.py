"""Measurements of the checks: timing (warm-up, repeats, interleaving, medians) and memory
(resident and peak sizes of this process, read from Linux's ``/proc``)."""
from __future__ import annotations

import gc
import resource
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence


def time_repeats(fn: Callable[[], object], repeats: int, warmup: int = 1, setup: Optional[Callable[[], object]] = None) -> List[float]:
    """Seconds of ``repeats`` timed calls of ``fn`` after ``warmup`` untimed ones; ``setup`` (if
    given) runs before every call, warm-up included, outside the timed region."""
    times = []
    for rep in range(warmup + repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        if rep >= warmup:
            times.append(time.perf_counter() - start)
    return times


def time_interleaved(fns: Dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> Dict[str, List[float]]:
    """Like :func:`time_repeats` for several functions at once, their timed calls interleaved
    (``a b``, then ``b a``, ...), so that load bursts from other processes hit all of them alike."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: Dict[str, List[float]] = {name: [] for name in names}
    for rep in range(repeats):
        for name in names if rep % 2 == 0 else reversed(names):
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """Relative spread ``(max - min) / median`` of repeated timings (a noise indicator)."""
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else float("nan")


def status_mb(field: str) -> float:
    """A size of this process from ``/proc/self/status`` (``VmRSS``, ``VmHWM``, ``RssAnon``, ...) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident size (``getrusage``) of this process, or of its waited-for children, in MiB."""
    return resource.getrusage(who).ru_maxrss / 1024  # kB on Linux


class PeakMemory:
    """Growth of the peak resident size over the resident size at the start of a ``with`` block (GB)."""

    def __enter__(self) -> "PeakMemory":
        gc.collect()
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident size
        self.start = status_mb("VmRSS")
        return self

    def __exit__(self, *exc) -> None:
        self.gb = (status_mb("VmHWM") - self.start) / 1024
