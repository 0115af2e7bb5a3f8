"""Runs started from a resolved :class:`~dgl_graphtx.runs.config.RunConfig`, as the command line
starts them, in this process or as one process of a distributed job: a training run is checked,
its folder locked and its configuration recorded before its data is read, once, and one model, an
ensemble or the folds of a cross-validation are trained; pretraining is set up the same way."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import torch

from .._version import __version__
from ..checkpoint import load_checkpoint
from ..datasets import MoleculeDataset
from ..datasets.cache import check_cache_dir
from ..datasets.extra_features import ExtraFeatures
from ..devices import resolve_compute
from ..errors import ConfigError, GraphTxError
from ..inference.backbones import describe_loaded
from ..logs import log_to_file
from ..training import ProcessHooks
from ..training.resume import check_resume_pretraining, check_resume_settings
from ..training.target_metrics import format_metrics
from .config import RunConfig, default_preset_name
from .calibration_part import GivenCalibration, check_resumed_calibration
from .cross_validation import CVResult, cross_validate
from .distributed import DistributedConfig, DistributedContext, check_processes, process_hooks, process_settings
from .ensemble import EnsembleResult, train_ensemble
from .experiment import ExperimentResult, train_and_evaluate
from .folder import RunFolder, check_run_tree
from .plan import RunPlan
from .pretraining import PretrainConfig, PretrainResult, pretrain
from .pretraining.card import pretraining_recipe
from .pretraining.corpus import corpus_record, corpus_sha256
from .training_data import load_calibration_data, load_training_data

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]

#: What a training run gives: one model's result, an ensemble's, or a cross-validation's.
RunResult = Union[ExperimentResult, EnsembleResult, CVResult]


def check_run(config: RunConfig, out_dir: PathLike, overwrite: bool = False, resume: bool = False,
              processes: int = 1) -> RunPlan:
    """Everything about a training run that can be checked before its data is read and before
    the processes of a distributed run start (``processes`` on this machine): data and targets
    given, the input files there, every rule between the settings (the run's
    :class:`~dgl_graphtx.runs.plan.RunPlan`, which also resolves ``train.from_pretrained``: its
    backbone located, hash-checked and loaded, once; and the device), a GPU per process, the
    output folder free (or the run there resumable with these settings), the dataset cache's
    folder writable. One error for the
    first problem; the plan when there is none.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> check_run(resolve_run_config(overrides=["data.targets=y"]), tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: no training data: give the DATA file (or data.path in --config)
    """
    data = config.data
    training_path = data.training_path
    if not data.targets and not data.level_targets.any:
        raise GraphTxError("no targets: give --targets, --atom-targets or --bond-targets (or data.targets in --config / --set)")
    for path in (training_path, data.valid, data.test, data.calibration):
        if path is not None and not (path == training_path and data.is_qm9) and not Path(path).exists():
            raise GraphTxError(f"data file not found: {path}")
    plan = RunPlan.from_config(config)
    if data.dataset_cache is not None:
        check_cache_dir(data.dataset_cache)
    if resume and not plan.single:
        raise GraphTxError("--resume continues a single run; ensembles (--ensemble-size/--replicates) and --cv cannot resume")
    if processes > 1:
        check_processes(processes, plan.train.device)
    if plan.single:
        RunFolder(out_dir, overwrite, resume=resume).check()
        if resume:  # before featurizing: a mismatch is refused at once, config.yaml untouched
            check_resumable_plan(Path(out_dir), plan, config.extra_features)
    else:
        check_run_tree(out_dir, overwrite)
    return plan


def check_resumable_plan(out_dir: Path, plan: RunPlan, features: ExtraFeatures = ExtraFeatures()) -> None:
    """Refuse to resume the run in ``out_dir`` when its ``last.pt`` was trained with other
    training settings than ``plan`` (:func:`~dgl_graphtx.training.resume.check_resume_settings`),
    other extra features or fingerprint kernel than ``features`` (:func:`check_resumed_features`)
    or other uncertainty settings that choose its calibration molecules
    (:func:`~dgl_graphtx.runs.calibration_part.check_resumed_calibration`). Nothing to check
    when there is no ``last.pt`` yet (the run then starts afresh).

    Example:
        >>> from dgl_graphtx.models import get_preset
        >>> check_resumable_plan(Path("no-such-run"), RunPlan(get_preset("vanilla")))
    """
    path = Path(out_dir) / "last.pt"
    if path.is_file():
        extra = load_checkpoint(path, map_location="cpu").meta.extra
        check_resume_settings(path, extra.train_config or {}, plan.train)
        check_resumed_features(path, extra.extra_features, features)
        check_resumed_calibration(path, extra.uncertainty, plan.uncertainty)


#: The settings of a run's extra features, by the option (``data.*``) that sets each.
FEATURE_OPTIONS = {"generators": "features_generators", "columns": "features_cols", "atom_properties": "atom_properties",
                   "scaling": "features_scaling", "kernel": "kernel"}


def check_resumed_features(path: Path, saved: Optional[Dict[str, Any]], features: ExtraFeatures) -> None:
    """Refuse to resume the run of ``path`` with other extra features, scaling or fingerprint
    kernel than ``saved`` (the checkpoint's fitted extra features; ``None``: none), naming each
    option that changed: the features are scaled and the kernel fitted once, on the first start.

    Example:
        >>> from dgl_graphtx.datasets.extra_features import FittedExtraFeatures
        >>> saved = FittedExtraFeatures(ExtraFeatures(("rdkit2d",)), None).to_dict()
        >>> check_resumed_features(Path("last.pt"), saved, ExtraFeatures(("rdkit2d",), scaling="robust"))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: last.pt was trained with data.features_scaling=standard; resume with the same settings (now robust)
    """
    before = ExtraFeatures.from_dict(saved["spec"]) if saved else ExtraFeatures()
    changed = [(option, getattr(before, name), getattr(features, name)) for name, option in FEATURE_OPTIONS.items()
               if getattr(before, name) != getattr(features, name)]
    if changed:
        raise ConfigError(f"{path} was trained with {', '.join(f'data.{o}={_setting(b)}' for o, b, _ in changed)}; "
                          f"resume with the same settings (now {', '.join(_setting(n) for _, _, n in changed)})")


def _setting(value: Any) -> str:
    """A feature setting as the command line gives it: a list comma-joined, nothing as ``none``."""
    text = ",".join(value) if isinstance(value, tuple) else str(value)
    return text or "none"


def train_from_config(config: RunConfig, out_dir: PathLike, overwrite: bool = False, resume: bool = False,
                      distributed: DistributedConfig = DistributedConfig(),
                      hooks: Optional[ProcessHooks] = None) -> Optional[RunResult]:
    """Train what ``config`` describes into ``out_dir`` (``config.yaml``, ``train.log`` and the
    files of :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`, :func:`~dgl_graphtx.runs.ensemble.train_ensemble`
    or :func:`~dgl_graphtx.runs.cross_validation.cross_validate`), after :func:`check_run`. Under
    torchrun the process joins the job (``distributed``); the other processes than the main one
    return ``None``. ``hooks`` replace the process's own (a hyperparameter search's trials
    report every epoch to the search through them).

    ``resume`` continues a single run from ``out_dir/last.pt``; ``overwrite`` replaces a run
    already in ``out_dir``.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.datasets import freesolv_path
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> run = resolve_run_config(overrides=[f"data.path={freesolv_path()}", "data.targets=expt", "train.epochs=1",
        ...                                     "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
        ...                                     "data.cache=false", "train.progress=false"])
        >>> result = train_from_config(run, tempfile.mkdtemp())
        >>> sorted(result.test_metrics)
        ['mae', 'r2', 'rmse']
    """
    plan = check_run(config, out_dir, overwrite, resume)
    config = plan.config if plan.config is not None else config
    out = Path(out_dir)
    joined = process_hooks(plan.train.device, distributed) if hooks is None else contextlib.nullcontext(hooks)
    with joined as hooks, contextlib.ExitStack() as opened:
        config, plan = _for_process(config.with_absolute_paths(), plan, hooks, out)
        # a resumed run keeps the run's config.yaml until it has checked its data and trained
        resumed = resume and plan.single and (out / "config.yaml").is_file()
        # the main process locks the folder and records the run before the data is read (once: the
        # others read its cache); an error there stops every process of the job at once
        with hooks.main_first():
            folder = opened.enter_context(RunFolder(out, overwrite, resume=resume)) if hooks.is_main and plan.single else None
            if hooks.is_main:
                opened.enter_context(log_to_file(out / "train.log"))
                _log_start(config, plan, out)
                if not resumed:
                    config.save(out / "config.yaml")
            dataset, split = load_training_data(config)
            calibration = load_calibration_data(config, dataset)
        result = _train(config, plan.with_split(split), dataset, folder if folder is not None else out, hooks, overwrite, resume,
                        calibration)
    return result if hooks.is_main else None


def _log_start(config: RunConfig, plan: RunPlan, out: Path) -> None:
    """The first lines of ``train.log``: what trains, on which data and device, and from which backbone."""
    logger.info("dgl_graphtx %s: training %s (preset %s) on %s on %s (compute %s) with %d thread(s) per process; "
                "configuration in %s", __version__, config.model.variant, config.preset.name or default_preset_name(config.model.variant),
                config.data.path, plan.train.device, plan.train.compute, config.train.threads or torch.get_num_threads(),
                out / "config.yaml")
    if plan.backbone is not None:
        logger.info("fine-tuning from the %s", describe_loaded(plan.backbone))


def _train(config: RunConfig, plan: RunPlan, dataset: MoleculeDataset, out: Union[Path, RunFolder], hooks: ProcessHooks,
           overwrite: bool, resume: bool, calibration: GivenCalibration) -> RunResult:
    """One model, an ensemble or the folds of a cross-validation of ``plan`` on its data
    (``calibration``: the molecules of ``data.calibration`` that calibrate the uncertainty)."""
    folder = out.path if isinstance(out, RunFolder) else out
    if plan.folds:
        return cross_validate(dataset, plan, groups=dataset.groups if config.data.group_col else None, out_dir=folder,
                              overwrite=overwrite)
    if not plan.ensemble.single:
        return train_ensemble(dataset, plan, out_dir=folder, calibration=calibration, overwrite=overwrite)
    result = train_and_evaluate(dataset, plan, out_dir=out, hooks=hooks, resume=resume, calibration=calibration)
    if hooks.is_main:
        if resume:  # a resumed run's config.yaml is replaced once it has checked its data and trained
            config.save(folder / "config.yaml")
        logger.info("best epoch %d; test %s", result.train.best_epoch, format_metrics(result.test_metrics))
    return result


def _for_process(config: RunConfig, plan: RunPlan, hooks: ProcessHooks, out: Path) -> Tuple[RunConfig, RunPlan]:
    """Per-process settings of a distributed run (see :func:`~dgl_graphtx.runs.distributed.process_settings`)
    and a shared featurization cache (rank 0 featurizes, the others read it; in ``OUT/cache``
    with ``--no-cache``)."""
    if not isinstance(hooks, DistributedContext):
        return config, plan
    if plan.folds:
        raise GraphTxError("--cv trains its folds in one process; drop --nproc or torchrun")
    if not plan.ensemble.single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) train in one process; drop --nproc or torchrun")
    data = config.data if config.data.cache else dataclasses.replace(config.data, cache_dir=str((out / "cache").resolve()), cache=True)
    return dataclasses.replace(config, data=data), dataclasses.replace(plan, train=process_settings(plan.train, hooks))


def check_pretraining(config: RunConfig, corpus: PathLike, out_dir: PathLike, overwrite: bool = False,
                      resume: bool = False, processes: int = 1, settings: PretrainConfig = PretrainConfig()) -> None:
    """What :func:`pretrain_from_config` can check before reading its corpus and before the
    processes of a distributed run start: the corpus is there, the device and compute path are
    usable (a GPU per process), the output folder is free (or resumed: with the corpus and the
    ``settings`` and training settings its ``last.pt`` was written with).

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> check_pretraining(resolve_run_config(), "missing.smi", tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.GraphTxError: corpus missing.smi not found: give a SMILES file, a featurized store or 'moses'
    """
    if not Path(corpus).exists():
        raise GraphTxError(f"corpus {corpus} not found: give a SMILES file, a featurized store or 'moses'")
    resolve_compute(config.train.compute, check_processes(processes, config.train.device))
    RunFolder(out_dir, overwrite, resume=resume).check()
    last = Path(out_dir) / "last.pt"
    if resume and last.is_file():  # before the corpus is featurized and its descriptors computed
        extra = load_checkpoint(last, map_location="cpu").meta.extra
        current = {"corpus": corpus_record(corpus, corpus_sha256(corpus)), "recipe": pretraining_recipe(settings, config.train)}
        check_resume_pretraining(last, extra.pretraining, current)
        check_resume_settings(last, extra.train_config or {}, config.train)


def pretrain_from_config(config: RunConfig, corpus: PathLike, out_dir: PathLike, settings: PretrainConfig = PretrainConfig(),
                         name: Optional[str] = None, smiles_col: str = "smiles", overwrite: bool = False,
                         resume: bool = False) -> Optional[PretrainResult]:
    """:func:`~dgl_graphtx.runs.pretraining.pretrain` of ``config``'s model on ``corpus`` with its
    training settings, in this process or, under torchrun, as one process of the job (the other
    processes than the main one return ``None``).

    Example:
        >>> import tempfile, pathlib
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "c.smi").write_text("\\n".join(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl", "OCCN", "c1ccncc1"]))
        >>> run = resolve_run_config(overrides=["preset.model=vanilla", "model.num_layers=1", "model.hidden_dim=16",
        ...                                     "model.num_heads=2", "train.epochs=1", "train.batch_size=8", "train.progress=false"])
        >>> pretrain_from_config(run, folder / "c.smi", folder / "run", PretrainConfig(valid_share=0.25)).card.epochs
        1
    """
    check_pretraining(config, corpus, out_dir, overwrite, resume, settings=settings)
    with process_hooks(config.train.device) as hooks:
        result = pretrain(corpus, out_dir, config.as_preset(), process_settings(config.train, hooks), settings, name=name,
                          smiles_col=smiles_col, overwrite=overwrite, resume=resume, hooks=hooks)
    return result if hooks.is_main else None
