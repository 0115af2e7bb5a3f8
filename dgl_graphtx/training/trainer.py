"""Training loop: AdamW, warm-up + decay schedule, clipping, early stopping, best checkpoint.

The :class:`Trainer` runs the epochs; what it records after each (``log.csv``, the best epoch,
checkpoints, early stopping) is :mod:`.epoch_bookkeeping`'s, what it learns from the training
labels first :mod:`.label_statistics`', and its optimizer's parameter groups :mod:`.parameter_groups`'.
"""
from __future__ import annotations

import functools
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sized, Tuple, Union

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, Sampler, Subset

from ..checkpoint import CheckpointMeta
from ..datasets import EdgeBudgetBatchSampler, MoleculeBatch, collate_molecule_tensors, collate_molecules, relation_edge_counts
from ..datasets.buckets import BucketBatchSampler, PaddedCollate, SizeBuckets, molecule_sizes
from ..datasets.padding import real_molecules
from ..devices import COMPUTE_PATHS, resolve_compute, resolve_device
from ..errors import ConfigError, NonFiniteError
from ..logs import progress
from ..models import MoleculeModel, TrainRecipe
from ..threads import resolve_threads, set_threads
from ..uncertainty import UncertaintyConfig, head_loss
from ..validation import check_number
from .adamw import adamw
from .epoch_bookkeeping import EpochBookkeeping
from .fast_steps import STEP_MODES, CapturedStep, CompiledStep, resolve_step_mode
from .hooks import ProcessHooks
from .label_statistics import fit_atom_reference, normalization_statistics, refuse_unlabelled_targets
from .levels import LevelOutputs, fit_level_statistics, level_loss, level_metrics, level_target_names, predict_levels, watched_metric
from .loss_inputs import IndexedBatch, LossInputs, RowIndexed, collate_indexed
from .losses import LOSSES, check_pos_weight, resolve_loss, weighted_loss
from .metrics import METRIC_DIRECTION, check_binary_labels, check_class_labels, compute_metrics, metric_notes, resolve_metrics
from .parameter_groups import backbone_depths as backbone_depths  # importable from here as before the split
from .parameter_groups import backbone_parameters, parameter_groups
from .plots import plot_learning_curve
from .resume import TrainingState
from .run_checkpoints import RunCheckpoints
from .schedule import SCHEDULES, lr_factor
from .step_tally import StepReport, StepTally
from .train_step import StepResult, TrainStep

logger = logging.getLogger("dgl_graphtx")

#: What to do when a batch gives a NaN/inf loss or gradient: stop with an error, or skip the step.
ON_NONFINITE = ("stop", "skip")

PathLike = Union[str, Path]


