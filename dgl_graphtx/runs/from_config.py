"""Runs started from a resolved :class:`~dgl_graphtx.runs.config.RunConfig`, as the command line
starts them, in this process or as one process of a distributed job: a training run is checked,
its folder locked and its configuration recorded before its data is read, once, and one model, an
ensemble or the folds of a cross-validation are trained; pretraining is set up the same way."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import NamedTuple, Optional, Union

import torch

from .._version import __version__
from ..datasets import MoleculeDataset, Split
from ..devices import resolve_compute
from ..errors import GraphTxError
from ..inference.backbones import Pretrained, describe_loaded, get_pretrained
from ..logs import log_to_file
from ..training import ProcessHooks
from ..training.resume import check_resumable_run
from ..training.target_metrics import format_metrics
from .config import RunConfig, default_preset_name
from .calibration_part import GivenCalibration
from .cross_validation import CVResult, cross_validate
from .distributed import DistributedConfig, DistributedContext, check_processes, process_hooks, process_settings
from .ensemble import EnsembleResult, train_ensemble
from .experiment import ExperimentResult, train_and_evaluate
from .fine_tuning import pretrained_run_config
from .folder import RunFolder, check_run_tree
from .pretraining import PretrainConfig, PretrainResult, pretrain
from .training_data import load_calibration_data, load_training_data

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]

#: What a training run gives: one model's result, an ensemble's, or a cross-validation's.
RunResult = Union[ExperimentResult, EnsembleResult, CVResult]


class CheckedRun(NamedTuple):
    """A run's configuration as :func:`check_run` left it, and the backbone it fine-tunes (loaded once)."""

    config: RunConfig
    backbone: Optional[Pretrained]


