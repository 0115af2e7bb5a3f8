"""``dgl-graphtx embed``: the learned molecule representations (and atom states) of a checkpoint."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic_io import check_not_input
from ..errors import GraphTxError
from ..inference.predictor import BATCH_SIZE, Embeddings
from ..inference.table_output import TABLE_FORMATS, table_format, write_table
from .common import add_device_option, add_input_options, add_logging_options, add_threads_option, bounded, verbosity
from .molecule_io import add_carry_options, add_checkpoint_option, carried_columns, check_smiles_arguments, load_predictors, read_input

FORMATS = TABLE_FORMATS + (".npy",)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``embed`` sub-command to ``sub``."""
    embed = sub.add_parser(
        "embed", help="molecule embeddings (the pooled representation the head reads) from a checkpoint",
        description="Write one vector per molecule: CSV/TSV (carried ids, smiles, canonical_smiles, error, e0..e{d-1}), "
                    "NPY ([M, d], NaN rows for invalid molecules) or Parquet (needs dgl_graphtx[parquet]); optionally "
                    "the final atom states as NPZ.",
    )
    embed.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    add_checkpoint_option(embed, ensembles=False, pretrained=True)
    embed.add_argument("--input", help="molecule file: CSV/TSV with a SMILES column, SDF, .smi or .xyz")
    add_input_options(embed)
    add_carry_options(embed)
    embed.add_argument("--output", required=True, help="output file: .csv, .tsv, .npy or .parquet")
    embed.add_argument("--atoms", help="also write per-atom states to this .npz (array 'mol_<row>' per valid molecule)")
    add_device_option(embed)
    add_threads_option(embed)
    embed.add_argument("--batch-size", type=bounded(int, 1), default=BATCH_SIZE,
                       help=f"most molecules per forward pass (default: {BATCH_SIZE})")
    add_logging_options(embed)
    embed.set_defaults(func=run)


def embeddings_frame(embeddings: Embeddings) -> pd.DataFrame:
    """The embedding table (carried columns, ``smiles``, ``canonical_smiles``, ``error``) and one
    column ``e<k>`` per embedding dimension.

    Example:
        >>> emb = Embeddings(pd.DataFrame({"smiles": ["C"], "error": [None]}), np.ones((1, 2), np.float32), None)
        >>> list(embeddings_frame(emb).columns)
        ['smiles', 'error', 'e0', 'e1']
    """
    values = pd.DataFrame(embeddings.molecules, columns=[f"e{k}" for k in range(embeddings.molecules.shape[1])])
    return pd.concat([embeddings.table.reset_index(drop=True), values], axis=1)


def run(args: argparse.Namespace) -> int:
    """Run ``embed`` with parsed ``args``."""
    if bool(args.smiles) == bool(args.input):
        raise GraphTxError("give SMILES as arguments or a molecule file with --input (not both)")
    check_smiles_arguments(args.smiles)
    output = Path(args.output)
    table_format(output, FORMATS)
    check_not_input(output, args.input)
    check_not_input(args.atoms, args.input, "--atoms")
    if args.atoms and Path(args.atoms).suffix.lower() != ".npz":
        raise GraphTxError(f"--atoms must name a .npz file, got {args.atoms}")
    predictor = load_predictors(args, "embed", pretrained=True, batch_size=args.batch_size)[0]
    table = read_input(args, args.input, predictor) if args.input else None
    molecules, identifiers = (table.molecules, table.identifiers) if table is not None else (args.smiles, None)
    embeddings = predictor.embed(molecules, atoms=bool(args.atoms), progress=verbosity(args) >= 0 and sys.stderr.isatty(),
                                 identifiers=identifiers,
                                 carried=carried_columns(args, table))
    if output.suffix.lower() == ".npy":
        output.parent.mkdir(parents=True, exist_ok=True)
        np.save(output, embeddings.molecules)
    else:
        write_table(embeddings_frame(embeddings), output)
    if args.atoms:
        states = {f"mol_{row}": a for row, a in enumerate(embeddings.atoms or []) if a is not None}
        Path(args.atoms).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.atoms, **states)  # type: ignore[arg-type]  # numpy's stub fears **states holds its allow_pickle flag; the keys are mol_<row>
    invalid = int(embeddings.table["error"].notna().sum())
    print(f"wrote {len(embeddings.table)} embeddings of size {embeddings.molecules.shape[1]} ({invalid} invalid) to {output}")
    return 0
