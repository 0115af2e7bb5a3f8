"""Featurizing processes: pools started by a fork server, whose workers end with the process that
started them, however it ends.

:class:`FeaturizingPool` is one pool; :func:`shared_pool` keeps one for the whole process, which
prediction reuses chunk after chunk (starting processes costs about a second each) for graphs and
extra features alike. :func:`part_bounds` cuts work into parts, :func:`parts_in_processes` runs a
function over them, :func:`sendable` and :func:`received` carry RDKit molecules across intact.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, Callable, Iterator, List, Optional, Sequence, Type, TypeVar

import torch
from rdkit import Chem

from .errors import ConfigError
from .validation import check_number

#: Fewest molecules a process works on at a time (fewer molecules than two parts stay in the
#: process that asked).
PART_SIZE = 64
Part = TypeVar("Part")


class FeaturizingPool:
    """``workers`` processes with one torch thread each, started by a fork server that imported
    the library once (spawned where there is none: forking after torch's threads started is
    unsafe). A worker ends as soon as the process that made the pool ends, SIGKILL included, so
    that no work outlives the command that asked for it.

    Example:
        >>> with FeaturizingPool(1) as pool:
        ...     pool.executor.submit(sum, [1, 2]).result()
        3
    """

    def __init__(self, workers: int) -> None:
        self.workers = int(check_number("workers", workers, 1, integer=True))
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload(["dgl_graphtx.datasets"])
        # the workers read one end; this process alone holds the other, which the kernel closes when it ends
        self._alive, self._held = context.Pipe(duplex=False)
        self.executor = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                                            initargs=(self._alive,))

    def close(self) -> None:
        """Stop the workers (pending work is cancelled) and release the pipe."""
        self.executor.shutdown(wait=True, cancel_futures=True)
        self._held.close()
        self._alive.close()

    def __enter__(self) -> "FeaturizingPool":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]) -> None:
        self.close()


_shared: Optional[FeaturizingPool] = None


def shared_pool(workers: int) -> FeaturizingPool:
    """This process's pool of ``workers`` featurizing processes, started on first use and kept
    until the process exits (or a pool of another size is asked for, which replaces it).

    Example:
        >>> shared_pool(1) is shared_pool(1)
        True
    """
    global _shared
    if _shared is None or _shared.workers != workers:
        close_shared_pool()
        _shared = FeaturizingPool(workers)
    return _shared


@atexit.register
def close_shared_pool() -> None:
    """Stop the pool of :func:`shared_pool`, if one runs."""
    global _shared
    if _shared is not None:
        _shared.close()
        _shared = None


def part_bounds(total: int, workers: int, least: int = PART_SIZE) -> List[int]:
    """Bounds ``[0, ..., total]`` of the parts ``total`` molecules are cut into for ``workers``
    processes: a few parts per process (so that a slow part does not leave the others idle), each
    of at least ``least`` molecules; one part when there are fewer than two such parts.

    Example:
        >>> part_bounds(1000, 2), part_bounds(100, 2)
        ([0, 125, 250, 375, 500, 625, 750, 875, 1000], [0, 100])
    """
    count = max(1, min(4 * workers, total // least))
    return [total * i // count for i in range(count + 1)]


@contextmanager
def parts_in_processes(workers: int, function: Callable[[Any, List[object]], Part], argument: Any,
                       molecules: Sequence[Any], bounds: Sequence[int]) -> Iterator[Iterator[Part]]:
    """``function(argument, part)`` for each part ``molecules[bounds[i]:bounds[i + 1]]`` (its
    molecules :func:`sendable`; ``function`` undoes that with :func:`received`) in the pool of
    :func:`shared_pool`; the results come in part order. Leaving the block early (an error, an
    interrupt) cancels the parts not started.

    Example:
        >>> import operator
        >>> with parts_in_processes(1, operator.add, ["head"], ["a", "b", "c"], [0, 2, 3]) as parts:
        ...     list(parts)
        [['head', 'a', 'b'], ['head', 'c']]
    """
    pool = shared_pool(workers)
    futures = [pool.executor.submit(function, argument, [sendable(m) for m in molecules[start:stop]])
               for start, stop in zip(bounds, bounds[1:])]
    try:
        yield (_part_result(future) for future in futures)
    finally:
        for future in futures:
            future.cancel()


def _part_result(future: "Future[Part]") -> Part:
    """What a worker returned for a part; one clear error if the process died (the shared pool,
    which takes no more work then, is closed so that the next call starts a new one)."""
    try:
        return future.result()
    except BrokenProcessPool:
        close_shared_pool()
        raise ConfigError("a featurizing process ended abruptly (out of memory, killed, or started from a script whose "
                          "work is not under `if __name__ == \"__main__\":`, which Python's processes re-run): fix that, "
                          "or use workers=1") from None


@dataclass(frozen=True)
class _MolBytes:
    """An RDKit molecule as it crosses to a featurizing process: RDKit's own pickle drops the
    properties and rounds the coordinates to float32 unless told otherwise."""

    data: bytes


def sendable(molecule: object) -> object:
    """``molecule`` ready to cross to a worker: every RDKit molecule in it (a row may hold a tuple
    of several) with its properties and double-precision coordinates (undone by :func:`received`).

    Example:
        >>> from rdkit import Chem
        >>> mol = Chem.MolFromSmiles("CO")
        >>> mol.SetProp("name", "methanol")
        >>> received(sendable(mol)).GetProp("name"), received(sendable(("C", mol)))[0]
        ('methanol', 'C')
    """
    if isinstance(molecule, Chem.Mol):
        return _MolBytes(molecule.ToBinary(Chem.PropertyPickleOptions.AllProps | Chem.PropertyPickleOptions.CoordsAsDouble))
    if isinstance(molecule, tuple):
        return tuple(sendable(part) for part in molecule)
    return molecule


def received(molecule: object) -> object:
    """The inverse of :func:`sendable`."""
    if isinstance(molecule, _MolBytes):
        return Chem.Mol(molecule.data)  # type: ignore[call-overload]  # RDKit's stubs type its binary form as str; it is bytes
    if isinstance(molecule, tuple):
        return tuple(received(part) for part in molecule)
    return molecule


def _start_worker(command_alive: Connection) -> None:
    """Initializer of a featurizing process: one torch thread, and an end with the process that
    started it (see :func:`_exit_with_command`)."""
    torch.set_num_threads(1)
    threading.Thread(target=_exit_with_command, args=(command_alive,), daemon=True).start()


def _exit_with_command(command_alive: Connection) -> None:
    """Wait until the command's end of the pipe closes, which the kernel does when the command
    ends, however it ends (SIGKILL included), then end this worker at once. The fork server and
    the resource tracker, which run while some process holds their pipes, end with the last worker."""
    try:
        command_alive.recv()
    except EOFError:
        pass
    os._exit(1)