def check_run(config: RunConfig, out_dir: PathLike, overwrite: bool = False, resume: bool = False,
              processes: int = 1) -> CheckedRun:
    """Everything about a training run that can be checked before its data is read and before
    the processes of a distributed run start (``processes`` on this machine): data and targets
    given, the input files there, ``train.from_pretrained`` resolved (its backbone located,
    hash-checked and loaded, once), the device and compute path usable (a GPU per process), the
    output folder free (or the run there resumable with these settings). One error for the
    first problem.

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
    if not data.targets:
        raise GraphTxError("no targets: give --targets (or data.targets in --config / --set)")
    for path in (training_path, data.valid, data.test, data.calibration):
        if path is not None and not (path == training_path and data.is_qm9) and not Path(path).exists():
            raise GraphTxError(f"data file not found: {path}")
    backbone = get_pretrained(config.train.from_pretrained) if config.train.from_pretrained else None
    if backbone is not None:
        config = pretrained_run_config(config, backbone)
    single = config.ensemble.single
    if resume and not single:
        raise GraphTxError("--resume continues a single run; ensembles (--ensemble-size/--replicates) cannot resume")
    if config.model.task == "multiclass" and not single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) average regression or binary outputs; train multiclass models singly or with --cv")
    if data.cv and (resume or not single):
        raise GraphTxError("--cv trains one model per fold: drop --resume, --ensemble-size and --replicates")
    resolve_compute(config.train.compute, check_processes(processes, config.train.device))
    if single and not data.cv:
        RunFolder(out_dir, overwrite, resume=resume).check()
        if resume:  # before featurizing: a mismatch is refused at once, config.yaml untouched
            check_resumable_run(Path(out_dir), config.train)
    else:
        check_run_tree(out_dir, overwrite)
    return CheckedRun(config, backbone)


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
    config, backbone = check_run(config, out_dir, overwrite, resume)
    out = Path(out_dir)
    joined = process_hooks(config.train.device, distributed) if hooks is None else contextlib.nullcontext(hooks)
    with joined as hooks, contextlib.ExitStack() as opened:
        config = _for_process(config.with_absolute_paths(), hooks, out)
        single = config.ensemble.single and not config.data.cv
        # a resumed run keeps the run's config.yaml until it has checked its data and trained
        resumed = resume and single and (out / "config.yaml").is_file()
        # the main process locks the folder and records the run before the data is read (once: the
        # others read its cache); an error there stops every process of the job at once
        with hooks.main_first():
            folder = opened.enter_context(RunFolder(out, overwrite, resume=resume)) if hooks.is_main and single else None
            if hooks.is_main:
                opened.enter_context(log_to_file(out / "train.log"))
                logger.info("dgl_graphtx %s: training %s (preset %s) on %s with %d thread(s) per process; configuration in %s",
                            __version__, config.model.variant, config.preset.name or default_preset_name(config.model.variant),
                            config.data.path, config.train.threads or torch.get_num_threads(), out / "config.yaml")
                if backbone is not None:
                    logger.info("fine-tuning from the %s", describe_loaded(backbone))
                if not resumed:
                    config.save(out / "config.yaml")
            dataset, split = load_training_data(config)
            calibration = load_calibration_data(config, dataset)
        result = _train(config, dataset, split, folder if folder is not None else out, hooks, overwrite, resume, backbone, calibration)
    return result if hooks.is_main else None


def _train(config: RunConfig, dataset: MoleculeDataset, split: Optional[Split], out: Union[Path, RunFolder],
           hooks: ProcessHooks, overwrite: bool, resume: bool, backbone: Optional[Pretrained],
           calibration: GivenCalibration) -> RunResult:
    """One model, an ensemble or the folds of a cross-validation of ``config`` on its data
    (``calibration``: the molecules of ``data.calibration`` that calibrate the uncertainty)."""
    data, preset = config.data, config.as_preset()
    folder = out.path if isinstance(out, RunFolder) else out
    if data.cv:
        return cross_validate(dataset, preset, config.train, folds=data.cv, kind=data.split,
                              groups=dataset.groups if data.group_col else None, out_dir=folder, overwrite=overwrite,
                              uncertainty=config.uncertainty, backbone=backbone, valid_share=data.cv_valid_share)
    if not config.ensemble.single:
        return train_ensemble(dataset, preset, config.train, split=split or data.split, fractions=data.fractions,
                              ensemble_size=config.ensemble.size, replicates=config.ensemble.replicates, out_dir=folder,
                              uncertainty=config.uncertainty, backbone=backbone, calibration=calibration, overwrite=overwrite)
    result = train_and_evaluate(dataset, preset, config.train, split=split or data.split, fractions=data.fractions,
                                out_dir=out, hooks=hooks, resume=resume, uncertainty=config.uncertainty,
                                backbone=backbone, calibration=calibration)
    if hooks.is_main:
        if resume:  # a resumed run's config.yaml is replaced once it has checked its data and trained
            config.save(folder / "config.yaml")
        logger.info("best epoch %d; test %s", result.train.best_epoch, format_metrics(result.test_metrics))
    return result


def _for_process(config: RunConfig, hooks: ProcessHooks, out: Path) -> RunConfig:
    """Per-process settings of a distributed run (see :func:`~dgl_graphtx.runs.distributed.process_settings`)
    and a shared featurization cache (rank 0 featurizes, the others read it; in ``OUT/cache``
    with ``--no-cache``)."""
    if not isinstance(hooks, DistributedContext):
        return config
    if config.data.cv:
        raise GraphTxError("--cv trains its folds in one process; drop --nproc or torchrun")
    if not config.ensemble.single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) train in one process; drop --nproc or torchrun")
    data = config.data if config.data.cache else dataclasses.replace(config.data, cache_dir=str((out / "cache").resolve()), cache=True)
    return dataclasses.replace(config, train=process_settings(config.train, hooks), data=data)


def check_pretraining(config: RunConfig, corpus: PathLike, out_dir: PathLike, overwrite: bool = False,
                      resume: bool = False, processes: int = 1) -> None:
    """What :func:`pretrain_from_config` can check before reading its corpus and before the
    processes of a distributed run start: the corpus is there, the device and compute path are
    usable (a GPU per process), the output folder is free (or resumed).

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
    check_pretraining(config, corpus, out_dir, overwrite, resume)
    with process_hooks(config.train.device) as hooks:
        result = pretrain(corpus, out_dir, config.as_preset(), process_settings(config.train, hooks), settings, name=name,
                          smiles_col=smiles_col, overwrite=overwrite, resume=resume, hooks=hooks)
    return result if hooks.is_main else None