@dataclass(frozen=True)
class TrainConfig(TrainRecipe):
    """Optimisation settings: a preset's :class:`~dgl_graphtx.models.TrainRecipe` (``epochs`` to
    ``grad_clip``) plus the settings of one run (``patience`` onwards).

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
        compute: ``auto`` (DGL's kernels on the CPU and with a CUDA build of DGL, plain tensors on
            a GPU that DGL cannot use), ``dgl`` or ``tensors`` (batches as
            :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`, built in the loader workers;
            see :func:`~dgl_graphtx.devices.resolve_compute`).
        num_workers: DataLoader worker processes, which collate (and pad) the batches; ``None``:
            none on the CPU, 2 feeding a GPU (their batches in page-locked memory).
        progress: report loss and validation metric per epoch (a bar on a terminal, else one log line per epoch).
        on_nonfinite: a NaN or infinite loss or gradient either ``stop``s training with a
            :class:`~dgl_graphtx.errors.NonFiniteError` naming the epoch and batch, or ``skip``s
            that optimisation step (counted, logged, and in ``log.csv`` as ``skipped_steps``).
        pos_weight: classification only: weight of the positive labels in the loss (``pos_weight``
            of BCE-with-logits), a number for every target, or ``"auto"``: negatives / positives of
            each target on the training part. ``None``: unweighted.
        loss: ``auto`` (the task's default: ``mse``, ``bce`` or ``cross_entropy``), or ``mse``,
            ``mae``, ``huber``, ``bounded_mse`` (censored labels) for regression.
        metrics: metrics to report (default: all of the task's); the first is the one early
            stopping and the best checkpoint watch.
        task_weights: loss weight of each target (default: 1 each).
        from_pretrained: name of a shipped pretrained model or path of a pretrained backbone whose
            weights initialise everything but the head (see :mod:`dgl_graphtx.inference.backbones`).
        freeze_backbone_epochs: train only the head for this many first epochs.
        backbone_lr_scale: learning rate of everything but the head, relative to ``lr``.
        layer_lr_decay: layer-wise learning-rate decay ``g`` in ``(0, 1]`` (as in ULMFiT and BEiT
            fine-tuning): block ``i`` of ``L`` (counted from the input, 1-based) learns at
            ``g ** (L + 1 - i)`` times the backbone's rate, the input encoders at ``g ** (L + 1)``,
            the head at ``lr``. ``1``: one rate for the whole backbone.
        threads: torch intra-op threads of the training process (of every DDP rank), set by
            :class:`Trainer` through :func:`~dgl_graphtx.threads.set_threads`; ``None`` leaves
            torch's setting alone (the CLI resolves it: ``--threads``, else ``OMP_NUM_THREADS``,
            else 1, and records the number in ``config.yaml``).
        batch_edges: most relation-graph edges per batch, on top of ``batch_size`` (see
            :class:`~dgl_graphtx.datasets.EdgeBudgetBatchSampler`; the rule prediction batches
            by), which bounds the memory of a step on large molecules. ``None``: batches of
            ``batch_size`` molecules only. Single-process runs only.
        step_mode: how the training steps run: ``eager``; ``captured`` (CUDA: each size bucket's
            padded step captured once in a CUDA graph and replayed); ``compiled``
            (``torch.compile(fullgraph=True, dynamic=False)`` of the forward pass and loss, once per
            size bucket); ``auto``: ``captured`` on a GPU when it is safe (one process, no
            ``batch_edges``), else ``eager``. Captured and compiled steps train on size buckets
            padded to fixed shapes; a batch that does not fit one, or of a frozen-backbone epoch,
            runs eager. See docs/scaling.md.
        size_buckets: most size buckets of the captured and compiled steps' batches (similar
            molecule sizes in a batch; shuffled within buckets).

    Example:
        >>> TrainConfig(epochs=50, schedule="cosine").warmup_epochs
        5
    """

    patience: int = 0
    seed: int = 0
    device: str = "auto"
    compute: str = "auto"
    num_workers: Optional[int] = None
    progress: bool = True
    on_nonfinite: str = "stop"
    pos_weight: Optional[Union[str, float]] = None
    loss: str = "auto"
    metrics: Tuple[str, ...] = ()
    task_weights: Tuple[float, ...] = ()
    from_pretrained: Optional[str] = None
    freeze_backbone_epochs: int = 0
    backbone_lr_scale: float = 1.0
    layer_lr_decay: float = 1.0
    threads: Optional[int] = None
    batch_edges: Optional[int] = None
    step_mode: str = "auto"
    size_buckets: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.threads is not None:
            resolve_threads(self.threads)  # checks it
        object.__setattr__(self, "pos_weight", parse_pos_weight(self.pos_weight))
        if self.loss not in LOSSES:
            raise ConfigError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        for weight in self.task_weights:
            check_number("each task weight", weight, 0)
        check_number("freeze_backbone_epochs", self.freeze_backbone_epochs, 0, integer=True)
        check_number("backbone_lr_scale", self.backbone_lr_scale, 0, 1000)
        check_number("layer_lr_decay", self.layer_lr_decay, 0, 1, low_open=True)
        if self.batch_edges is not None:
            check_number("batch_edges", self.batch_edges, 1, integer=True)
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.on_nonfinite not in ON_NONFINITE:
            raise ConfigError(f"on_nonfinite must be one of {ON_NONFINITE}, got {self.on_nonfinite!r}")
        check_number("patience", self.patience, 0, integer=True)
        check_number("seed", self.seed, 0, 2**32 - 1, integer=True)
        if self.num_workers is not None:
            check_number("num_workers", self.num_workers, 0, integer=True)
        if self.step_mode not in STEP_MODES:
            raise ConfigError(f"step_mode must be one of {STEP_MODES}, got {self.step_mode!r}")
        check_number("size_buckets", self.size_buckets, 1, integer=True)
        if self.compute not in COMPUTE_PATHS:
            raise ConfigError(f"compute must be one of {COMPUTE_PATHS}, got {self.compute!r}")
        if not isinstance(self.device, str):
            raise ConfigError(f"device must be a string such as 'auto', 'cpu' or 'cuda:0', got {self.device!r}")

    @classmethod
    def from_recipe(cls, recipe: TrainRecipe, **overrides: Any) -> "TrainConfig":
        """A preset's training recipe (``preset.train``) with ``overrides`` on top.

        Example:
            >>> from dgl_graphtx.models import get_preset
            >>> cfg = TrainConfig.from_recipe(get_preset("gradformer", "molhiv").train, epochs=3)
            >>> cfg.lr, cfg.batch_size, cfg.epochs
            (0.0001, 32, 3)
        """
        return cls(**{**recipe.to_dict(), **overrides})


