"""``dgl-graphtx predict``: predictions for SMILES given as arguments or in a molecule file."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..datasets import read_molecules
from ..ensemble import checkpoints_in, ensemble_predict
from ..errors import GraphTxError
from ..predict import Predictor
from .common import add_input_options, add_logging_options, print_table, verbosity


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command to ``sub``."""
    predict = sub.add_parser("predict", help="predict SMILES with a checkpoint", description="Predict from SMILES given as arguments or in a file (CSV/TSV, SDF, .smi, gzipped too); invalid molecules get NaN and an error message.")
    predict.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    predict.add_argument("--checkpoint", required=True, action="append",
                         help="checkpoint written by 'train' (best.pt) or a run folder (all best.pt below it); repeat it or "
                              "give an ensemble's folder to get the ensemble mean and a <target>_std column")
    predict.add_argument("--input", help="molecule file: CSV/TSV with a SMILES column, SDF or .smi")
    add_input_options(predict)
    predict.add_argument("--output", help="write the table to this CSV (default: print it)")
    predict.add_argument("--device", default="auto")
    predict.add_argument("--batch-size", type=int, default=256)
    add_logging_options(predict)
    predict.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``predict`` with parsed ``args``."""
    if bool(args.smiles) == bool(args.input):
        raise GraphTxError("give SMILES as arguments or a molecule file with --input (not both)")
    paths = [path for given in args.checkpoint for path in checkpoints_in(given)]
    predictors = [Predictor(path, device=args.device, batch_size=args.batch_size) for path in paths]
    if args.input:
        table = read_molecules(args.input, args.smiles_col or "smiles", args.delimiter,
                               explicit_hydrogens=predictors[0].meta.featurizer.explicit_hydrogens)
        molecules, identifiers = table.molecules, table.identifiers
    else:
        molecules, identifiers = args.smiles, None
    if len(predictors) == 1:
        result = predictors[0].predict(molecules, progress=verbosity(args) >= 0 and bool(args.input), identifiers=identifiers)
    else:
        result = ensemble_predict(predictors, molecules, progress=verbosity(args) >= 0 and bool(args.input), identifiers=identifiers)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        result.to_csv(args.output, index=False)
        print(f"wrote {len(result)} predictions ({int(result['error'].notna().sum())} invalid) to {args.output}")
    else:
        print_table(result)
    return 0
