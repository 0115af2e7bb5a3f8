"""A prediction table made by several processes: the input's rows cut into one contiguous shard
per process, each shard written beside the output as a resumable part (a
:class:`~dgl_graphtx.progressive_csv.ProgressiveCSV` ``.partial`` with its record), and the parts
joined, byte for byte, into the one output, rows in input order.

:func:`~dgl_graphtx.runs.sharded_prediction.predict_in_processes` runs it under torchrun
(``dgl-graphtx predict --nproc N``): every process predicts its shard (``PredictionJob.shard``),
waits for the others, and the main one joins the parts. An interrupted run continues with
``--resume``: every process takes up its own part, and the join checks each part's record (same
input, checkpoints and settings; every row of the shard written; the bytes unchanged) before it
writes the output.
"""
from __future__ import annotations

import glob
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

from ..atomic_io import atomic_path, check_writable
from ..errors import OutputError
from ..progressive_csv import ProgressiveCSV, WriterLock

PathLike = Union[str, Path]


def shard_rows(total: int, index: int, count: int) -> Tuple[int, int]:
    """The rows ``[start, stop)`` of shard ``index`` of ``count`` over ``total`` rows: contiguous,
    in order, sizes differing by at most one.

    Example:
        >>> [shard_rows(10, i, 3) for i in range(3)], shard_rows(1, 1, 2)
        ([(0, 4), (4, 7), (7, 10)], (1, 1))
    """
    if not 0 <= index < count:
        raise ValueError(f"shard {index} of {count} does not exist")
    base, extra = divmod(total, count)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def shard_path(output: PathLike, index: int, count: int) -> Path:
    """Where shard ``index`` of ``count`` writes its part of ``output`` (its ``.partial`` and
    record add their suffixes).

    Example:
        >>> shard_path("out/p.tsv", 1, 4).as_posix()
        'out/p.shard-2-of-4.tsv'
    """
    path = Path(output)
    return path.with_name(f"{path.stem}.shard-{index + 1}-of-{count}{path.suffix}")


def shard_source(source: Mapping[str, Any], index: int, count: int) -> dict:
    """The record's ``source`` of a shard's part: the job's, and which shard of how many.

    Example:
        >>> shard_source({"input": "ab"}, 0, 2)
        {'input': 'ab', 'shard': [1, 2]}
    """
    return {**source, "shard": [index + 1, count]}


def other_parts(output: PathLike, count: int) -> Dict[Path, int]:
    """The unfinished parts (``.partial`` files) of ``output`` that a run split into another number
    of processes than ``count`` left (``count`` 1: a run in one process, whose ``.partial`` is the
    output's own), in order of name, each with the number of processes of its run.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "p.csv"
        >>> for name in ("p.shard-1-of-2.csv.partial", "p.shard-2-of-3.csv.partial", "p.csv.partial"):
        ...     _ = (out.parent / name).write_text("")
        >>> [p.name for p in other_parts(out, 2)], [p.name for p in other_parts(out, 1)]
        (['p.csv.partial', 'p.shard-2-of-3.csv.partial'], ['p.shard-1-of-2.csv.partial', 'p.shard-2-of-3.csv.partial'])
    """
    path = Path(output)
    pattern = re.compile(re.escape(path.stem) + r"\.shard-\d+-of-(\d+)" + re.escape(path.suffix) + r"\.partial")
    found = {p: int(match.group(1)) for p in path.parent.glob(f"{glob.escape(path.stem)}.shard-*{glob.escape(path.suffix)}.partial")
             if (match := pattern.fullmatch(p.name)) is not None and int(match.group(1)) != count}
    if count > 1 and _partial(path).exists():
        found[_partial(path)] = 1
    return dict(sorted(found.items()))


