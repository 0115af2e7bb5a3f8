"""The checkpoints of a training run: ``best.pt`` (the selected epoch, for prediction), ``last.pt``
(the latest epoch with its :class:`~dgl_graphtx.training.resume.TrainingState`), and resuming
from ``last.pt`` after checking that the run continues with the same settings."""
from __future__ import annotations

import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Dict, Optional, Union, cast

import torch

from ..checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from ..errors import CheckpointError, ConfigError
from ..models import MoleculeModel
from .hooks import ProcessHooks
from .resume import (TrainingState, capture_rng_state, check_resume_data, check_resume_pretraining, check_resume_settings,
                     restore_rng_state)

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]


class RunCheckpoints:
    """Writes a run's ``best.pt`` and ``last.pt`` into ``out_dir`` (only with ``out_dir`` and
    ``meta``, and only in the main process) and resumes from ``last.pt``.

    Args:
        out_dir: the run's folder (``None``: nothing is written).
        meta: featurizer / relation settings and target names stored in every checkpoint.
        config: the run's settings (a dataclass such as ``TrainConfig``), stored as ``train_config``
            and compared on resumption (see :func:`~dgl_graphtx.training.resume.check_resume_settings`).
        hooks: cooperation with the other processes of the run.
        parts: modules trained beside the model but not part of it (a pretext task's heads): their
            weights are saved in ``last.pt``'s training state and restored on resumption.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> from dgl_graphtx.training import TrainConfig
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> model, out = build_model(p.model), Path(tempfile.mkdtemp())
        >>> saver = RunCheckpoints(out, CheckpointMeta(p.featurizer, p.relation, ["y"]), TrainConfig(epochs=1), ProcessHooks())
        >>> saver.save_best(model, 1, {"rmse": 0.5})
        >>> sorted(f.name for f in out.iterdir())
        ['best.pt']
    """

    def __init__(self, out_dir: Optional[PathLike], meta: Optional[CheckpointMeta], config: Any, hooks: ProcessHooks,
                 parts: Optional[Dict[str, torch.nn.Module]] = None) -> None:
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.meta = meta
        self.config = config
        self.hooks = hooks
        self.parts = parts or {}

    @property
    def writes(self) -> bool:
        """Whether the run writes checkpoints at all (it needs ``out_dir`` and ``meta``)."""
        return self.out_dir is not None and self.meta is not None

    def _path(self, name: str) -> Path:
        assert self.out_dir is not None, "only a run that writes checkpoints has a folder"
        return self.out_dir / name

    def checkpoint_meta(self, epoch: int, valid_metrics: Dict[str, float]) -> CheckpointMeta:
        """``meta`` with the ``epoch`` of the weights, its validation metrics and the run's settings
        (``train_config``) added to its extras."""
        assert self.meta is not None, "checkpoint_meta needs the run's meta"
        extra = replace(self.meta.extra, epoch=epoch, valid_metrics=valid_metrics, train_config=asdict(self.config))
        return replace(self.meta, extra=extra)

    def save_best(self, model: MoleculeModel, epoch: int, metrics: Dict[str, float]) -> None:
        """``best.pt``: the weights of ``epoch``, the new best one."""
        if self.writes and self.hooks.is_main:
            save_checkpoint(self._path("best.pt"), model, self.checkpoint_meta(epoch=epoch, valid_metrics=metrics))

    def save_last(self, model: MoleculeModel, state: TrainingState, optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
        """``last.pt``: the latest weights and everything a resumed run needs (every process must call it)."""
        if not self.writes:
            return
        rng = self.hooks.gather_objects(capture_rng_state())  # a collective: every process calls it
        if self.hooks.is_main:
            payload = state.to_dict(optimizer.state_dict(), scheduler.state_dict(), rng, self.hooks.world_size)
            if self.parts:
                payload["parts"] = {name: {k: v.detach().cpu() for k, v in part.state_dict().items()}
                                    for name, part in self.parts.items()}
            meta = self.checkpoint_meta(epoch=state.epoch, valid_metrics=state.best_metrics)
            save_checkpoint(self._path("last.pt"), model, meta, training_state=payload)

    def resume(self, resume: Union[bool, PathLike], model: MoleculeModel, optimizer: torch.optim.Optimizer,
               scheduler: Any) -> TrainingState:
        """Load ``last.pt`` (``True``: ``out_dir/last.pt`` if it exists, else a fresh start; or a
        path) into the model, optimizer, scheduler and RNGs; the restored progress."""
        if resume is True:
            if self.out_dir is None:
                raise ConfigError("resume=True needs the out_dir of the run to continue")
            path = self.out_dir / "last.pt"
            if not path.is_file():
                if self.hooks.is_main:
                    logger.info("no %s yet: starting a fresh run", path)
                return TrainingState()
        else:
            path = Path(cast(PathLike, resume))  # a path here: callers do not call resume() with False
        loaded = load_checkpoint(path, map_location="cpu")
        if loaded.training_state is None:
            raise CheckpointError(f"{path} holds no training state; resume from the last.pt that training writes")
        check_resume_pretraining(path, loaded.meta.extra.pretraining, self.meta.extra.pretraining if self.meta is not None else None)
        check_resume_settings(path, loaded.meta.extra.train_config or {}, self.config)
        if loaded.model.config != model.config:  # after the settings and corpus, which change it and are named
            raise ConfigError(f"{path} was trained with another model configuration; resume with the same settings")
        check_resume_data(path, loaded.meta.extra.data, self.meta.extra.data if self.meta is not None else None)
        raw = loaded.training_state
        model.load_state_dict(loaded.model.state_dict())
        for name, part in self.parts.items():
            if name not in raw.get("parts", {}):
                raise CheckpointError(f"{path} holds no weights of the {name} trained beside the model; resume with "
                                      "the settings it was written with")
            part.load_state_dict(raw["parts"][name])
        optimizer.load_state_dict(raw["optimizer"])
        scheduler.load_state_dict(raw["scheduler"])
        rng = raw["rng"]
        if raw["world_size"] != self.hooks.world_size and self.hooks.is_main:
            logger.warning("%s was written by %d process(es), resuming with %d: the run continues but will not "
                           "repeat the uninterrupted one exactly", path, raw["world_size"], self.hooks.world_size)
        restore_rng_state(rng[self.hooks.rank % len(rng)])
        state = TrainingState.from_dict(raw)
        if self.hooks.is_main:
            logger.info("resuming from %s after epoch %d", path, state.epoch)
        return state
