"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import List, Sequence

from .._version import __version__
from ..datasets import is_store
from ..errors import GraphTxError
from ..logs import log_to_file
from ..models.variants import option_sections
from ..runs.config import RunConfig, default_preset_name, presets_help, resolve_run_config
from ..runs.cross_validation import cross_validate
from ..runs.distributed import BACKENDS, DistributedConfig, DistributedContext, launch_local, process_hooks
from ..runs.ensemble import train_ensemble
from ..runs.experiment import train_and_evaluate
from ..runs.fine_tuning import pretrained_run_config
from ..runs.folder import RunFolder
from ..runs.store_recipe import read_store_recipe, recipe_flags
from ..runs.training_data import load_training_data
from ..training.resume import check_resumable_run
from ..training.target_metrics import per_target_lines
from ..uncertainty.evaluation import format_uncertainty
from .common import add_input_options, add_logging_options, add_train_options, bounded, explicit_train_flags, format_metrics, with_threads

logger = logging.getLogger("dgl_graphtx")

EPILOG = f"""\
configuration (later wins): defaults < preset < --config file < --set KEY=VALUE < explicit flags.
Every field of the sections preset, data, model (with model.{"/".join(option_sections())}),
featurizer, relation, train, ensemble and uncertainty can be set in the file or with --set; the fields are
documented in docs/configuration.md and in the docstrings of ModelConfig, FeaturizerConfig, RelationConfig,
TrainConfig, DataConfig, EnsembleConfig and UncertaintyConfig (docs/uncertainty.md). The resolved configuration is written to OUT/config.yaml;
'dgl-graphtx train --config OUT/config.yaml --out NEW' repeats the run.

presets (--model NAME --preset PRESET):
{presets_help()}

inputs: CSV/TSV (delimiter sniffed, or --delimiter; .gz allowed), SDF (.sdf, .sdf.gz; SD
properties as targets), .smi, a store folder written by 'dgl-graphtx featurize', or 'qm9'.

several processes: --nproc N on this machine, or torchrun --nproc-per-node N -m dgl_graphtx train ...
(see docs/scaling.md); --resume continues a killed run from OUT/last.pt.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command to ``sub``."""
    train = sub.add_parser(
        "train", help="train a model on a CSV, SDF or SMILES file, a featurized store, or QM9",
        description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, config.yaml, "
                    "train.log, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("data", nargs="?", help="training data: CSV/TSV (SMILES column + targets), SDF (targets as SD properties), .smi, a store written by 'featurize', or 'qm9' (DFT geometries; needs dgl_graphtx[qm9])")
    train.add_argument("--targets", help="comma-separated target column / SD property names")
    train.add_argument("--out", required=True, help="output folder (refused if it already holds a run, unless --overwrite or --resume)")
    add_input_options(train)
    train.add_argument("--overwrite", action="store_true", help="replace the run already in --out (its files are deleted first)")
    add_train_options(train)
    add_logging_options(train)
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt (a fresh start if there is none)")
    scale = train.add_argument_group("distributed training (see docs/scaling.md)")
    scale.add_argument("--nproc", type=bounded(int, 1), default=1, help="processes on this machine, started with torchrun's elastic launcher (default: 1)")
    scale.add_argument("--backend", choices=BACKENDS, default="auto", help="torch.distributed backend (auto: nccl on CUDA, gloo on CPU)")
    scale.add_argument("--dist-timeout", type=float, default=600.0, help="seconds a process waits for the others before the job fails (default: 600)")
    train.set_defaults(func=run)


def without_option(argv: Sequence[str], option: str) -> List[str]:
    """``argv`` without ``option VALUE`` / ``option=VALUE``.

    Example:
        >>> without_option(["train", "x.csv", "--nproc", "2", "--epochs=3"], "--nproc")
        ['train', 'x.csv', '--epochs=3']
    """
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token == option:
            skip = True
        elif not token.startswith(option + "="):
            out.append(token)
    return out


def store_flags(args: argparse.Namespace) -> dict:
    """For ``train STORE`` naming no model anywhere (flags, ``--config``, ``--set``): the model,
    preset and atom features the store was featurized for."""
    recipe = read_store_recipe(args.data) if args.data is not None and is_store(args.data) else None
    named = args.model or args.preset or args.atom_features or args.config or any(s.startswith("preset.") for s in args.set)
    if recipe is None or named:
        return {}
    logger.info("store %s was featurized for --model %s --preset %s: training that model", args.data, recipe["model"], recipe["preset"])
    return recipe_flags(recipe)


def _for_process(config: RunConfig, hooks, out: Path) -> RunConfig:
    """Per-process settings of a distributed run: the device torchrun gave this rank, progress on
    rank 0 only, and a shared featurization cache (rank 0 featurizes, the others read it; in
    ``OUT/cache`` with ``--no-cache``)."""
    if not isinstance(hooks, DistributedContext):
        return config
    if config.data.cv:
        raise GraphTxError("--cv trains its folds in one process; drop --nproc or torchrun")
    if not config.ensemble.single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) train in one process; drop --nproc or torchrun")
    train = dataclasses.replace(config.train, device=str(hooks.device), progress=config.train.progress and hooks.is_main)
    data = config.data if config.data.cache else dataclasses.replace(config.data, cache_dir=str((out / "cache").resolve()), cache=True)
    return dataclasses.replace(config, train=train, data=data)


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args`` (in this process, or in ``--nproc`` processes)."""
    if args.nproc != 1:
        return launch_local(args.nproc, without_option(args.argv, "--nproc"))
    config = with_threads(resolve_run_config(args.config, args.set, {**store_flags(args), **explicit_train_flags(args)}))
    if config.data.path is None:
        raise GraphTxError("no training data: give the DATA file (or data.path in --config)")
    if not config.data.targets:
        raise GraphTxError("no targets: give --targets (or data.targets in --config / --set)")
    if config.train.from_pretrained:
        config = pretrained_run_config(config)
    if args.resume and not config.ensemble.single:
        raise GraphTxError("--resume continues a single run; ensembles (--ensemble-size/--replicates) cannot resume")
    if config.model.task == "multiclass" and not config.ensemble.single:
        raise GraphTxError("ensembles (--ensemble-size/--replicates) average regression or binary outputs; train multiclass models singly or with --cv")
    cv = config.data.cv
    if cv and (args.resume or not config.ensemble.single):
        raise GraphTxError("--cv trains one model per fold: drop --resume, --ensemble-size and --replicates")
    out = Path(args.out)
    with process_hooks(config.train.device, DistributedConfig(args.backend, args.dist_timeout)) as hooks:
        config = _for_process(config.with_absolute_paths(), hooks, out)
        # the main process checks and locks the output folder before any featurization or training
        single = config.ensemble.single and not cv
        if args.resume and single:  # before featurizing: a mismatch is refused at once, config.yaml untouched
            check_resumable_run(out, config.train)
        folder = RunFolder(out, args.overwrite, resume=args.resume) if hooks.is_main and single else None
        with folder if folder is not None else contextlib.nullcontext(), \
                log_to_file(out / "train.log") if hooks.is_main else contextlib.nullcontext():
            if hooks.is_main:
                logger.info("dgl_graphtx %s: training %s (preset %s) on %s with %d thread(s) per process; configuration in %s",
                            __version__, config.model.variant, config.preset.name or default_preset_name(config.model.variant),
                            config.data.path, config.train.threads, out / "config.yaml")
                config.save(out / "config.yaml")
            data = config.data
            with hooks.main_first():
                dataset, split = load_training_data(config)
            if cv:
                folds = cross_validate(dataset, config.as_preset(), config.train, folds=cv, kind=data.split,
                                       groups=dataset.groups if data.group_col else None, out_dir=out,
                                       overwrite=args.overwrite)
            elif config.ensemble.single:
                result = train_and_evaluate(dataset, config.as_preset(), config.train, split=split or data.split,
                                            fractions=data.fractions, out_dir=folder if folder is not None else out,
                                            hooks=hooks, resume=args.resume, uncertainty=config.uncertainty)
                if hooks.is_main:
                    logger.info("best epoch %d; test %s", result.train.best_epoch, format_metrics(result.test_metrics))
            else:
                ensemble = train_ensemble(dataset, config.as_preset(), config.train, split=split or data.split,
                                          fractions=data.fractions, ensemble_size=config.ensemble.size,
                                          replicates=config.ensemble.replicates, out_dir=out,
                                          uncertainty=config.uncertainty)
        if not hooks.is_main:
            return 0
    if cv:
        print(f"cross-validation over {cv} folds; test metrics, mean +/- std over folds:")
        for target, rows in folds.summary.groupby("target", sort=False):
            print(f"  {target}: " + ", ".join(f"{r.metric} {r.mean:.4f} +/- {r.std:.4f}" for r in rows.itertuples()))
        print(f"summary: {out / 'cv_metrics.csv'} and cv_metrics.json; runs: {out}/fold_<k>/")
        return 0
    if config.ensemble.single:
        print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
        print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}"
              + (" (mean over targets)" if len(result.test_per_target) > 1 else ""))
        for line in per_target_lines(result.test_per_target):
            print(line)
        for note in result.test_notes:
            print(f"note: {note}")
        if result.calibration is not None:
            print(f"uncertainty ({config.uncertainty.method}) calibrated on the validation part; test: "
                  f"{format_uncertainty(result.test_predictions, list(dataset.target_names), config.uncertainty.coverage)}")
        print(f"checkpoint: {out / 'best.pt'}")
        return 0
    size, replicates = config.ensemble.size, config.ensemble.replicates
    print(f"ensemble of {size} model(s) x {replicates} split(s); test metrics of the ensemble mean over replicates:")
    print(", ".join(f"{k} {v['mean']:.4f} +/- {v['std']:.4f}" for k, v in ensemble.summary.items() if not k.startswith("member_")))
    if len(ensemble.per_target) > 1:
        for name, values in ensemble.per_target.items():
            print(f"  {name}: " + ", ".join(f"{k} {v['mean']:.4f} +/- {v['std']:.4f}" for k, v in values.items()))
    if size > 1:
        print(f"Spearman rho of the ensemble std vs |error| on the test parts: {ensemble.spearman:.3f}")
    if config.uncertainty.method == "ensemble":
        print(f"calibrated on each replicate's validation part; test: "
              f"{format_uncertainty(ensemble.predictions, list(dataset.target_names), config.uncertainty.coverage)}")
    print(f"predictions: {out / 'ensemble_test_predictions.csv'}; checkpoints: {out}/replicate_*/member_*/best.pt")
    return 0
