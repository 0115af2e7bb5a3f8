"""``dgl-graphtx predict``: predictions for SMILES given as arguments or in a molecule file."""
from __future__ import annotations

import argparse
import sys

from ..atomic_io import ProgressiveCSV
from ..datasets import read_molecules
from ..ensemble import checkpoints_in, ensemble_predict
from ..errors import GraphTxError
from ..featurize import SizeLimits
from ..predict import Predictor
from .common import add_input_options, add_logging_options, bounded, device_option, print_table, verbosity


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
    predict.add_argument("--device", type=device_option, default="auto")
    predict.add_argument("--batch-size", type=bounded(int, 1), default=256, help="most molecules per forward pass (default: 256)")
    predict.add_argument("--batch-edges", type=bounded(int, 1), default=2_000_000,
                         help="most relation-graph edges per forward pass, bounding its memory (default: 2,000,000)")
    predict.add_argument("--max-atoms", type=bounded(int, 1), default=SizeLimits.max_atoms,
                         help=f"molecules with more atoms get NaN and an error (default: {SizeLimits.max_atoms})")
    predict.add_argument("--max-relation-edges", type=bounded(int, 1), default=SizeLimits.max_relation_edges,
                         help=f"molecules with more relation-graph edges get NaN and an error (default: {SizeLimits.max_relation_edges})")
    predict.add_argument("--chunk-size", type=bounded(int, 1), default=4096,
                         help="molecules featurized and written per step; memory does not grow with the input (default: 4096)")
    predict.add_argument("--resume", action="store_true", help="continue an --output left as .partial by an interrupted run")
    predict.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_logging_options(predict)
    predict.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``predict`` with parsed ``args``."""
    if bool(args.smiles) == bool(args.input):
        raise GraphTxError("give SMILES as arguments or a molecule file with --input (not both)")
    if args.resume and not args.output:
        raise GraphTxError("--resume continues an --output file; give --output")
    writer = ProgressiveCSV(args.output, resume=args.resume) if args.output else None  # checked before any work
    limits = SizeLimits(max_atoms=args.max_atoms, max_relation_edges=args.max_relation_edges)
    paths = [path for given in args.checkpoint for path in checkpoints_in(given)]
    predictors = [Predictor(path, device=args.device, batch_size=args.batch_size, limits=limits,
                            batch_edges=args.batch_edges, chunk_size=args.chunk_size) for path in paths]
    if args.input:
        table = read_molecules(args.input, args.smiles_col or "smiles", args.delimiter,
                               explicit_hydrogens=predictors[0].meta.featurizer.explicit_hydrogens)
        molecules, identifiers, features = table.molecules, table.identifiers, table.columns
    else:
        molecules, identifiers, features = list(args.smiles), None, None
    show = verbosity(args) >= 0 and not args.no_progress and bool(args.input) and sys.stderr.isatty()
    if len(predictors) > 1:
        if args.resume:
            raise GraphTxError("--resume works with one checkpoint; an ensemble's predictions are written at once")
        result = ensemble_predict(predictors, molecules, progress=show, identifiers=identifiers, features=features)
        if writer is None:
            print_table(result)
            return 0
        writer.append(result)
        writer.finish()
        print(f"wrote {len(result)} ensemble predictions ({int(result['error'].notna().sum())} invalid) to {args.output}")
        return 0
    predictor = predictors[0]
    if writer is None:
        print_table(predictor.predict(molecules, progress=show, identifiers=identifiers, features=features))
        return 0
    if writer.rows_done > len(molecules):
        raise GraphTxError(f"{writer.partial} holds {writer.rows_done} rows but the input has {len(molecules)}; "
                           "it is from another input: delete it or drop --resume")
    start, invalid, unusual = writer.rows_done, 0, 0
    rest = identifiers[start:] if identifiers is not None else None
    rest_features = features.iloc[start:] if features is not None else None
    for table in predictor.predict_chunks(molecules[start:], progress=show, identifiers=rest, features=rest_features):
        writer.append(table)
        invalid += int(table["error"].notna().sum())
        unusual += int(table["warning"].notna().sum())
    writer.finish()
    resumed = f"; resumed after {start} rows already written" if start else ""
    print(f"wrote {writer.rows_done} predictions ({invalid} invalid, {unusual} outside the training domain{resumed}) to {args.output}")
    return 0
