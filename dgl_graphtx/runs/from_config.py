"""Runs started from a resolved :class:`~dgl_graphtx.runs.config.RunConfig`, as the command line
starts them, in this process or as one process of a distributed job: a training run is checked,
its folder locked and its configuration recorded before its data is read, once, and one model, an
ensemble or the folds of a cross-validation are trained; pretraining is set up the same way."""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import Optional, Union

import torch

from .._version import __version__
from ..errors import GraphTxError
from ..logs import log_to_file
from ..training import ProcessHooks
from ..training.resume import check_resumable_run
from ..training.target_metrics import format_metrics
from .config import RunConfig, default_preset_name
from .cross_validation import CVResult, cross_validate
from .distributed import DistributedConfig, DistributedContext, process_hooks, process_settings
from .ensemble import EnsembleResult, train_ensemble
from .experiment import ExperimentResult, train_and_evaluate
from .fine_tuning import pretrained_run_config
from .folder import RunFolder
from .pretraining import PretrainConfig, PretrainResult, pretrain
from .training_data import load_calibration_data, load_training_data

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]

#: What a training run gives: one model's result, an ensemble's, or a cross-validation's.
RunResult = Union[ExperimentResult, EnsembleResult, CVResult]


def train_from_config(config: RunConfig, out_dir: PathLike, overwrite: bool = False, resume: bool = False,
                      distributed: DistributedConfig = DistributedConfig()) -> Optional[RunResult]:
    """Train what ``config`` describes into ``out_dir`` (``config.yaml``, ``train.log`` and the
    files of :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`, :func:`~dgl_graphtx.runs.ensemble.train_ensemble`
    or :func:`~dgl_graphtx.runs.cross_validation.cross_validate`); ``train.from_pretrained`` is
    resolved first (:func:`~dgl_graphtx.runs.fine_tuning.pretrained_run_config`). Under torchrun
    the process joins the job (``distributed``); the other processes than the main one return ``None``.

    ``resume`` continues a single run from ``out_dir/last.pt``, after checking its settings before
    any featurization; ``overwrite`` replaces a run already in ``out_dir``.

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
    config = _checked(config, resume)
    out = Path(out_dir)
    with process_hooks(config.train.device, distributed) as hooks:
        config = _for_process(config.with_absolute_paths(), hooks, out)
        single = config.ensemble.single and not config.data.cv
        if resume and single:  # before featurizing: a mismatch is refused at once, config.yaml untouched
            check_resumable_run(out, config.train)
        # the main process checks and locks the output folder before any featurization or training
        folder = RunFolder(out, overwrite, resume=resume) if hooks.is_main and single else None
        # a resumed run keeps the run's config.yaml until it has checked its data and trained
        resumed = resume and single and (out / "config.yaml").is_file()
        with folder if folder is not None else contextlib.nullcontext(), \
                log_to_file(out / "train.log") if hooks.is_main else contextlib.nullcontext():
            if hooks.is_main:
                logger.info("dgl_graphtx %s: training %s (preset %s) on %s with %d thread(s) per process; configuration in %s",
                            __version__, config.model.variant, config.preset.name or default_preset_name(config.model.variant),
                            config.data.path, config.train.threads or torch.get_num_threads(), out / "config.yaml")
                if not resumed:
                    config.save(out / "config.yaml")
            with hooks.main_first():
                dataset, split = load_training_data(config)
                calibration = load_calibration_data(config, dataset)
            data, preset = config.data, config.as_preset()
            if data.cv:
                result: RunResult = cross_validate(dataset, preset, config.train, folds=data.cv, kind=data.split,
                                                   groups=dataset.groups if data.group_col else None, out_dir=out,
                                                   overwrite=overwrite, uncertainty=config.uncertainty,
                                                   valid_share=data.cv_valid_share)
            elif config.ensemble.single:
                result = train_and_evaluate(dataset, preset, config.train, split=split or data.split, fractions=data.fractions,
                                            out_dir=folder if folder is not None else out, hooks=hooks, resume=resume,
                                            uncertainty=config.uncertainty, calibration=calibration)
                if hooks.is_main:
                    if resumed:
                        config.save(out / "config.yaml")
                    logger.info("best epoch %d; test %s", result.train.best_epoch, format_metrics(result.test_metrics))
            else:
                result = train_ensemble(dataset, preset, config.train, split=split or data.split, fractions=data.fractions,
                                        ensemble_size=config.ensemble.size, replicates=config.ensemble.replicates,
                                        out_dir=out, uncertainty=config.uncertainty, calibration=calibration)
    return result if hooks.is_main else None


def _checked(config: RunConfig, resume: bool) -> RunConfig:
    """``config`` with its pretrained backbone resolved, or one error for a run it cannot describe."""
    if config.data.path is None:
        raise GraphTxError("no training data: give the DATA file (or data.path in --config)")
    if not config.data.targets:
        raise GraphTxError("no targets: give --targets (or data.targets in --config / --set)")
    if config.train.from_pretrained:
        config = pretrained_run_config(config)
    single = config.ensemble.single
    if resume and not single:
        raise GraphTxError("--resume continues a single run; ensembles (--ensemble-size/--replicates) cannot resume")
    if config.model.task == "multiclass" and not single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) average regression or binary outputs; train multiclass models singly or with --cv")
    if config.data.cv and (resume or not single):
        raise GraphTxError("--cv trains one model per fold: drop --resume, --ensemble-size and --replicates")
    return config


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
        >>> pretrain_from_config(run, folder / "c.smi", folder / "run", PretrainConfig(valid_share=0.25)).card["epochs"]
        1
    """
    with process_hooks(config.train.device) as hooks:
        result = pretrain(corpus, out_dir, config.as_preset(), process_settings(config.train, hooks), settings, name=name,
                          smiles_col=smiles_col, overwrite=overwrite, resume=resume, hooks=hooks)
    return result if hooks.is_main else None
