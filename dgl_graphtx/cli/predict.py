"""``dgl-graphtx predict``: predictions for SMILES given as arguments or in a CSV."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from ..atomic_io import atomic_to_csv, check_writable
from ..datasets import read_molecule_csv, smiles_column
from ..errors import GraphTxError
from ..predict import Predictor
from .common import bounded, device_option, print_table


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command to ``sub``."""
    predict = sub.add_parser("predict", help="predict SMILES with a checkpoint", description="Predict from SMILES given as arguments or in a CSV; invalid SMILES get NaN and an error message.")
    predict.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    predict.add_argument("--checkpoint", required=True, help="checkpoint written by 'train' (best.pt)")
    predict.add_argument("--input", help="CSV with a SMILES column")
    predict.add_argument("--smiles-col", default="smiles")
    predict.add_argument("--output", help="write the table to this CSV (default: print it)")
    predict.add_argument("--device", type=device_option, default="auto")
    predict.add_argument("--batch-size", type=bounded(int, 1), default=256)
    predict.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``predict`` with parsed ``args``."""
    if bool(args.smiles) == bool(args.input):
        raise GraphTxError("give SMILES as arguments or a CSV with --input (not both)")
    if args.output:
        check_writable(args.output)  # before any featurization
    smiles: Sequence[str] = args.smiles
    if args.input:
        frame = read_molecule_csv(args.input, args.smiles_col)
        smiles = smiles_column(frame, args.smiles_col)
    table = Predictor(args.checkpoint, device=args.device, batch_size=args.batch_size).predict(smiles)
    if args.output:
        atomic_to_csv(table, args.output, index=False)
        print(f"wrote {len(table)} predictions ({int(table['error'].notna().sum())} invalid) to {args.output}")
    else:
        print_table(table)
    return 0
