"""What a training run records after each epoch: the ``log.csv`` row, the best epoch so far (by
the watched validation metric) with its ``best.pt``, ``last.pt`` with the state to resume from,
and the early-stopping decision."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

import pandas as pd
import torch

from ..atomic_io import atomic_to_csv
from ..models import MoleculeModel
from .resume import TrainingState
from .run_checkpoints import RunCheckpoints

logger = logging.getLogger("dgl_graphtx")


def is_better(score: float, best: Optional[float], direction: str) -> bool:
    """Whether the validation ``score`` beats ``best`` for a metric whose better values are
    ``direction`` (``min`` or ``max``): anything beats no (or a NaN) best, a NaN score nothing else.

    Example:
        >>> is_better(0.5, 0.7, "min"), is_better(0.5, 0.7, "max"), is_better(float("nan"), None, "min")
        (True, False, True)
    """
    if best is None or math.isnan(best):
        return True
    if math.isnan(score):
        return False
    return score < best if direction == "min" else score > best


@dataclass
class EpochBookkeeping:
    """Records the finished epochs of one :meth:`~dgl_graphtx.training.Trainer.fit` call into
    ``state`` and the run's files (through ``checkpoints``, whose folder and processes it shares).

    Attributes:
        state: the run's progress (restored from ``last.pt`` when resumed).
        checkpoints: writes ``best.pt`` and ``last.pt``.
        model, optimizer, scheduler: what ``last.pt`` saves (``best.pt``: the model).
        direction: ``min`` or ``max``, the better values of the watched metric.
        patience: stop after this many epochs without improvement (0: never).
        epochs: the run's last epoch.
    """

    state: TrainingState
    checkpoints: RunCheckpoints
    model: MoleculeModel
    optimizer: torch.optim.Optimizer
    scheduler: Any
    direction: str
    patience: int
    epochs: int

    def end_epoch(self, epoch: int, row: Dict[str, float], metrics: Dict[str, float], score: Optional[float]) -> bool:
        """Record ``epoch`` (its ``log.csv`` row, validation ``metrics`` and the watched metric's
        ``score``; ``None`` without validation: every epoch improves) and save its checkpoints;
        whether training stops early after it. Every process calls it."""
        state, hooks = self.state, self.checkpoints.hooks
        improved = score is None or is_better(score, state.best_score, self.direction)
        state.history.append(row)
        state.epoch = epoch
        self.write_log()  # before the checkpoint: a run killed in between never has a best.pt from an unlogged epoch
        if improved:
            state.record_best(epoch, score, metrics, self.model.state_dict())
            self.checkpoints.save_best(self.model, epoch, metrics)
        stop = bool(self.patience) and epoch - state.best_epoch >= self.patience
        state.finished = stop or epoch == self.epochs
        self.checkpoints.save_last(self.model, state, self.optimizer, self.scheduler)
        hooks.end_epoch(epoch, row)
        if stop and hooks.is_main:
            logger.info("early stopping at epoch %d (best epoch %d)", epoch, state.best_epoch)
        return stop

    def write_log(self) -> None:
        """``log.csv``: one row per epoch so far (main process, runs with a folder only)."""
        out_dir = self.checkpoints.out_dir
        if out_dir is not None and self.checkpoints.hooks.is_main:
            atomic_to_csv(pd.DataFrame(self.state.history), out_dir / "log.csv", index=False)
