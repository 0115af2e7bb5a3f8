"""Training loop: AdamW, warm-up + decay schedule, clipping, early stopping, best checkpoint."""
from __future__ import annotations

import copy
import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler, Subset
from tqdm.auto import tqdm

from ..atomic_io import atomic_to_csv
from ..checkpoint import CheckpointMeta, save_checkpoint
from ..datasets import MoleculeBatch, collate_molecules
from ..devices import resolve_device
from ..errors import ConfigError, NonFiniteError
from ..models import MoleculeModel
from ..validation import check_number
from .metrics import PRIMARY_METRIC, check_binary_labels, compute_metrics, metric_notes
from .plots import plot_learning_curve
from .schedule import SCHEDULES, lr_factor

logger = logging.getLogger("dgl_graphtx")

#: What to do when a batch gives a NaN/inf loss or gradient: stop with an error, or skip the step.
ON_NONFINITE = ("stop", "skip")

PathLike = Union[str, Path]


@dataclass
class TrainConfig:
    """Optimisation settings.

    Args:
        epochs: maximum number of epochs.
        batch_size: molecules per batch.
        lr: peak learning rate of AdamW.
        weight_decay: AdamW weight decay.
        schedule: ``linear`` (warm-up then linear decay, as in GRPE), ``cosine`` or ``constant``.
        warmup_epochs: epochs of linear warm-up.
        final_lr_ratio: learning rate at the last step, relative to ``lr``.
        grad_clip: max global gradient norm (0 disables clipping).
        patience: stop after this many epochs without validation improvement (0: never).
        seed: seed of shuffling, dropout and (via :func:`seed_everything`) initialisation.
        device: ``auto``, ``cpu``, ``cuda``, ``cuda:1`` ...
        num_workers: DataLoader worker processes.
        progress: show a progress bar with loss and validation metric.
        on_nonfinite: a NaN or infinite loss or gradient either ``stop``s training with a
            :class:`~dgl_graphtx.errors.NonFiniteError` naming the epoch and batch, or ``skip``s
            that optimisation step (counted, logged, and in ``log.csv`` as ``skipped_steps``).

    Example:
        >>> TrainConfig(epochs=50, schedule="cosine").warmup_epochs
        5
    """

    epochs: int = 100
    batch_size: int = 64
    lr: float = 5e-4
    weight_decay: float = 0.01
    schedule: str = "linear"
    warmup_epochs: int = 5
    final_lr_ratio: float = 0.0
    grad_clip: float = 5.0
    patience: int = 0
    seed: int = 0
    device: str = "auto"
    num_workers: int = 0
    progress: bool = True
    on_nonfinite: str = "stop"

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.on_nonfinite not in ON_NONFINITE:
            raise ConfigError(f"on_nonfinite must be one of {ON_NONFINITE}, got {self.on_nonfinite!r}")
        check_number("epochs", self.epochs, 1, integer=True)
        check_number("batch_size", self.batch_size, 1, integer=True)
        check_number("lr", self.lr, 0, 10)
        check_number("weight_decay", self.weight_decay, 0)
        check_number("warmup_epochs", self.warmup_epochs, 0, integer=True)
        check_number("final_lr_ratio", self.final_lr_ratio, 0, 1)
        check_number("grad_clip", self.grad_clip, 0)
        check_number("patience", self.patience, 0, integer=True)
        check_number("seed", self.seed, 0, 2**32 - 1, integer=True)
        check_number("num_workers", self.num_workers, 0, integer=True)
        if not isinstance(self.device, str):
            raise ConfigError(f"device must be a string such as 'auto', 'cpu' or 'cuda:0', got {self.device!r}")


class TrainResult(NamedTuple):
    """Per-epoch history, the selected epoch and its validation metrics."""

    history: pd.DataFrame
    best_epoch: int
    best_metrics: Dict[str, float]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) so runs repeat exactly on CPU.

    Example:
        >>> seed_everything(1); a = torch.rand(1); seed_everything(1)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def dataset_labels(dataset: Dataset) -> torch.Tensor:
    """Labels ``[M, T]`` with NaN where missing, for a :class:`MoleculeDataset` or a ``Subset`` of one.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> ds = MoleculeDataset(["C", "CC", "CCC"], [[1.0], [None], [3.0]], progress=False)
        >>> dataset_labels(Subset(ds, [2, 1])).tolist()
        [[3.0], [nan]]
    """
    if isinstance(dataset, Subset):
        return dataset_labels(dataset.dataset)[torch.as_tensor(dataset.indices, dtype=torch.int64)]
    if hasattr(dataset, "raw_labels"):
        return dataset.raw_labels
    rows = [torch.where(mask, labels, torch.full_like(labels, float("nan"))) for _, _, labels, mask in dataset]
    return torch.stack(rows)


