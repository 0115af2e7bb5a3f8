"""The ``dgl-graphtx`` command, or a stand-in, in processes of their own (shared by the tests that
start, interrupt or kill them)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence

REPO = Path(__file__).resolve().parents[1]


def command_env() -> dict:
    """This environment with the repository importable and one thread per process."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1", "DGLBACKEND": "pytorch"}


def interruptible() -> None:
    """``preexec_fn`` of a process a test interrupts with SIGINT: the signal's default action, which
    a shell's background job (how CI may run the tests) passes on as ignored, and Python then keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_command(argv: Sequence[object], timeout_s: float = 300) -> subprocess.CompletedProcess:
    """``python -m dgl_graphtx argv`` in a process of its own, its output captured."""
    return subprocess.run([sys.executable, "-m", "dgl_graphtx", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout_s, env=command_env(), cwd=REPO)


def descendants(pid: int) -> List[int]:
    """The processes started by ``pid``, by their children and so on (read from ``/proc``), which
    may have left its process group: torchrun starts each worker in a session of its own."""
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit():
            parents.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in parents.get(parent, [])]
        found += frontier
    return found


def run_bounded(args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess:
    """``args`` run to the end, their output captured. Past ``timeout_s`` the test fails with what
    the processes printed and where each one was: every Python process of the tree dumps its
    threads' stacks (faulthandler, on SIGABRT), then all are killed, leaving none behind."""
    job = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**command_env(), "PYTHONFAULTHANDLER": "1"}, cwd=REPO)
    try:
        out, err = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        tree = [job.pid, *descendants(job.pid)]
        for how in (signal.SIGABRT, signal.SIGKILL):
            for pid in reversed(tree):  # the workers first: their launcher would stop them otherwise
                try:
                    os.kill(pid, how)
                except ProcessLookupError:
                    pass
            time.sleep(2)
        out, err = job.communicate()
        raise AssertionError(f"{' '.join(args[:6])} ... did not end within {timeout_s} s; what its processes "
                             f"printed, then their stacks:\n{out[-2000:]}\n{err[-12000:]}") from None
    return subprocess.CompletedProcess(list(args), job.returncode, out, err)


def assert_process_ends(pid: int, within_s: float, what: str, poll_s: float = 0.05) -> None:
    """Process ``pid`` ends within ``within_s`` seconds; else it is killed and the test fails with ``what``."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(poll_s)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError(what)
