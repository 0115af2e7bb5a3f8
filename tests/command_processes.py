"""The ``dgl-graphtx`` command, or a stand-in, in processes of their own (shared by the tests that
start, interrupt or kill them)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import List, Sequence, Tuple, Union

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


def shown(stderr: str, chars: int = 3000) -> str:
    """The end of a process's ``stderr`` for a failing test's message, without faulthandler's line
    of extension modules (thousands of characters that would push out what went wrong)."""
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("Extension modules:"))[-chars:]


def run_bounded(args: Sequence[str], timeout_s: float, retries: int = 0) -> subprocess.CompletedProcess:
    """``args`` run to the end, their output captured. Past ``timeout_s`` every Python process of
    the tree dumps its threads' stacks (faulthandler, on SIGABRT), then all are killed, leaving none
    behind; the test fails with what they printed and where each one was. With ``retries`` (for a
    command that can be run again, such as a resume), that report is a warning and the command runs
    again, up to ``retries`` more times."""
    for attempt in range(retries):
        done = _run_once(args, timeout_s)
        if isinstance(done, subprocess.CompletedProcess):
            return done
        warnings.warn(f"{done}\nrunning it again ({attempt + 1} of {retries})")
    done = _run_once(args, timeout_s)
    if isinstance(done, str):
        raise AssertionError(done)
    return done


def _run_once(args: Sequence[str], timeout_s: float) -> Union[subprocess.CompletedProcess, str]:
    """``args`` run to the end, or past ``timeout_s`` stopped (:func:`_stopped_with_stacks`) and reported."""
    job = subprocess.Popen(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**command_env(), "PYTHONFAULTHANDLER": "1"}, cwd=REPO)
    try:
        out, err = job.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        out, err = _stopped_with_stacks(job)
        return (f"{' '.join(args[:6])} ... did not end within {timeout_s} s; what its processes printed, then their "
                f"stacks:\n{out[-2000:]}\n{err[-12000:]}")
    return subprocess.CompletedProcess(list(args), job.returncode, out, err)


def _stopped_with_stacks(job: subprocess.Popen) -> Tuple[str, str]:
    """``job`` and every process it started stopped, each Python one first dumping its stacks; what they printed."""
    tree = [job.pid, *descendants(job.pid)]
    for how in (signal.SIGABRT, signal.SIGKILL):
        for pid in reversed(tree):  # the workers first: their launcher would stop them otherwise
            try:
                os.kill(pid, how)
            except ProcessLookupError:
                pass
        time.sleep(2)
    return job.communicate()


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
