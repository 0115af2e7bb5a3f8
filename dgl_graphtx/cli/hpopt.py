"""``dgl-graphtx hpopt``: hyperparameter search with Optuna; the best trial becomes OUT/config.yaml."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import GraphTxError
from ..models.variants import VARIANT_SPECS
from ..runs.config import apply_threads, resolve_run_config
from ..runs.hpopt.search import PRUNERS, SearchSettings
from ..runs.hpopt.space import COMMON
from ..training.target_metrics import format_metrics
from .common import add_input_options, add_logging_options, add_train_options, explicit_train_flags, field_type, one_of

EPILOG = "searched for every model: " + "; ".join(p.describe() for p in COMMON) + "\n" + "\n".join(
    f"  {variant}: " + ("; ".join(p.describe() for p in spec.search) or "nothing more") for variant, spec in VARIANT_SPECS.items()
) + """

Fields given with --set or a flag (e.g. --batch-size 32) are fixed, not searched. Every trial is an
ordinary run in OUT/trials/trial_<n>/ of the configuration from DATA, --config, --set and the
flags, with the searched fields on top. OUT/config.yaml is the best trial's
configuration: 'dgl-graphtx train --config OUT/config.yaml --out NEW' repeats it. Bound a trial's
length with --epochs (and --patience). See docs/hpopt.md."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``hpopt`` sub-command to ``sub``."""
    parser = sub.add_parser(
        "hpopt", help="hyperparameter search (Optuna: TPE sampler, pruning, resumable, parallel trials)",
        description="Search model and training settings on the validation part; writes trials/, trials.csv, "
                    "best_trial.json and config.yaml (the best trial) to --out. Needs Optuna (dgl_graphtx[hpopt]).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data", nargs="?", help="training data, as for 'train'")
    parser.add_argument("--targets", help="comma-separated target column / SD property names")
    parser.add_argument("--out", required=True, help="output folder of the search")
    add_input_options(parser)
    add_train_options(parser)
    add_logging_options(parser)
    search = parser.add_argument_group("search")
    search.add_argument("--trials", type=field_type(SearchSettings, "trials"), default=SearchSettings.trials,
                        help=f"trials in total, an earlier search's included (default: {SearchSettings.trials})")
    search.add_argument("--timeout", type=field_type(SearchSettings, "timeout"), default=SearchSettings.timeout,
                        help=f"seconds after which no new trial starts (default: {SearchSettings.timeout:g})")
    search.add_argument("--jobs", type=field_type(SearchSettings, "jobs"), default=SearchSettings.jobs,
                        help=f"trials at the same time, one process each (default: {SearchSettings.jobs})")
    search.add_argument("--pruner", type=field_type(SearchSettings, "pruner"), **one_of(PRUNERS), default=SearchSettings.pruner,
                        help=f"stop unpromising trials early on their per-epoch validation metric (default: {SearchSettings.pruner})")
    search.add_argument("--resume", action="store_true", help="continue the search in --out (its hpopt.journal)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``hpopt`` with parsed ``args``."""
    from ..runs.hpopt import hyperparameter_search, search_space

    flags = explicit_train_flags(args)
    config = apply_threads(resolve_run_config(args.config, args.set, flags).with_absolute_paths())
    fixed = set(flags) | {item.split("=", 1)[0].strip() for item in args.set}
    space = [p for p in search_space(config.model.variant) if p.key not in fixed and p.key.split(".")[0] not in fixed]
    if config.data.path is None or not config.data.targets:
        raise GraphTxError("no training data or targets: give DATA and --targets (or data.path / data.targets in --config)")
    out = Path(args.out)
    settings = SearchSettings(trials=args.trials, timeout=args.timeout, jobs=args.jobs, pruner=args.pruner,
                              seed=config.train.seed)
    result = hyperparameter_search(config, out, settings, space=space, resume=args.resume)
    best = result.trials
    finished = best["state"].value_counts().to_dict() if "state" in best else {}
    print(f"{len(best)} trial(s): " + ", ".join(f"{n} {state.lower()}" for state, n in finished.items()))
    print(f"best: trial {result.best_trial}, valid {format_metrics({result.metric: result.best_value})}")
    print(f"configuration: {out / 'config.yaml'} (repeat it: dgl-graphtx train --config {out / 'config.yaml'} --out NEW)")
    return 0