def parse_pos_weight(value: Union[None, str, float]) -> Union[None, str, float]:
    """``None``/``"none"`` -> ``None``, ``"auto"`` -> ``"auto"``, a positive number (or its text) -> float.

    Example:
        >>> parse_pos_weight("auto"), parse_pos_weight("2.5"), parse_pos_weight("none")
        ('auto', 2.5, None)
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"pos_weight must be 'auto' or a positive number, got {value!r}") from None
    return float(check_number("pos_weight", number, 0, low_open=True))


def positive_weights(labels: torch.Tensor, names: List[str]) -> torch.Tensor:
    """Negatives / positives per target of ``labels`` ``[M, T]`` (NaN = missing): the ``auto``
    ``pos_weight``. A target with no positive or no negative label gets 1 (and a warning).

    Example:
        >>> positive_weights(torch.tensor([[0.0, 1.0], [0.0, float("nan")], [1.0, 0.0], [0.0, 1.0]]), ["a", "b"]).tolist()
        [3.0, 0.5]
    """
    observed = ~torch.isnan(labels)
    positives = ((labels == 1) & observed).sum(0).double()
    negatives = ((labels == 0) & observed).sum(0).double()
    weights = torch.where((positives > 0) & (negatives > 0), negatives / positives.clamp_min(1), torch.ones_like(positives))
    for t in torch.nonzero((positives == 0) | (negatives == 0)).flatten().tolist():
        logger.warning("pos_weight auto: target %r has only one class in the training part; its weight is 1", names[t])
    return weights.float()


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
    rows = [torch.where(mask, labels, torch.full_like(labels, float("nan")))
            for _, _, labels, mask in dataset]  # type: ignore[attr-defined]  # torch's Dataset declares no __iter__; ours are sequences
    return torch.stack(rows)


def masked_loss(task: str, output: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                pos_weight: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Mean of the task's default loss over observed labels only (MSE for regression,
    BCE-with-logits for classification, its positive labels weighted by ``pos_weight`` ``[T]``
    when given, cross-entropy for multiclass); see
    :func:`~dgl_graphtx.training.losses.weighted_loss` for the others and for weights.

    Example:
        >>> masked_loss("regression", torch.tensor([[1.0, 5.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[True, False]]))
        tensor(1.)
    """
    return weighted_loss(resolve_loss(task, "auto"), output, target, mask, pos_weight=pos_weight)


@dataclass
class FitRun:
    """What one :meth:`Trainer.fit` call trains with: the optimisation step (through the model as
    the processes step it, wrapped for DDP; eager, compiled or captured) and its optimizer, the
    training batches and their sampler, the learning-rate schedule, and the bookkeeping of the
    finished epochs (which holds the run's progress)."""

    step: Callable[..., StepResult]
    optimizer: torch.optim.Optimizer
    loader: DataLoader
    sampler: Optional[Sampler]
    scheduler: torch.optim.lr_scheduler.LambdaLR
    bookkeeping: EpochBookkeeping


