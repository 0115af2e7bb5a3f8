"""``dgl-graphtx train``: train, select the best validation epoch, evaluate on the test split."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ..datasets import is_store
from ..datasets.sharded_store import store_atom_budget
from ..models.variants import option_sections
from ..runs.config import apply_threads, presets_help, resolve_run_config
from ..runs.distributed import BACKENDS, DistributedConfig, launch_local
from ..runs.from_config import check_run, train_from_config
from ..runs.plan import RunPlan
from ..runs.store_recipe import read_store_recipe, recipe_flags
from .common import (add_input_options, add_logging_options, add_train_options, bounded, explicit_train_flags, field_type, one_of,
                     without_option)
from .run_report import print_run

logger = logging.getLogger("dgl_graphtx")

EPILOG = f"""\
configuration (later wins): defaults < preset < --config file < --set KEY=VALUE < explicit flags.
Every field of the sections preset, data, model (with model.{"/".join(option_sections())}),
featurizer, relation, train, ensemble and uncertainty can be set in the file or with --set; the fields are
documented in docs/configuration.md and in the docstrings of ModelConfig, FeaturizerConfig, RelationConfig,
TrainConfig, DataConfig, EnsembleConfig and UncertaintyConfig (docs/uncertainty.md). Each value is checked by
its dataclass, and the rules between settings by the run's plan, before any work (docs/configuration.md). The
resolved configuration is written to OUT/config.yaml; 'dgl-graphtx train --config OUT/config.yaml --out NEW'
repeats the run.

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
    train.add_argument("data", nargs="?",
                       help="training data: CSV/TSV (SMILES column + targets), SDF (targets as SD properties), .smi, .xyz (targets "
                            "as comment-line key=value pairs), a store written by 'featurize', or 'qm9' (DFT geometries; needs "
                            "dgl_graphtx[qm9])")
    train.add_argument("--targets", help="comma-separated target column / SD property names")
    train.add_argument("--out", required=True, help="output folder (refused if it already holds a run, unless --overwrite or --resume)")
    add_input_options(train)
    train.add_argument("--overwrite", action="store_true", help="replace the run already in --out (its files are deleted first)")
    add_train_options(train)
    add_logging_options(train)
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt (a fresh start if there is none)")
    scale = train.add_argument_group("distributed training (see docs/scaling.md)")
    scale.add_argument("--nproc", type=bounded(int, 1), default=1,
                       help="processes on this machine, started with torchrun's elastic launcher (default: 1)")
    scale.add_argument("--backend", **one_of(BACKENDS), default=DistributedConfig.backend,
                       help="torch.distributed backend (auto: nccl on CUDA, gloo on CPU)")
    scale.add_argument("--dist-timeout", type=field_type(DistributedConfig, "timeout_s"), default=DistributedConfig.timeout_s,
                       help=f"seconds a process waits for the others before the job fails (default: {DistributedConfig.timeout_s:g})")
    train.set_defaults(func=run)


def store_flags(args: argparse.Namespace) -> dict:
    """For ``train STORE``: the model, preset and atom features the store was featurized for, when
    no model is named anywhere (flags, ``--config``, ``--set``), and its atom budget
    (``featurize --max-atoms``), when no ``data.max_atoms`` is."""
    if args.data is None or not is_store(args.data):
        return {}
    flags = {}
    recipe = read_store_recipe(args.data)
    named = args.model or args.preset or args.atom_features or args.config or any(s.startswith("preset.") for s in args.set)
    if recipe is not None and not named:
        logger.info("store %s was featurized for --model %s --preset %s: training that model", args.data, recipe["model"],
                    recipe["preset"])
        flags.update(recipe_flags(recipe))
    budget = store_atom_budget(args.data)
    if budget is not None and not args.config and not any(s.startswith("data.max_atoms=") for s in args.set):
        flags["data.max_atoms"] = budget
    return flags


def run(args: argparse.Namespace) -> int:
    """Run ``train`` with parsed ``args`` (in this process, or in ``--nproc`` processes, after
    checking what can be checked before they start)."""
    config = apply_threads(resolve_run_config(args.config, args.set, {**store_flags(args), **explicit_train_flags(args)}))
    if not RunPlan.from_config(config).single:  # what Ctrl-C says (cli.interrupted_message): these cannot resume
        args.interrupted_hint = "an ensemble or a cross-validation cannot resume: rerun the same command with --overwrite"
    distributed = DistributedConfig(args.backend, args.dist_timeout)
    if args.nproc != 1:
        check_run(config, args.out, args.overwrite, args.resume, processes=args.nproc)
        return launch_local(args.nproc, without_option(args.argv, "--nproc"))
    result = train_from_config(config, args.out, overwrite=args.overwrite, resume=args.resume, distributed=distributed)
    if result is not None:  # the main process reports
        print_run(result, config, Path(args.out))
    return 0