def masked_loss(task: str, output: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean loss over observed labels only (MSE for regression, BCE-with-logits for classification).

    Example:
        >>> masked_loss("regression", torch.tensor([[1.0, 5.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[True, False]]))
        tensor(1.)
    """
    target = torch.where(mask, target, output.detach())  # masked values may be NaN: never touch them
    if task == "regression":
        per_label = (output - target) ** 2
    else:
        per_label = F.binary_cross_entropy_with_logits(output, target.clamp(0.0, 1.0), reduction="none")
    per_label = torch.where(mask, per_label, torch.zeros_like(per_label))
    return per_label.sum() / mask.sum().clamp_min(1).to(per_label.dtype)


class Trainer:
    """Fits a :class:`~dgl_graphtx.models.MoleculeModel` on molecule datasets.

    Regression targets are standardised with training-set statistics stored in the model.
    After :meth:`fit` the model holds the weights of the best validation epoch. With ``out_dir``,
    the trainer writes ``log.csv`` (one row per epoch), ``learning_curve.png`` and, when ``meta``
    is given, ``best.pt`` (a checkpoint usable by :class:`~dgl_graphtx.predict.Predictor`).

    Args:
        model: the model to train.
        config: optimisation settings.
        out_dir: folder for logs, plots and the best checkpoint.
        meta: featurizer / relation settings and target names to store in the checkpoint.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset(["C", "CC", "CCC", "CCCC"], [[0.], [1.], [2.], [3.]], relation=p.relation, progress=False)
        >>> result = Trainer(build_model(p.model), TrainConfig(epochs=2, batch_size=2, progress=False)).fit(ds, ds)
        >>> list(result.history.columns[:3])
        ['epoch', 'lr', 'train_loss']
    """

    def __init__(
        self,
        model: MoleculeModel,
        config: TrainConfig = TrainConfig(),
        out_dir: Optional[PathLike] = None,
        meta: Optional[CheckpointMeta] = None,
    ) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.model = model.to(self.device)
        self.task = model.config.task
        self.metric, self.direction = PRIMARY_METRIC[self.task]
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.meta = meta

    # -- data ---------------------------------------------------------------------------------
    def loader(self, dataset: Dataset, shuffle: bool = False, sampler: Optional[Sampler] = None, seed: int = 0) -> DataLoader:
        """A DataLoader yielding :class:`MoleculeBatch` (pass ``sampler`` e.g. for distributed runs)."""
        generator = torch.Generator().manual_seed(seed)
        drop_last = shuffle and len(dataset) % self.config.batch_size == 1  # BatchNorm needs > 1 row
        return DataLoader(
            dataset,
            batch_size=self.config.batch_size,
            shuffle=shuffle and sampler is None,
            sampler=sampler,
            collate_fn=collate_molecules,
            num_workers=self.config.num_workers,
            generator=generator,
            drop_last=drop_last,
        )

    def _set_normalization(self, train_set: Dataset) -> None:
        if self.task != "regression":
            return
        labels = dataset_labels(train_set).double()
        observed = ~torch.isnan(labels)
        if not observed.any(dim=0).all():
            raise ConfigError("every target needs at least one observed training label")
        filled = torch.where(observed, labels, torch.zeros_like(labels))
        count = observed.sum(0)
        mean = filled.sum(0) / count
        var = (torch.where(observed, labels - mean, torch.zeros_like(labels)) ** 2).sum(0) / count.clamp_min(1)
        self.model.set_target_normalization(mean.float(), var.sqrt().float())

    # -- loop ---------------------------------------------------------------------------------
    def fit(self, train_set: Dataset, valid_set: Optional[Dataset] = None, train_sampler: Optional[Sampler] = None) -> TrainResult:
        """Train for ``config.epochs`` (or until early stopping) and keep the best weights.

        Without ``valid_set`` the last epoch is kept.
        """
        cfg = self.config
        torch.manual_seed(cfg.seed)
        names = self.meta.target_names if self.meta is not None else None
        if self.task == "classification":
            for part in (train_set, valid_set):
                if part is not None:
                    check_binary_labels(dataset_labels(part).double().numpy(), names)
        if valid_set is not None:
            for note in metric_notes(self.task, dataset_labels(valid_set).double().numpy(), names):
                logger.warning("validation set: %s", note)
        self._set_normalization(train_set)
        train_loader = self.loader(train_set, shuffle=True, sampler=train_sampler, seed=cfg.seed)
        steps_per_epoch = max(len(train_loader), 1)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lr_factor(cfg.schedule, cfg.warmup_epochs * steps_per_epoch, cfg.epochs * steps_per_epoch, cfg.final_lr_ratio),
        )
        history: List[Dict[str, float]] = []
        best_score, best_epoch, best_state, best_metrics = None, 0, None, {}
        bar = tqdm(range(1, cfg.epochs + 1), desc="training", unit="epoch", disable=not cfg.progress)
        for epoch in bar:
            start = time.perf_counter()
            train_loss, last_lr, skipped = self._train_epoch(train_loader, optimizer, scheduler, epoch)
            self._check_weights(epoch)
            row: Dict[str, float] = {"epoch": epoch, "lr": last_lr, "train_loss": train_loss, "skipped_steps": skipped}
            if valid_set is not None:
                metrics = self.evaluate(valid_set)
                row.update({f"valid_{k}": v for k, v in metrics.items()})
                score = metrics[self.metric]
                improved = self._is_better(score, best_score)
            else:
                metrics, score, improved = {}, None, True
            row["seconds"] = time.perf_counter() - start
            history.append(row)
            self._write_log(history)  # before the checkpoint: a run killed in between never has a best.pt from an unlogged epoch
            if improved:
                best_score, best_epoch, best_metrics = score, epoch, metrics
                best_state = copy.deepcopy(self.model.state_dict())
                self._save_best(best_epoch, best_metrics)
            bar.set_postfix(loss=f"{train_loss:.4f}", **({f"val_{self.metric}": f"{score:.4f}"} if score is not None else {}))
            if cfg.patience and epoch - best_epoch >= cfg.patience:
                logger.info("early stopping at epoch %d (best epoch %d)", epoch, best_epoch)
                break
        if best_state is not None:
            self.model.load_state_dict(best_state)
        frame = pd.DataFrame(history)
        if self.out_dir is not None:
            plot_learning_curve(frame, self.metric, self.out_dir / "learning_curve.png")
        return TrainResult(frame, best_epoch, best_metrics)

    def _is_better(self, score: float, best: Optional[float]) -> bool:
        if best is None or np.isnan(best):
            return True
        if np.isnan(score):
            return False
        return score < best if self.direction == "min" else score > best

    def _train_epoch(self, loader: DataLoader, optimizer, scheduler, epoch: int) -> Tuple[float, float, int]:
        """Mean training loss, the learning rate of the epoch's last step, and the number of steps
        skipped for a non-finite loss or gradient (``on_nonfinite="skip"``)."""
        self.model.train()
        total, count, skipped, lr = 0.0, 0, 0, optimizer.param_groups[0]["lr"]
        for index, batch in enumerate(loader, start=1):
            batch = batch.to(self.device)
            output = self.model(batch.graph, batch.relation_graph)
            loss = masked_loss(self.task, output, self.model.normalize_targets(batch.labels), batch.mask)
            optimizer.zero_grad(set_to_none=True)
            problem = None if torch.isfinite(loss) else f"loss is {float(loss)}"
            if problem is None:
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip or math.inf)
                problem = None if torch.isfinite(norm) else f"gradient norm is {float(norm)}"
            if problem is not None:
                where = f"epoch {epoch}, batch {index} of {len(loader)}"
                if self.config.on_nonfinite == "stop":
                    raise NonFiniteError(
                        f"training diverged at {where}: {problem}. Lower --lr, check the labels for extreme "
                        "values, or skip such steps with on_nonfinite='skip'"
                    )
                logger.warning("skipping the optimisation step at %s: %s", where, problem)
                optimizer.zero_grad(set_to_none=True)
                skipped += 1
                continue
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            scheduler.step()
            total += float(loss.detach()) * batch.batch_size
            count += batch.batch_size
        return (total / count if count else math.nan), lr, skipped

    def _check_weights(self, epoch: int) -> None:
        bad = [name for name, value in self.model.state_dict().items()
               if value.is_floating_point() and not torch.isfinite(value).all()]
        if bad:
            raise NonFiniteError(f"weights became non-finite after epoch {epoch} (first: {bad[0]}); "
                                 "nothing was saved from this epoch. Lower the learning rate")

    def _save_best(self, epoch: int, metrics: Dict[str, float]) -> None:
        if self.out_dir is None or self.meta is None:
            return
        extra = {**self.meta.extra, "epoch": epoch, "valid_metrics": metrics, "train_config": asdict(self.config)}
        meta = CheckpointMeta(self.meta.featurizer, self.meta.relation, self.meta.target_names, extra)
        save_checkpoint(self.out_dir / "best.pt", self.model, meta)

    def _write_log(self, history: List[Dict[str, float]]) -> None:
        if self.out_dir is not None:
            atomic_to_csv(pd.DataFrame(history), self.out_dir / "log.csv", index=False)

    # -- inference ----------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, dataset: Dataset) -> np.ndarray:
        """Predictions ``[M, T]`` in target units (probabilities for classification)."""
        self.model.eval()
        outputs = []
        for batch in self.loader(dataset):
            batch: MoleculeBatch = batch.to(self.device)
            outputs.append(self.model.to_target_space(self.model(batch.graph, batch.relation_graph)).cpu())
        return torch.cat(outputs).double().numpy()

    def evaluate(self, dataset: Dataset) -> Dict[str, float]:
        """Metrics of the current model on ``dataset`` (RMSE/MAE/R2 or ROC-AUC/AP)."""
        return compute_metrics(self.task, dataset_labels(dataset).double().numpy(), self.predict(dataset))
