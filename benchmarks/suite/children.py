"""Running a tool's command as a child process: one thread, its output to a log file, the CPU
time (user + system) it and its own children used, and an end with the suite (on Linux the kernel
stops the child when the suite's process ends, however it ends)."""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

#: Environment of every child: one thread for OpenMP / MKL / torch, DGL on PyTorch.
CHILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "DGLBACKEND": "pytorch",
             "PYTHONUNBUFFERED": "1"}


@dataclass
class Usage:
    """CPU seconds (user + system) and wall seconds of a piece of work."""

    cpu_s: float
    wall_s: float

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.cpu_s + other.cpu_s, self.wall_s + other.wall_s)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def executable(name: str, venv: Optional[Path] = None) -> str:
    """``name`` from ``venv``'s ``bin`` (default: the virtualenv running this script)."""
    folder = (venv / "bin") if venv is not None else Path(sys.executable).parent
    path = folder / name
    if not path.exists():
        raise SystemExit(f"{path} not found" + (": create it (see benchmarks/README.md, 'suite')" if venv else ""))
    return str(path)


#: ``prctl`` option: the signal the kernel sends a process when its parent ends.
PR_SET_PDEATHSIG = 1


def _end_with_parent() -> None:
    """Run in the child before its command: SIGTERM when the suite's process ends (Linux)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class ChildFailed(RuntimeError):
    """A tool's command exited with an error; the message holds the end of its log."""


def run_child(command: List[str], log: Path, extra_env: Optional[Dict[str, str]] = None) -> Usage:
    """Run ``command`` to completion with :data:`CHILD_ENV`, writing its output to ``log``."""
    env = {**os.environ, **CHILD_ENV, **(extra_env or {})}
    log.parent.mkdir(parents=True, exist_ok=True)
    cpu, wall = children_cpu(), time.perf_counter()
    with log.open("w") as handle:
        handle.write(" ".join(command) + "\n\n")
        handle.flush()
        code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env,
                              preexec_fn=_end_with_parent if sys.platform.startswith("linux") else None).returncode
    usage = Usage(children_cpu() - cpu, time.perf_counter() - wall)
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise ChildFailed(f"exit status {code} of {command[0]} (log {log}):\n{tail}")
    return usage
