"""What a killed training run needs to continue exactly: epoch, optimizer, scheduler, early-stopping
state, the best weights so far and the random number generators of every process.

Everything is converted to tensors, numbers, strings, lists and dicts, so the state travels inside
a normal checkpoint and loads with ``torch.load(..., weights_only=True)``.
"""
from __future__ import annotations

import copy
import logging
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast

import numpy as np
import torch

from ..datasets.data_record import PARTS
from ..errors import ConfigError

logger = logging.getLogger("dgl_graphtx")

#: TrainConfig fields that may differ between a run and its resumption.
RESUMABLE_CHANGES = ("device", "compute", "num_workers", "progress", "threads")
#: PretrainConfig fields that may differ between a pretraining run and its resumption: they shape no step of it.
RESUMABLE_PRETRAINING = ("workers", "corpus_name", "corpus_licence", "notes")


def capture_rng_state() -> Dict[str, Any]:
    """The state of Python's, NumPy's and torch's (CPU and CUDA) generators, as plain data.

    Example:
        >>> state = capture_rng_state(); a = torch.rand(2)
        >>> restore_rng_state(state); bool(torch.equal(a, torch.rand(2)))
        True
    """
    legacy_state = cast(Tuple[str, np.ndarray, int, int, float], np.random.get_state())  # legacy=True: the tuple
    name, keys, pos, has_gauss, gauss = legacy_state
    version, internal, gauss_next = random.getstate()
    return {
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "gauss": float(gauss)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_state(state: Dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`. The CUDA states are restored for the GPUs visible
    now; when they were saved with more GPUs than are visible (or none is), the ones that fit are
    restored and a warning says that the run will not repeat the uninterrupted one exactly."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss_next"]))
    nps = state["numpy"]
    np.random.set_state((nps["name"], nps["keys"].numpy().astype(np.uint32), nps["pos"], nps["has_gauss"], nps["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    saved = list(state["cuda"])
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for device, gpu_state in enumerate(saved[:visible]):
        torch.cuda.set_rng_state(gpu_state.cpu(), device)
    if len(saved) > visible:
        now = "no GPU is visible" if not visible else f"{visible} GPU{' is' if visible == 1 else 's are'} visible"
        logger.warning("the checkpoint holds the random-number states of %d GPUs and %s now: restored %d of them; the run "
                       "continues but will not repeat the uninterrupted one exactly", len(saved), now, min(visible, len(saved)))


@dataclass
class TrainingState:
    """Progress of a run after its last completed epoch.

    Attributes:
        epoch: last completed epoch (0 before training).
        history: one dict per completed epoch (the rows of ``log.csv``).
        best_epoch, best_score, best_metrics: the selected epoch so far and its validation result.
        best_weights: model state dict of ``best_epoch`` (``None`` before the first epoch).
        finished: training ended (all epochs or early stopping); resuming only restores it.

    Example:
        >>> s = TrainingState(epoch=3, history=[{"epoch": 1.0}], best_epoch=2, best_score=0.5)
        >>> TrainingState.from_dict(s.to_dict(optimizer={}, scheduler={}, rng=[], world_size=1)).best_score
        0.5
    """

    epoch: int = 0
    history: List[Dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_score: Optional[float] = None
    best_metrics: Dict[str, float] = field(default_factory=dict)
    best_weights: Optional[Dict[str, torch.Tensor]] = None
    finished: bool = False

    def record_best(self, epoch: int, score: Optional[float], metrics: Dict[str, float], weights: Dict[str, torch.Tensor]) -> None:
        """Remember ``epoch`` as the best so far (weights copied to CPU)."""
        self.best_epoch, self.best_score, self.best_metrics = epoch, score, dict(metrics)
        self.best_weights = {k: v.detach().cpu().clone() for k, v in weights.items()}

    def to_dict(self, optimizer: Dict[str, Any], scheduler: Dict[str, Any], rng: List[Dict[str, Any]], world_size: int) -> Dict[str, Any]:
        """Plain-data form with the optimizer, scheduler and per-process RNG states added."""
        return {
            "epoch": self.epoch,
            "history": copy.deepcopy(self.history),
            "best_epoch": self.best_epoch,
            "best_score": self.best_score,
            "best_metrics": dict(self.best_metrics),
            "best_weights": self.best_weights,
            "finished": self.finished,
            "optimizer": optimizer,
            "scheduler": scheduler,
            "rng": rng,
            "world_size": world_size,
        }

    @classmethod
    def from_dict(cls, state: Dict[str, Any]) -> "TrainingState":
        """The progress part of :meth:`to_dict` (optimizer, scheduler and RNG are left to the caller)."""
        return cls(
            epoch=int(state["epoch"]),
            history=list(state["history"]),
            best_epoch=int(state["best_epoch"]),
            best_score=state["best_score"],
            best_metrics=dict(state["best_metrics"]),
            best_weights=state["best_weights"],
            finished=bool(state["finished"]),
        )


def check_resume_settings(path: Path, saved: Dict[str, Any], config: Any) -> None:
    """Refuse to resume the run of ``path`` (its ``last.pt``) with training settings ``config`` (a
    ``TrainConfig``) that differ from ``saved`` (the ``train_config`` the checkpoint recorded) in
    anything but :data:`RESUMABLE_CHANGES`; one :class:`~dgl_graphtx.errors.ConfigError` names them.

    Example:
        >>> from dgl_graphtx.training import TrainConfig
        >>> check_resume_settings(Path("last.pt"), {"epochs": 5, "device": "cuda"}, TrainConfig(epochs=5))
        >>> check_resume_settings(Path("last.pt"), {"epochs": 5}, TrainConfig(epochs=9))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: last.pt was trained with epochs=5; resume with the same settings (now epochs=9)
    """
    current = asdict(config)
    changed = [k for k, v in current.items() if k in saved and saved[k] != v and k not in RESUMABLE_CHANGES]
    if changed:
        raise ConfigError(
            f"{path} was trained with {', '.join(f'{k}={saved[k]!r}' for k in changed)}; "
            f"resume with the same settings (now {', '.join(f'{k}={current[k]!r}' for k in changed)})"
        )


def check_resume_pretraining(path: Path, saved: Optional[Dict[str, Any]], current: Optional[Dict[str, Any]]) -> None:
    """Refuse to resume the pretraining run of ``path`` (its ``last.pt``) on another corpus or with
    other pretraining settings than it was written with: ``saved`` and ``current`` are the
    checkpoints' ``pretraining`` records (``corpus``: its ``source`` and ``sha256``, and ``recipe``);
    ``current`` is ``None`` for a training run, which this leaves alone. One
    :class:`~dgl_graphtx.errors.ConfigError` names what changed.

    Example:
        >>> saved = {"corpus": {"source": "a.smi", "sha256": "ab" * 32}, "recipe": {"pretrain": {"mask_share": 0.15, "workers": 1}}}
        >>> check_resume_pretraining(Path("last.pt"), saved, {**saved, "recipe": {"pretrain": {"mask_share": 0.15, "workers": 4}}})
        >>> check_resume_pretraining(Path("last.pt"), saved, {**saved, "recipe": {"pretrain": {"mask_share": 0.5, "workers": 1}}})
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: last.pt was pretrained with mask_share=0.15; resume with the same settings (now mask_share=0.5)
    """
    if current is None:
        return
    if saved is None:
        raise ConfigError(f"{path} is not a pretraining run's: continue it with 'dgl-graphtx train --resume', or pretrain "
                          "into another --out")
    before, now = saved.get("corpus"), current["corpus"]
    if before is not None and before["sha256"] != now["sha256"]:
        raise ConfigError(f"{path} was pretrained on another corpus ({before['source']}, sha256 {before['sha256'][:12]}) than "
                          f"{now['source']} (sha256 {now['sha256'][:12]}); resume with the run's corpus, or start a new run "
                          "(--overwrite, or another --out)")
    old, new = saved.get("recipe", {}).get("pretrain", {}), current["recipe"]["pretrain"]
    changed = [k for k, v in new.items() if k in old and old[k] != v and k not in RESUMABLE_PRETRAINING]
    if changed:
        raise ConfigError(f"{path} was pretrained with {', '.join(f'{k}={old[k]!r}' for k in changed)}; "
                          f"resume with the same settings (now {', '.join(f'{k}={new[k]!r}' for k in changed)})")


def check_resume_data(path: Path, saved: Optional[Dict[str, Any]], current: Optional[Dict[str, Any]]) -> None:
    """Refuse to resume the run of ``path`` on other data or another split than it was trained on:
    ``saved`` and ``current`` are :func:`~dgl_graphtx.datasets.data_record.training_data_record`
    s (the checkpoint's and the resumed run's); one :class:`~dgl_graphtx.errors.ConfigError` names
    what changed. A checkpoint without a record (an older version's) is resumed with a warning.

    Example:
        >>> rows = {"train": torch.tensor([0, 1]), "valid": torch.tensor([2]), "test": torch.tensor([3])}
        >>> saved = {"molecules": 4, "digest": "ab" * 32, "split": rows}
        >>> moved = dict(saved, split={**rows, "train": torch.tensor([0, 3]), "test": torch.tensor([1])})
        >>> check_resume_data(Path("last.pt"), saved, moved)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: last.pt was trained with another split: train: 1 of 2 molecules were not in it (input rows 3), ...
    """
    if current is None:
        return
    if saved is None:
        logger.warning("%s records no training data (an older version wrote it): the data and split of the resumed run "
                       "cannot be checked", path)
        return
    if saved["digest"] != current["digest"]:
        raise ConfigError(f"{path} was trained on other data ({saved['molecules']} molecules, sha256 {saved['digest'][:12]}) "
                          f"than it is resumed with ({current['molecules']} molecules, sha256 {current['digest'][:12]}); "
                          "resume with the run's data and targets, or start a new run (--overwrite, or another --out)")
    moved = []
    for part in PARTS:
        new = sorted(set(current["split"][part].tolist()) - set(saved["split"][part].tolist()))
        if new:
            shown = ", ".join(map(str, new[:5])) + (", ..." if len(new) > 5 else "")
            moved.append(f"{part}: {len(new)} of {len(current['split'][part])} molecules were not in it (input rows {shown})")
    if moved:
        raise ConfigError(f"{path} was trained with another split: {', '.join(moved)}; resume with the run's split "
                          "(the same --split, --split-col, --seed, fractions or --valid/--test files)")
    before, now = saved.get("calibration"), current.get("calibration")
    if before is not None and before != now:
        what = f"{now['molecules']} {now['source']}" if now is not None else "none"
        raise ConfigError(f"{path} was trained beside {before['molecules']} calibration molecules ({before['source']}), not the ones "
                          f"it is resumed with ({what}): a molecule that calibrates must never have trained; resume with the "
                          "run's --uncertainty, --calibration-share and --calibration file, or start a new run")
