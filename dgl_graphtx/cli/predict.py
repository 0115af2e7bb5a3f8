"""``dgl-graphtx predict``: predictions for SMILES given as arguments or in a molecule file."""
from __future__ import annotations

import argparse
import logging
import sys

from ..atomic_io import ProgressiveCSV
from ..errors import GraphTxError
from ..featurize import SizeLimits
from ..inference.ensemble import ensemble_predict, stored_calibration
from ..inference.predictor import BATCH_EDGES, BATCH_SIZE, CHUNK_SIZE, with_carried_columns
from ..inference.table_output import table_format, table_separator, write_table
from ..uncertainty import METHODS, UncertaintyConfig
from .common import add_input_options, add_logging_options, add_threads_option, bounded, device_option, print_table, verbosity
from .molecule_io import add_carry_options, add_checkpoint_option, carried_columns, load_predictors, read_input

logger = logging.getLogger("dgl_graphtx")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command to ``sub``."""
    predict = sub.add_parser("predict", help="predict SMILES with a checkpoint", description="Predict from SMILES given as arguments or in a file (CSV/TSV, SDF, .smi, .xyz, gzipped too); invalid molecules get NaN and an error message.")
    predict.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    add_checkpoint_option(predict, ensembles=True)
    predict.add_argument("--input", help="molecule file: CSV/TSV with a SMILES column, SDF, .smi or .xyz")
    add_input_options(predict)
    add_carry_options(predict)
    predict.add_argument("--output", help="write the table to this file: .csv, .tsv or .parquet (default: print it)")
    predict.add_argument("--device", type=device_option, default="auto")
    add_threads_option(predict)
    predict.add_argument("--batch-size", type=bounded(int, 1), default=BATCH_SIZE, help=f"most molecules per forward pass (default: {BATCH_SIZE})")
    predict.add_argument("--batch-edges", type=bounded(int, 1), default=BATCH_EDGES,
                         help=f"most relation-graph edges per forward pass, bounding its memory (default: {BATCH_EDGES:,})")
    predict.add_argument("--max-atoms", type=bounded(int, 1), default=SizeLimits.max_atoms,
                         help=f"molecules with more atoms get NaN and an error (default: {SizeLimits.max_atoms})")
    predict.add_argument("--max-relation-edges", type=bounded(int, 1), default=SizeLimits.max_relation_edges,
                         help=f"molecules with more relation-graph edges get NaN and an error (default: {SizeLimits.max_relation_edges})")
    predict.add_argument("--chunk-size", type=bounded(int, 1), default=CHUNK_SIZE,
                         help=f"molecules featurized and written per step; memory does not grow with the input (default: {CHUNK_SIZE})")
    predict.add_argument("--uncertainty", choices=[m for m in METHODS if m != "ensemble"], default=None,
                         help="uncertainty method (default: the one the checkpoint was trained with): adds <target>_std, and "
                              "<target>_lo/_hi when the checkpoint holds a calibration for it; mc_dropout works with any model")
    predict.add_argument("--mc-samples", type=bounded(int, 2, 10000), default=None,
                         help=f"stochastic passes of MC dropout (default: the checkpoint's, else {UncertaintyConfig.mc_samples})")
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
    parquet = bool(args.output) and table_format(args.output) == ".parquet"  # checked before any work
    if parquet and args.resume:
        raise GraphTxError("--resume continues a .csv/.tsv --output; a .parquet file is written at once")
    writer = ProgressiveCSV(args.output, resume=args.resume, sep=table_separator(args.output)) if args.output and not parquet else None
    limits = SizeLimits(max_atoms=args.max_atoms, max_relation_edges=args.max_relation_edges)
    predictors = load_predictors(args, batch_size=args.batch_size, limits=limits, batch_edges=args.batch_edges,
                                 chunk_size=args.chunk_size, uncertainty=args.uncertainty, mc_samples=args.mc_samples)
    for classes in predictors[0].class_labels:
        logger.info("%s is the probability of class %r (%r is 0)", classes.target, classes.positive, classes.negative)
    table = read_input(args, args.input, predictors[0]) if args.input else None
    carried = carried_columns(args, table)
    molecules, identifiers = (table.molecules, table.identifiers) if table is not None else (list(args.smiles), None)
    features = table.columns if table is not None else None
    show = verbosity(args) >= 0 and not args.no_progress and bool(args.input) and sys.stderr.isatty()
    if len(predictors) > 1:
        if args.resume:
            raise GraphTxError("--resume works with one checkpoint; an ensemble's predictions are written at once")
        result = with_carried_columns(ensemble_predict(predictors, molecules, progress=show, identifiers=identifiers,
                                                       calibration=stored_calibration(args.checkpoint), features=features),
                                      carried, 0)
        if parquet:
            write_table(result, args.output)
        elif writer is None:
            print_table(result)
            return 0
        else:
            writer.append(result)
            writer.finish()
        print(f"wrote {len(result)} ensemble predictions ({int(result['error'].notna().sum())} invalid) to {args.output}")
        return 0
    predictor = predictors[0]
    if parquet:
        result = write_table(predictor.predict(molecules, progress=show, identifiers=identifiers, carried=carried, features=features),
                             args.output)
        print(f"wrote {len(molecules)} predictions to {result}")
        return 0
    if writer is None:
        print_table(predictor.predict(molecules, progress=show, identifiers=identifiers, carried=carried, features=features))
        return 0
    if writer.rows_done > len(molecules):
        raise GraphTxError(f"{writer.partial} holds {writer.rows_done} rows but the input has {len(molecules)}; "
                           "it is from another input: delete it or drop --resume")
    start, invalid, unusual = writer.rows_done, 0, 0
    rest = identifiers[start:] if identifiers is not None else None
    remaining = carried.iloc[start:].reset_index(drop=True) if carried is not None else None
    rest_features = features.iloc[start:].reset_index(drop=True) if features is not None else None
    for table in predictor.predict_chunks(molecules[start:], progress=show, identifiers=rest, carried=remaining,
                                          features=rest_features):
        writer.append(table)
        invalid += int(table["error"].notna().sum())
        unusual += int(table["warning"].notna().sum())
    writer.finish()
    resumed = f"; resumed after {start} rows already written" if start else ""
    print(f"wrote {writer.rows_done} predictions ({invalid} invalid, {unusual} outside the training domain{resumed}) to {args.output}")
    return 0
