"""``dgl-graphtx evaluate``: metrics of a checkpoint (or an ensemble) on a labelled molecule file."""
from __future__ import annotations

import argparse
import json

from ..atomic_io import check_not_input
from ..errors import ConfigError
from ..inference.evaluation import evaluate_predictions, evaluate_table
from ..inference.table_output import read_table, table_format, write_table
from ..models.settings import TASKS
from .common import add_device_option, add_input_options, add_logging_options, add_row_options, add_threads_option, verbosity
from .molecule_io import add_carry_options, add_checkpoint_option, carried_columns, load_predictors, read_input


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command to ``sub``."""
    evaluate = sub.add_parser(
        "evaluate", help="metrics of a checkpoint on a labelled file (CSV/TSV, SDF, .smi, .xyz), or of saved predictions",
        description="Print the metrics (mean over targets and per target) as JSON; with --output, also one row per "
                    "molecule: carried ids, smiles, canonical_smiles, measured <target>, <target>_pred, error. Without "
                    "--checkpoint, DATA is a table of saved predictions (<target> and <target>_pred columns: "
                    "test_predictions.csv, a cross-validation's oof_predictions.csv), scored as it is, per fold too.")
    evaluate.add_argument("data", help="CSV/TSV with the SMILES column and the checkpoint's target columns, or SDF with them as SD "
                                       "properties; without --checkpoint, a CSV/TSV of saved predictions")
    add_checkpoint_option(evaluate, ensembles=True, optional="DATA is a table of saved predictions")
    evaluate.add_argument("--task", choices=TASKS,
                          help="the task of saved predictions (default: read from the table: multiclass with <target>_prob_<k> "
                               "columns, classification when every label is 0/1 and every prediction in [0, 1])")
    add_input_options(evaluate)
    add_row_options(evaluate)
    add_carry_options(evaluate)
    evaluate.add_argument("--output", help="per-molecule table: .csv, .tsv or .parquet")
    add_device_option(evaluate)
    add_threads_option(evaluate)
    add_logging_options(evaluate)
    evaluate.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``evaluate`` with parsed ``args``."""
    if not args.checkpoint:
        if args.output or args.id_col or args.keep_cols:
            raise ConfigError("--output, --id-col and --keep-cols go with --checkpoint; saved predictions are scored as they are")
        report = evaluate_predictions(read_table(args.data), args.task, args.data)
        print(json.dumps(report, indent=2, allow_nan=False))
        return 0
    if args.task:
        raise ConfigError("--task is read from the checkpoint; it applies to saved predictions (no --checkpoint)")
    if args.output:
        table_format(args.output)
        check_not_input(args.output, args.data)
    predictors = load_predictors(args)
    data = read_input(args, args.data, predictors[0])
    result = evaluate_table(predictors, data, carried_columns(args, data), progress=verbosity(args) >= 0)
    if args.output:
        write_table(result.rows, args.output)
    print(json.dumps(result.report, indent=2, allow_nan=False))
    return 0
