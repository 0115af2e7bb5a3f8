"""``dgl-graphtx evaluate``: metrics of a checkpoint (or an ensemble) on a labelled molecule file."""
from __future__ import annotations

import argparse
import json

from ..inference.evaluation import evaluate_table
from ..inference.table_output import table_format, write_table
from .common import add_input_options, add_logging_options, add_threads_option, device_option, verbosity
from .molecule_io import add_carry_options, add_checkpoint_option, carried_columns, load_predictors, read_input


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command to ``sub``."""
    evaluate = sub.add_parser(
        "evaluate", help="metrics of a checkpoint on a labelled file (CSV/TSV, SDF, .smi, .xyz)",
        description="Print the metrics (mean over targets and per target) as JSON; with --output, also one row per "
                    "molecule: carried ids, smiles, canonical_smiles, measured <target>, <target>_pred, error.")
    evaluate.add_argument("data", help="CSV/TSV with the SMILES column and the checkpoint's target columns, or SDF with them as SD properties")
    add_checkpoint_option(evaluate, ensembles=True)
    add_input_options(evaluate)
    add_carry_options(evaluate)
    evaluate.add_argument("--output", help="per-molecule table: .csv, .tsv or .parquet")
    evaluate.add_argument("--device", type=device_option, default="auto")
    add_threads_option(evaluate)
    add_logging_options(evaluate)
    evaluate.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``evaluate`` with parsed ``args``."""
    if args.output:
        table_format(args.output)
    predictors = load_predictors(args)
    data = read_input(args, args.data, predictors[0])
    result = evaluate_table(predictors, data, carried_columns(args, data), progress=verbosity(args) >= 0)
    if args.output:
        write_table(result.rows, args.output)
    print(json.dumps(result.report, indent=2, allow_nan=False))
    return 0
