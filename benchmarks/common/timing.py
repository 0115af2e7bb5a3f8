"""Timing helpers of the benchmarks: warm-up, repeats, interleaving, medians."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence


def time_repeats(fn: Callable[[], object], repeats: int, warmup: int = 1, setup: Optional[Callable[[], object]] = None) -> List[float]:
    """Seconds of ``repeats`` timed calls of ``fn`` after ``warmup`` untimed ones.

    ``setup`` (if given) runs before every call, warm-up included, outside the timed region.
    """
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    times = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def time_interleaved(
    fns: Dict[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> Dict[str, List[float]]:
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