def clear_other_parts(output: PathLike, count: int, resume: bool) -> None:
    """Before a run of ``count`` processes writes ``output``: with ``resume``, refuse parts that a
    run split otherwise left (they cannot be continued by this one: one line saying how many
    processes would); without it, remove them (unless another run is writing one)."""
    parts = other_parts(output, count)
    if not parts:
        return
    if resume:
        how = " or ".join("in one process (without --nproc)" if n == 1 else f"with --nproc {n}" for n in sorted(set(parts.values())))
        raise OutputError(f"cannot resume {output} in {count} process(es): an interrupted run left its rows in "
                          f"{', '.join(p.name for p in parts)}; resume {how}, or run without --resume to start again")
    for part in parts:
        finished = Path(str(part)[: -len(".partial")])
        try:
            lock = WriterLock(finished)
        except OutputError:
            continue  # another run is writing it
        part.unlink(missing_ok=True)
        part.with_name(part.name + ".json").unlink(missing_ok=True)
        lock.release()


def check_joinable(output: PathLike) -> None:
    """Before the processes of a split run start: refuse, with
    :class:`~dgl_graphtx.errors.OutputError`, an ``output`` that cannot be written (a folder of
    that name, a read-only folder) or that another run is writing (it holds its writer's lock),
    so that the job does not predict every row to fail at the join.

    Example:
        >>> import tempfile
        >>> check_joinable(Path(tempfile.mkdtemp()) / "p.csv")
    """
    check_writable(output)
    WriterLock(output).release()


def join_shards(output: PathLike, sources: Sequence[Mapping[str, Any]], rows: Sequence[int], sep: str) -> Path:
    """Write ``output`` from the parts of its ``len(sources)`` shards: each part's header checked
    against the first's and left out after it, every row in order; the parts are removed once the
    output is in place. Each part is checked as a resume checks it (its record names
    ``sources[i]``, its bytes match the record's digest) and must hold ``rows[i]`` rows.

    Example:
        >>> import tempfile, pandas as pd
        >>> out = Path(tempfile.mkdtemp()) / "p.csv"
        >>> for i, part in enumerate([pd.DataFrame({"y": [1, 2]}), pd.DataFrame({"y": [3]})]):
        ...     ProgressiveCSV(shard_path(out, i, 2), source=shard_source({}, i, 2)).append(part)
        >>> join_shards(out, [shard_source({}, i, 2) for i in range(2)], [2, 1], ",").read_text()
        'y\\n1\\n2\\n3\\n'
        >>> sorted(p.name for p in out.parent.iterdir())
        ['p.csv']
    """
    count = len(sources)
    parts: List[ProgressiveCSV] = []
    try:
        for index, (source, expected) in enumerate(zip(sources, rows)):
            path = shard_path(output, index, count)
            if _partial(path).exists():
                parts.append(ProgressiveCSV(path, resume=True, sep=sep, source=source))
            held = parts[-1].rows_done if len(parts) == index + 1 else 0
            if held != expected:
                raise OutputError(f"cannot join the {count} parts of {output}: part {index + 1} ({_partial(path).name}) holds "
                                  f"{held} of its {expected} rows; rerun with --resume to finish it")
        _write_joined(output, [part.partial for part in parts])
        for part in parts:
            part.partial.unlink(missing_ok=True)
            part.record.unlink(missing_ok=True)
    finally:
        for part in parts:
            part.close()
    return Path(output)


def _write_joined(output: PathLike, partials: Sequence[Path]) -> None:
    """``output`` (atomically, under its writer's lock): the first part's header, then every
    part's rows; a part whose header differs is refused."""
    header = _first_line(partials[0])
    for index, partial in enumerate(partials[1:], start=2):
        other = _first_line(partial)
        if other != header:
            raise OutputError(f"cannot join the parts of {output}: part {index} has other columns than part 1 "
                              f"({other.decode(errors='replace').strip()!r} vs {header.decode(errors='replace').strip()!r})")
    lock = WriterLock(output)  # no other run writes the output meanwhile
    try:
        with atomic_path(output) as temporary, open(temporary, "wb") as out:
            out.write(header)
            for partial in partials:
                with open(partial, "rb") as handle:
                    handle.readline()
                    shutil.copyfileobj(handle, out, 1 << 20)
    finally:
        lock.release()


def _partial(path: Path) -> Path:
    return path.with_name(path.name + ".partial")


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.readline()
