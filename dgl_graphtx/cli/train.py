"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path
from typing import Optional, Tuple

from .._version import __version__
from ..datasets import MoleculeDataset, Split, load_labelled, qm9
from ..errors import GraphTxError
from ..ensemble import train_ensemble
from ..experiment import train_and_evaluate
from ..logs import log_to_file
from ..run_config import RunConfig, presets_help, resolve_run_config
from .common import add_input_options, add_logging_options, add_train_options, explicit_train_flags, format_metrics

logger = logging.getLogger("dgl_graphtx")

EPILOG = f"""\
configuration (later wins): defaults < preset < --config file < --set KEY=VALUE < explicit flags.
Every field of the sections preset, data, model (with model.grpe/moire/gradformer/graphormer),
featurizer, relation, train and ensemble can be set in the file or with --set; the fields are documented
in docs/configuration.md and in the docstrings of ModelConfig, FeaturizerConfig, RelationConfig,
TrainConfig, DataConfig and EnsembleConfig. The resolved configuration is written to OUT/config.yaml;
'dgl-graphtx train --config OUT/config.yaml --out NEW' repeats the run.

presets (--model NAME --preset PRESET):
{presets_help()}

inputs: CSV/TSV (delimiter sniffed, or --delimiter; .gz allowed), SDF (.sdf, .sdf.gz; SD
properties as targets), .smi.
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``train`` sub-command to ``sub``."""
    train = sub.add_parser(
        "train", help="train a model on a CSV, SDF or SMILES file",
        description="Train, select the best validation epoch, evaluate on the test split; writes best.pt, config.yaml, "
                    "train.log, log.csv, learning_curve.png, metrics.json and test_predictions.csv to --out.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("data", nargs="?", help="training data: CSV/TSV (SMILES column + targets), SDF (targets as SD properties) or .smi")
    train.add_argument("--targets", help="comma-separated target column / SD property names")
    train.add_argument("--out", required=True, help="output folder")
    add_input_options(train)
    add_train_options(train)
    add_logging_options(train)
    train.set_defaults(func=run)


def _absolute(run: RunConfig) -> RunConfig:
    """The run with its file paths made absolute, so that the saved config works from anywhere."""
    data = run.data
    paths = {name: str(Path(getattr(data, name)).resolve()) for name in ("path", "valid", "test", "cache_dir")
             if getattr(data, name) is not None and not (name == "path" and data.is_qm9)}
    return dataclasses.replace(run, data=dataclasses.replace(data, **paths))


def load_training_data(config: RunConfig) -> Tuple[MoleculeDataset, Optional[Split]]:
    """The featurized training data of a run and, when the data defines it, its split: a file
    through the common reader, or QM9 from its DFT geometries when ``data.path`` is ``qm9``."""
    data = config.data
    kwargs = dict(featurizer=config.featurizer, relation=config.relation, cache_dir=data.cache_dir,
                  progress=config.train.progress)
    if data.is_qm9:
        return qm9(as_dataset=True, targets=list(data.targets), subset=data.subset, seed=config.train.seed, **kwargs), None
    return load_labelled(data.path, data.targets, smiles_col=data.smiles_col, delimiter=data.delimiter,
                         split_col=data.split_col, valid=data.valid, test=data.test, **kwargs)


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args``."""
    config = resolve_run_config(args.config, args.set, explicit_train_flags(args))
    if config.data.path is None:
        raise GraphTxError("no training data: give the DATA file (or data.path in --config)")
    if not config.data.targets:
        raise GraphTxError("no targets: give --targets (or data.targets in --config / --set)")
    config = _absolute(config)
    out = Path(args.out)
    with log_to_file(out / "train.log"):
        logger.info("dgl_graphtx %s: training %s (preset %s) on %s; configuration in %s", __version__,
                    config.model.variant, config.preset.name or "default", config.data.path, out / "config.yaml")
        config.save(out / "config.yaml")
        data = config.data
        dataset, split = load_training_data(config)
        if config.ensemble.single:
            result = train_and_evaluate(dataset, config.as_preset(), config.train, split=split or data.split,
                                        fractions=data.fractions, out_dir=out)
            logger.info("best epoch %d; test %s", result.train.best_epoch, format_metrics(result.test_metrics))
        else:
            ensemble = train_ensemble(dataset, config.as_preset(), config.train, split=split or data.split,
                                      fractions=data.fractions, ensemble_size=config.ensemble.size,
                                      replicates=config.ensemble.replicates, out_dir=out)
    if config.ensemble.single:
        print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
        print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}")
        print(f"checkpoint: {out / 'best.pt'}")
        return 0
    size, replicates = config.ensemble.size, config.ensemble.replicates
    print(f"ensemble of {size} model(s) x {replicates} split(s); test metrics of the ensemble mean over replicates:")
    print(", ".join(f"{k} {v['mean']:.4f} +/- {v['std']:.4f}" for k, v in ensemble.summary.items() if not k.startswith("member_")))
    if size > 1:
        print(f"Spearman rho of the ensemble std vs |error| on the test parts: {ensemble.spearman:.3f}")
    print(f"predictions: {out / 'ensemble_test_predictions.csv'}; checkpoints: {out}/replicate_*/member_*/best.pt")
    return 0