class Trainer:
    """Fits a :class:`~dgl_graphtx.models.MoleculeModel` on molecule datasets.

    Regression targets are standardised with training-set statistics stored in the model.
    After :meth:`fit` the model holds the weights of the best validation epoch. With ``out_dir``,
    the trainer writes ``log.csv`` (one row per epoch), ``learning_curve.png`` and, when ``meta``
    is given, ``best.pt`` (a checkpoint usable by :class:`~dgl_graphtx.inference.Predictor`) and
    ``last.pt`` (the latest epoch with the state :meth:`fit` resumes from).

    Args:
        model: the model to train.
        config: optimisation settings.
        out_dir: folder for logs, plots and the best checkpoint.
        meta: featurizer / relation settings and target names to store in the checkpoint.
        hooks: cooperation with other processes (default: a single process); see
            :class:`~dgl_graphtx.runs.distributed.DistributedContext` for DDP.
        parts: modules trained beside the model but not part of it (e.g. a pretext task's heads):
            their parameters join the optimizer at the head's learning rate, their weights are saved
            in ``last.pt`` and restored on resumption; :meth:`training_module` should use them.
        uncertainty: the settings of a distribution head's loss (``evidential_reg``; default
            :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`'s); a model with a distribution
            head (``mve``, ``evidential``) trains on that head's loss (see
            :func:`~dgl_graphtx.uncertainty.head_loss`) instead of MSE.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset(["C", "CC", "CCC", "CCCC"], [[0.], [1.], [2.], [3.]], relation=p.relation, progress=False)
        >>> result = Trainer(build_model(p.model), TrainConfig(epochs=2, batch_size=2, progress=False)).fit(ds, ds)
        >>> list(result.history.columns[:3])
        ['epoch', 'lr', 'train_loss']
    """

    #: Steps between two reads of the losses and flags that the steps keep on the device.
    read_every = 50

    def __init__(
        self,
        model: MoleculeModel,
        config: TrainConfig = TrainConfig(),
        out_dir: Optional[PathLike] = None,
        meta: Optional[CheckpointMeta] = None,
        hooks: Optional[ProcessHooks] = None,
        uncertainty: Optional[UncertaintyConfig] = None,
        parts: Optional[Dict[str, torch.nn.Module]] = None,
    ) -> None:
        self.config = config
        if config.threads is not None:
            set_threads(config.threads)
        self.uncertainty = uncertainty if uncertainty is not None else UncertaintyConfig()
        self.hooks = hooks if hooks is not None else ProcessHooks()
        self.device = resolve_device(config.device)
        self.compute = resolve_compute(config.compute, self.device)
        self.model = model.to(self.device)
        self.parts = {name: part.to(self.device) for name, part in (parts or {}).items()}
        self.task = model.config.task
        self.loss = resolve_loss(self.task, config.loss)
        self.metrics = resolve_metrics(self.task, config.metrics)
        #: The atom- and bond-level target names of a model with such targets (``{}`` without).
        self.level_names = level_target_names(model, meta.extra.levels if meta is not None else None)
        self.metric = watched_metric(model, self.metrics, self.level_names)
        self.direction = METRIC_DIRECTION[self.metrics[0]]
        if config.task_weights and len(config.task_weights) != model.config.num_tasks:
            raise ConfigError(f"{len(config.task_weights)} task weight(s) {list(config.task_weights)} for "
                              f"{model.config.num_tasks} target(s); give one weight per target (--task-weights)")
        self.uncertainty_head = head = model.config.uncertainty_head
        if head != "none" and (config.loss != "auto" or config.task_weights):
            raise ConfigError(f"the {head} uncertainty head trains on its own likelihood: drop --loss {config.loss} / "
                              "--task-weights, or train without --uncertainty " + head)
        self.task_weights = torch.tensor(config.task_weights, device=self.device) if config.task_weights else None
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.meta = meta
        self.checkpoints = RunCheckpoints(self.out_dir, meta, config, self.hooks, self.parts)
        self.pos_weight: Optional[torch.Tensor] = None

    # -- data ---------------------------------------------------------------------------------
    def loader(self, dataset: Dataset, shuffle: bool = False, sampler: Optional[Sampler] = None, seed: int = 0,
               batch_size: Optional[int] = None, padded: bool = False) -> DataLoader:
        """A DataLoader yielding :class:`MoleculeBatch` (pass ``sampler`` e.g. for distributed runs);
        ``padded``: batches from size buckets padded to their bucket's shape (the captured and
        compiled steps'). Its workers (``config.num_workers``) collate the batches and, feeding a
        GPU, lay each in a few page-locked buffers."""
        generator = torch.Generator().manual_seed(seed)
        collate: Callable[..., Any] = collate_molecule_tensors if self.compute == "tensors" else collate_molecules
        batch_size = batch_size or self.config.batch_size
        order = sampler if sampler is not None else (RandomSampler(dataset, generator=generator) if shuffle else None)  # type: ignore[arg-type]  # torch's Dataset declares no __len__; ours all have one
        batches: Optional[Sampler] = None
        if padded:
            buckets = SizeBuckets.of(*molecule_sizes(dataset), batch_size, self.config.size_buckets)
            collate = PaddedCollate(buckets)
            batches = BucketBatchSampler(molecule_sizes(dataset)[0], buckets, batch_size, order, seed,
                                         drop_last_single=order is not None)
        elif self.config.batch_edges is not None:
            batches = EdgeBudgetBatchSampler(relation_edge_counts(dataset), batch_size, self.config.batch_edges, order,
                                             drop_last_single=order is not None)
        if isinstance(dataset, RowIndexed):
            collate = functools.partial(collate_indexed, collate=collate)
        workers = self.config.num_workers if self.config.num_workers is not None else (2 if self.device.type == "cuda" else 0)
        feeding = dict(num_workers=workers, pin_memory=self.device.type == "cuda", persistent_workers=workers > 0)
        if batches is not None:
            return DataLoader(dataset, batch_sampler=batches, collate_fn=collate, **feeding)  # type: ignore[arg-type]
        rows = len(sampler) if isinstance(sampler, Sized) else len(dataset)  # type: ignore[arg-type]  # torch's Dataset declares no __len__; ours all have one
        drop_last = order is not None and rows % batch_size == 1  # BatchNorm needs > 1 row
        return DataLoader(dataset, batch_size=batch_size, shuffle=shuffle and sampler is None, sampler=sampler,
                          collate_fn=collate, generator=generator, drop_last=drop_last, **feeding)  # type: ignore[arg-type]

    def _target_names(self, count: int) -> List[str]:
        return list(self.meta.target_names) if self.meta is not None else [f"target {t}" for t in range(count)]

    def _check_labels(self, train_set: Dataset, valid_set: Optional[Dataset]) -> None:
        """Refuse labels the task cannot train on; warn about a classification target of one class in
        the training part, and about validation labels some metric cannot score."""
        names = self.meta.target_names if self.meta is not None else None
        checked = self.task in ("classification", "multiclass")  # each part's labels read once, where they are needed
        train_labels = dataset_labels(train_set).double() if checked else None
        valid_labels = dataset_labels(valid_set).double() if valid_set is not None and (checked or self.hooks.is_main) else None
        for labels in (train_labels, valid_labels):
            if labels is not None and self.task == "classification":
                check_binary_labels(labels.numpy(), names)
            elif labels is not None and self.task == "multiclass":
                check_class_labels(labels.numpy(), self.model.config.num_classes, names)
        if train_labels is not None and self.task == "classification" and self.hooks.is_main:
            for t, name in enumerate(self._target_names(train_labels.shape[1])):
                classes = torch.unique(train_labels[~torch.isnan(train_labels[:, t]), t])
                if len(classes) == 1:
                    logger.warning("training set: target %r holds only class %g, so the model cannot learn to tell the "
                                   "classes apart; split otherwise (another --seed, or --split-col)", name, float(classes[0]))
        if valid_labels is not None and self.hooks.is_main:
            for note in metric_notes(self.task, valid_labels.numpy(), names):
                logger.warning("validation set: %s", note)

    def _prepare_labels(self, train_set: Dataset) -> None:
        """Refuse targets without a training label (any task); then the regression targets'
        reference values and normalization, or the classification loss's ``pos_weight``."""
        labels = dataset_labels(train_set).double()
        names = self._target_names(labels.shape[1])
        refuse_unlabelled_targets(labels, names)
        check_pos_weight(self.task, self.config.pos_weight)
        if self.task == "classification":
            self.pos_weight = self._positive_weight(labels, names)
        if self.task != "regression":
            return
        reference = getattr(self.model, "atom_reference", None)
        if reference is not None:
            labels = fit_atom_reference(self.model, self.loader(train_set))
            if self.hooks.is_main:
                for line in reference.describe(names):
                    logger.info("atom reference values (least squares on the training part) of %s", line)
        self.model.set_target_normalization(*normalization_statistics(labels))
        if self.level_names:
            fit_level_statistics(self.model, self.loader(train_set), self.level_names)

    def _positive_weight(self, labels: torch.Tensor, names: List[str]) -> Optional[torch.Tensor]:
        """The classification loss's ``pos_weight`` ``[T]`` as ``config.pos_weight`` sets it."""
        weight = self.config.pos_weight
        if weight == "auto":
            weights = positive_weights(labels, names).to(self.device)
            if self.hooks.is_main:
                logger.info("pos_weight auto (negatives/positives on the training part): %s",
                            ", ".join(f"{n} {w:.3g}" for n, w in zip(names, weights.tolist())))
            return weights
        return None if weight is None else torch.full((labels.shape[1],), float(weight), device=self.device)

    # -- loop ---------------------------------------------------------------------------------
    def fit(
        self,
        train_set: Dataset,
        valid_set: Optional[Dataset] = None,
        train_sampler: Optional[Sampler] = None,
        resume: Union[None, bool, PathLike] = None,
    ) -> TrainResult:
        """Train for ``config.epochs`` (or until early stopping) and keep the best weights.

        Without ``valid_set`` the last epoch is kept. ``train_sampler`` replaces the hooks'
        epoch-seeded shuffling (its ``set_epoch(epoch)`` is called before every epoch if it has one).

        With ``out_dir`` and ``meta``, ``last.pt`` is rewritten after every epoch with the training
        state; ``resume`` continues from it: a path, or ``True`` for ``out_dir/last.pt`` when that
        file exists (a fresh start otherwise). A resumed run ends with the same weights and
        metrics as an uninterrupted one (exactly on CPU with the same number of processes).
        """
        cfg, show = self.config, self.config.progress and self.hooks.is_main
        run = self._start_fit(self._prepare_fit(train_set, valid_set), train_sampler, resume)
        state = run.bookkeeping.state
        first_epoch = cfg.epochs + 1 if state.finished else state.epoch + 1
        bar = progress(range(first_epoch, cfg.epochs + 1), "training", "epoch", enabled=show, interval=0,
                       total=cfg.epochs, initial=min(first_epoch - 1, cfg.epochs))
        for epoch in bar:
            row, metrics, score = self._run_epoch(run, epoch, valid_set)
            if show:
                bar.set_postfix(  # type: ignore[attr-defined]  # progress() gives a bar when progress is on
                    loss=f"{row['train_loss']:.4f}", **({f"val_{self.metric}": f"{score:.4f}"} if score is not None else {}))
            if run.bookkeeping.end_epoch(epoch, row, metrics, score):
                break
        if state.best_weights is not None:
            self.model.load_state_dict(state.best_weights)
        frame = pd.DataFrame(state.history)
        if self.out_dir is not None and self.hooks.is_main:
            plot_learning_curve(frame, self.metric, self.out_dir / "learning_curve.png")
        return TrainResult(frame, state.best_epoch, state.best_metrics)

    def _prepare_fit(self, train_set: Dataset, valid_set: Optional[Dataset]) -> Dataset:
        """Check the settings and labels, seed this process, fit the label statistics; the
        training set as the loader reads it (rows indexed when the loss reads per-row inputs)."""
        if self.config.batch_edges is not None and self.hooks.world_size > 1:
            raise ConfigError("batch_edges gives each process its own number of batches, which distributed training "
                              "cannot synchronise; train with one process, or without batch_edges")
        torch.manual_seed(self.config.seed + self.hooks.rank)
        self._check_labels(train_set, valid_set)
        self._prepare_labels(train_set)
        inputs = LossInputs.of(train_set)
        self._loss_inputs = None if inputs is None else inputs.to(self.device)  # the steps index them there
        if self._loss_inputs is not None and self.uncertainty_head != "none":
            raise ConfigError(f"the {self.uncertainty_head} uncertainty head trains on its own likelihood, "
                              "without sample weights or censored labels: drop --weight-col / --loss bounded_mse")
        return RowIndexed(train_set) if self._loss_inputs is not None else train_set

    def _start_fit(self, train_set: Dataset, train_sampler: Optional[Sampler], resume: Union[None, bool, PathLike]) -> FitRun:
        """The loader, optimizer and schedule of a fit, and its progress: fresh, or restored by ``resume``."""
        cfg, hooks = self.config, self.hooks
        mode = resolve_step_mode(cfg.step_mode, self.device, hooks.world_size, cfg.batch_edges)
        own_step = type(self).batch_loss is Trainer.batch_loss and type(self).training_module is Trainer.training_module
        unpadded = None if own_step else f"{type(self).__name__}'s own loss or module"
        if self.level_names or self.model.config.molecules.several:  # a padding slot holds one molecule, no atom labels
            unpadded = "a model of atom- or bond-level targets or of rows of several molecules"
        if mode != "eager" and unpadded:  # another loss may read what padding adds (padding atoms, say)
            if cfg.step_mode != "auto":
                raise ConfigError(f"step_mode {cfg.step_mode!r} trains on padded batches, which {unpadded} is not known "
                                  "to read correctly; use step_mode 'eager'")
            logger.info("%s: eager steps", unpadded)
            mode = "eager"
        sampler = train_sampler if train_sampler is not None else hooks.train_sampler(train_set, cfg.seed)
        train_loader = self.loader(train_set, sampler=sampler, seed=cfg.seed, batch_size=hooks.local_batch_size(cfg.batch_size),
                                   padded=mode != "eager")
        steps_per_epoch = max(len(train_loader), 1)
        groups = parameter_groups(self.model, cfg.lr, cfg.backbone_lr_scale, cfg.layer_lr_decay)
        groups += [{"params": list(part.parameters())} for part in self.parts.values()]
        optimizer = adamw(groups, cfg.lr, cfg.weight_decay, self.device)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lr_factor(cfg.schedule, cfg.warmup_epochs * steps_per_epoch, cfg.epochs * steps_per_epoch, cfg.final_lr_ratio),
        )
        state = self.checkpoints.resume(resume, self.model, optimizer, scheduler) if resume else TrainingState()
        bookkeeping = EpochBookkeeping(state, self.checkpoints, self.model, optimizer, scheduler, self.direction,
                                       cfg.patience, cfg.epochs)
        trained = [*self.model.parameters(), *(p for part in self.parts.values() for p in part.parameters())]
        step = TrainStep(hooks.wrap_model(self.training_module()), self.batch_loss, trained, optimizer, cfg.grad_clip,
                         hooks, distribution=self.uncertainty_head != "none", levels=bool(self.level_names))
        faster = {"compiled": CompiledStep, "captured": CapturedStep}.get(mode)
        return FitRun(step if faster is None else faster(step), optimizer, train_loader, sampler, scheduler, bookkeeping)

    def training_module(self) -> torch.nn.Module:
        """What the training steps run each batch through (wrapped for a distributed run): the
        model. Override to train through a module around it, as masked-atom pretraining does
        (:class:`~dgl_graphtx.models.masked_atoms.MaskedAtomNetwork`)."""
        return self.model

    def _run_epoch(self, run: FitRun, epoch: int, valid_set: Optional[Dataset]
                   ) -> Tuple[Dict[str, float], Dict[str, float], Optional[float]]:
        """Train and validate one epoch: its ``log.csv`` row, its validation metrics and the
        watched metric's score (empty and ``None`` without ``valid_set``)."""
        start = time.perf_counter()
        set_epoch = getattr(run.sampler, "set_epoch", None)  # a distributed or otherwise epoch-seeded sampler
        if set_epoch is not None:
            set_epoch(epoch)
        train_loss, last_lr, skipped = self._train_epoch(run.step, run.optimizer, run.loader, run.scheduler, epoch)
        self._check_weights(epoch)
        row: Dict[str, float] = {"epoch": epoch, "lr": last_lr, "train_loss": train_loss, "skipped_steps": skipped}
        metrics = self.evaluate(valid_set) if valid_set is not None else {}
        row.update({f"valid_{k}": v for k, v in metrics.items()})
        row["seconds"] = time.perf_counter() - start
        return row, metrics, (metrics[self.metric] if valid_set is not None else None)

    def batch_loss(self, output: torch.Tensor, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The training loss of one batch: the uncertainty head's distribution loss, or the chosen
        loss with its weights (``rows``: the batch's dataset rows, for per-molecule weights and
        censoring). Override to change it, as pretraining does."""
        if isinstance(output, LevelOutputs):  # a model with atom- or bond-level targets
            return self.batch_loss(output.molecules, batch, rows) + level_loss(self.model, output, batch.graph)
        target = self.model.normalize_targets(batch.labels)
        if self.uncertainty_head != "none":
            return head_loss(self.uncertainty_head, output, target, batch.mask, self.uncertainty)
        extra = self._loss_inputs.at(rows, self.device) if rows is not None and self._loss_inputs is not None else {}
        return weighted_loss(self.loss, output, target, batch.mask, task_weights=self.task_weights,
                             pos_weight=self.pos_weight, **extra)

    def _train_epoch(self, step: Callable[..., StepResult], optimizer: torch.optim.Optimizer, loader: DataLoader, scheduler,
                     epoch: int) -> Tuple[float, float, int]:
        """Mean training loss (over all processes), the learning rate of the epoch's last step, and
        the number of steps skipped for a non-finite loss or gradient (``on_nonfinite="skip"``).

        No step waits for the device: the loss, its finiteness and the gradient norm stay there
        (a step with a non-finite one is skipped by the optimizer itself, in every process), and
        are read every :attr:`read_every` steps and at the end of the epoch."""
        self.model.train()
        tally = StepTally(self.device, self.read_every)
        lr, batches = optimizer.param_groups[-1]["lr"], len(loader)
        frozen = backbone_parameters(self.model) if epoch <= self.config.freeze_backbone_epochs else []
        for index, batch in enumerate(loader, start=1):
            rows = batch.rows.to(self.device, non_blocking=True) if isinstance(batch, IndexedBatch) else None
            batch = batch.batch if rows is not None else batch
            molecules = real_molecules(batch)  # read on the host, before the batch moves
            result = step(self._to_device(batch), rows, frozen)
            lr = float(optimizer.param_groups[-1]["lr"])
            scheduler.step()
            tally.add(result.loss, result.grad_norm, result.skipped, result.loss_not_finite, molecules)
            if tally.full or index == batches:
                self._report_skipped(tally.read(), epoch, batches)
        total, count, skipped_steps = tally.totals.tolist()
        total, count = self.hooks.all_sum(torch.tensor([total, count], dtype=torch.float64)).tolist()
        return (total / count if count else math.nan), lr, int(skipped_steps)

    def _to_device(self, batch: MoleculeBatch) -> MoleculeBatch:
        """``batch`` on the training device, its categorical features checked on the host first
        when that is a GPU (an embedding index out of range there is a device assert, not an
        error the forward pass can name; on the CPU the forward pass names it)."""
        if self.device.type != "cpu":
            self.model.check_inputs(batch.graph)
        return batch.to(self.device, non_blocking=True)

    def _report_skipped(self, steps: List[StepReport], epoch: int, batches: int) -> None:
        """Stop at the first skipped step (``on_nonfinite="stop"``) or log each of them."""
        for step in steps:
            if not step.skipped:
                continue
            where = f"epoch {epoch}, batch {step.batch} of {batches}"
            problem = (f"loss is {step.loss} (in at least one process)" if step.loss_not_finite
                       else f"gradient norm is {step.grad_norm}")
            if self.config.on_nonfinite == "stop":
                raise NonFiniteError(
                    f"training diverged at {where}: {problem}. Lower --lr, check the labels for extreme "
                    "values, or skip such steps with on_nonfinite='skip'"
                )
            logger.warning("skipping the optimisation step at %s: %s", where, problem)

    def _check_weights(self, epoch: int) -> None:
        bad = [name for name, value in self.model.state_dict().items()
               if value.is_floating_point() and not torch.isfinite(value).all()]
        if bad:
            raise NonFiniteError(f"weights became non-finite after epoch {epoch} (first: {bad[0]}); "
                                 "nothing was saved from this epoch. Lower the learning rate")

    # -- inference ----------------------------------------------------------------------------
    @torch.no_grad()
    def predict(self, dataset: Dataset) -> np.ndarray:
        """Predictions ``[M, T]`` in target units (probabilities for classification).

        With several processes each predicts its rows of the split and every process gets all
        of them (each row predicted exactly once).
        """
        self.model.eval()
        outputs = [torch.zeros(0, self.model.config.prediction_width)]
        local = Subset(dataset, list(self.hooks.shard_indices(len(dataset))))  # type: ignore[arg-type]  # torch's Dataset declares no __len__; ours all have one
        if len(local):
            for batch in self.loader(local):
                batch = self._to_device(batch)
                outputs.append(self.model.to_target_space(self.model(batch.graph, batch.relation_graph)).cpu())
        return self.hooks.gather_rows(torch.cat(outputs).double(), len(dataset)).numpy()  # type: ignore[arg-type]  # torch's Dataset declares no __len__; ours all have one

    def evaluate(self, dataset: Dataset) -> Dict[str, float]:
        """Metrics of the current model on ``dataset`` (those ``config.metrics`` chooses; all of the
        task's by default): of the molecule-level targets, then of the atom- and bond-level ones
        (``atom_rmse``, ...; every process predicts the whole part)."""
        if not self.level_names:
            return compute_metrics(self.task, dataset_labels(dataset).double().numpy(), self.predict(dataset), self.metrics)
        predicted, levels = predict_levels(self.model, self.loader(dataset), self.device)
        molecules = (compute_metrics(self.task, dataset_labels(dataset).double().numpy(), predicted, self.metrics)
                     if self.model.config.num_tasks else {})
        return {**molecules, **level_metrics(levels, self.metrics)}
