"""How one training process cooperates with its peers: the single-process default.

:class:`~dgl_graphtx.training.Trainer` asks a :class:`ProcessHooks` object which rows of a split
it handles, how to combine numbers and predictions with the other processes, whether it is the
process that writes files, and which module to run the training forward through. This default
is one process doing everything; :class:`dgl_graphtx.runs.distributed.DistributedContext` overrides the
same methods with ``torch.distributed`` collectives, so the trainer has no distributed branches.
"""
from __future__ import annotations

from contextlib import contextmanager, suppress
from typing import Any, Dict, Iterator, List

import torch
from torch import nn
from torch.utils.data import Dataset, Sampler
from torch.utils.data.distributed import DistributedSampler

from ..errors import ConfigError, PeerFailedError


class ProcessHooks:
    """Single-process behaviour of the trainer's cooperation points.

    The training sampler is a :class:`~torch.utils.data.distributed.DistributedSampler` over one
    replica: a fresh permutation per epoch from ``seed + epoch``. A run with ``N`` processes
    draws the same permutation and deals it out round-robin, so the global batches of both are
    the same sets of molecules, and a resumed run needs no sampler state.

    Example:
        >>> hooks = ProcessHooks()
        >>> hooks.is_main, hooks.local_batch_size(32), list(hooks.shard_indices(3))
        (True, 32, [0, 1, 2])
    """

    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Whether this process writes checkpoints, logs, plots and shows progress bars."""
        return self.rank == 0

    def local_batch_size(self, global_batch_size: int) -> int:
        """Molecules per batch in this process for a global batch of ``global_batch_size``."""
        if global_batch_size % self.world_size:
            raise ConfigError(
                f"batch size {global_batch_size} is not divisible by the {self.world_size} processes; "
                f"use a multiple of {self.world_size} (the batch size is the global batch over all processes)"
            )
        return global_batch_size // self.world_size

    def train_sampler(self, dataset: Dataset, seed: int) -> Sampler:
        """Epoch-seeded shuffling over this process's share of ``dataset`` (has ``set_epoch``)."""
        return DistributedSampler(dataset, num_replicas=self.world_size, rank=self.rank, shuffle=True, seed=seed)

    def shard_indices(self, num_rows: int) -> range:
        """Rows of an evaluation split predicted by this process (every row exactly once overall)."""
        return range(self.rank, num_rows, self.world_size)

    def gather_rows(self, local: torch.Tensor, num_rows: int) -> torch.Tensor:
        """All ``num_rows`` rows, from each process's ``local`` rows of :meth:`shard_indices`."""
        return local

    def all_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum of ``values`` over processes."""
        return values

    def gather_objects(self, obj: Any) -> List[Any]:
        """``obj`` of every process, in rank order."""
        return [obj]

    def wrap_model(self, model: nn.Module) -> nn.Module:
        """The module the training forward and backward run through."""
        return model

    def barrier(self) -> None:
        """Wait for every process."""

    def end_epoch(self, epoch: int, row: Dict[str, float]) -> None:
        """Called after every epoch with its ``log.csv`` row (``valid_<metric>`` entries included);
        a subclass may stop training by raising (hyperparameter search prunes trials this way)."""

    @contextmanager
    def main_first(self) -> Iterator[None]:
        """Run the block in the main process first, then in the others (e.g. to fill a cache once).
        When the block fails in the main process, the others do not run it: they raise
        :class:`~dgl_graphtx.errors.PeerFailedError` at once, instead of waiting for a process
        that is gone (the main process reports the error).

        Example:
            >>> with ProcessHooks().main_first():
            ...     pass
        """
        if not self.is_main:
            failure = self.gather_objects(None)[0]
            if failure is not None:
                raise PeerFailedError(f"the main process stopped: {failure}")
            yield
            return
        try:
            yield
        except BaseException as err:
            with suppress(Exception):  # the error raised below says what happened, even if the others cannot be told
                self.gather_objects(f"{type(err).__name__}: {err}")
            raise
        self.gather_objects(None)
