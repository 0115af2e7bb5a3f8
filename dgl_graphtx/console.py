"""The entry points of the ``dgl-graphtx`` command, light to import.

Loading the command takes seconds (torch, DGL, RDKit, matplotlib). These functions load it inside
their own ``try``, so that Ctrl-C meanwhile is the one ``error: interrupted (Ctrl-C)`` line with exit
status 130, as Ctrl-C later is (:func:`dgl_graphtx.cli.console_main`), not Python's traceback; and
they end with the command's exit status, also where CPython would end by SIGINT (see
:func:`_interruption_was_handled`). :func:`console_main` is the installed ``dgl-graphtx`` script,
:func:`module_main` is ``python -m dgl_graphtx`` (also torchrun's module entry point).
"""
from __future__ import annotations

import ctypes
import signal
import sys
from typing import Callable, List, NoReturn, Optional

from .errors import INTERRUPTED, INTERRUPTED_EXIT, raised_by_interruption


def console_main() -> int:
    """The ``dgl-graphtx`` console script: :func:`dgl_graphtx.cli.console_main`, loaded here."""
    return _run(_load_command)


def module_main() -> int:
    """``python -m dgl_graphtx``: the command wrapped in torch's ``record``, so that an uncaught
    exception in one process of a torchrun job is written where the elastic launcher finds it and
    shown in its summary; a process of such a job that finished ends without the interpreter's
    shutdown (:func:`~dgl_graphtx.runs.distributed.end_process`)."""
    return _run(_load_torchrun_command)


def _load_command() -> Callable[[], int]:
    from .cli import console_main as command
    return command


def _load_torchrun_command() -> Callable[[], int]:
    from torch.distributed.elastic.multiprocessing.errors import record

    from .cli import console_main as command
    from .runs.distributed import end_process, launched_by_torchrun

    def run() -> int:
        code = record(command)() or 0
        if launched_by_torchrun():
            end_process(code)
        return code
    return run


def _run(load: Callable[[], Callable[[], int]]) -> int:
    """The command ``load`` gives, run; Ctrl-C while it loads (a ``KeyboardInterrupt``, or the error
    a module's import raised while one unwound, or after the signal came) is the interruption's line
    and :data:`~dgl_graphtx.errors.INTERRUPTED_EXIT`; any other error is raised."""
    signals: List[int] = []
    noting = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not where SIGINT is ignored
    if noting:
        signal.signal(signal.SIGINT, lambda number, frame: _noted(signals, number))
    command: Optional[Callable[[], int]] = None
    try:
        command = load()
    except BaseException as err:
        if not (signals or raised_by_interruption(err)):
            raise
    finally:
        if noting:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if command is None:
        print(f"error: {INTERRUPTED}", file=sys.stderr, flush=True)
        code = INTERRUPTED_EXIT
    else:
        code = command()
    _interruption_was_handled()
    return code


def _noted(signals: List[int], number: int) -> NoReturn:
    """Python's own SIGINT handler (``KeyboardInterrupt``), noting the signal first."""
    signals.append(number)
    raise KeyboardInterrupt


def _interruption_was_handled() -> None:
    """Tell CPython that no ``KeyboardInterrupt`` went unhandled. Ctrl-C inside code that a C
    extension ran through ``PyRun_String`` (pybind11's and Boost.Python's ``exec``: torch, RDKit)
    sets a flag that stays set after the command caught the interruption, and the interpreter then
    ends by SIGINT (status -2, seen 3 times in 24) instead of with the command's status; a
    ``PyRun_SimpleString`` that succeeds clears it."""
    api = getattr(ctypes, "pythonapi", None)  # CPython
    if api is not None:
        api.PyRun_SimpleString(b"")
