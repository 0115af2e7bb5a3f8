"""``--commit``: each finished run's small result files committed to the current branch at once,
so that results of a long background run survive the end of the session that started it."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Sequence

from .config import REPO


def _git(command: Sequence[str], tries: int = 5) -> str:
    """Run a git command in the repository, retrying while another git process holds its lock;
    the error text of the last try, or ``""`` on success."""
    for attempt in range(tries):
        done = subprocess.run(["git", *command], cwd=REPO, capture_output=True, text=True)
        if done.returncode == 0:
            return ""
        time.sleep(2 * (attempt + 1))
    return (done.stderr or done.stdout).strip()[:300]


def commit_files(paths: Sequence[Path], message: str) -> None:
    """Commit exactly ``paths`` (anything else staged stays staged); a failure is printed, not raised."""
    names = [str(p) for p in paths if p.exists()]
    problem = _git(["add", "--", *names]) or _git(["commit", "-q", "-m", message, "--", *names])
    if problem:
        print(f"    commit skipped: {problem}", flush=True)
