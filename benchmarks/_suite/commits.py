"""``--commit``: each finished run's small result files committed to the current branch at once,
so that results of a long background run survive the end of the session that started it."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

from .config import REPO


def commit_files(paths: Sequence[Path], message: str) -> None:
    """Commit exactly ``paths`` (anything else staged stays staged); a failure is printed, not raised."""
    names = [str(p) for p in paths if p.exists()]
    for command in (["git", "add", "--", *names], ["git", "commit", "-q", "-m", message, "--", *names]):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"    commit skipped: {' '.join(command[:2])}: {(done.stderr or done.stdout).strip()[:300]}", flush=True)
            return
