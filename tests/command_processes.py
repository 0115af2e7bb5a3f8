"""The ``dgl-graphtx`` command, or a stand-in, in processes of their own (shared by the tests that
start, interrupt or kill them)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

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
