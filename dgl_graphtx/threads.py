"""How many CPU threads torch's operators use in one process.

Molecule batches are small: a second intra-op thread buys little on an idle machine and costs a
lot as soon as anything else runs (OpenMP threads wait for each other in barriers; see
docs/decisions/threads-and-workers.md and docs/training.md). The rule is therefore **one intra-op thread per
process** unless ``--threads`` (``TrainConfig.threads``) or ``OMP_NUM_THREADS`` says otherwise:
for a single training process, for every DDP rank, and for prediction. DataLoader workers run
with one thread each (torch sets that in every worker).
"""
from __future__ import annotations

import os
from typing import Optional

import torch

from .errors import ConfigError

#: Intra-op threads per process when neither ``--threads`` nor ``OMP_NUM_THREADS`` is given.
DEFAULT_THREADS = 1

#: Environment variables that size the OpenMP / MKL pools of processes started later (DDP ranks,
#: spawned loader workers), set by :func:`set_threads`.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def resolve_threads(threads: Optional[int] = None) -> int:
    """The thread count to use: ``threads`` if given, else ``OMP_NUM_THREADS`` if set to a
    positive integer, else :data:`DEFAULT_THREADS`.

    Example:
        >>> resolve_threads(3)
        3
        >>> resolve_threads(0)
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: threads must be an integer >= 1, got 0 (e.g. --threads 1)
    """
    if threads is None:
        text = os.environ.get("OMP_NUM_THREADS", "").strip()
        return int(text) if text.isdigit() and int(text) >= 1 else DEFAULT_THREADS
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be an integer >= 1, got {threads!r} (e.g. --threads 1)")
    return threads


def set_threads(threads: Optional[int] = None) -> int:
    """Use ``threads`` intra-op threads in this process (resolved by :func:`resolve_threads`) and
    export them as ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` for the processes it starts later.
    Returns the thread count now in use.

    Example:
        >>> before = torch.get_num_threads()
        >>> set_threads(1), torch.get_num_threads(), os.environ["OMP_NUM_THREADS"]
        (1, 1, '1')
        >>> _ = set_threads(before)
    """
    count = resolve_threads(threads)
    for name in THREAD_VARIABLES:
        os.environ[name] = str(count)
    torch.set_num_threads(count)
    return count
