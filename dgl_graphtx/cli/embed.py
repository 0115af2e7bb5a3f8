"""``dgl-graphtx embed``: the learned molecule representations (and atom states) of a checkpoint."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import read_molecules
from ..errors import GraphTxError
from ..predict import Embeddings, Predictor
from ..pretrained import get_pretrained
from .common import add_input_options, add_logging_options, verbosity

FORMATS = (".csv", ".npy", ".parquet")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``embed`` sub-command to ``sub``."""
    embed = sub.add_parser(
        "embed", help="molecule embeddings (the pooled representation the head reads) from a checkpoint",
        description="Write one vector per molecule: CSV (smiles, error, e0..e{d-1}), NPY ([M, d], NaN rows for invalid "
                    "molecules) or Parquet (needs pyarrow); optionally the final atom states as NPZ.",
    )
    embed.add_argument("smiles", nargs="*", help="SMILES strings (or use --input)")
    embed.add_argument("--checkpoint", required=True, help="checkpoint written by 'train' (best.pt), or a pretrained model: "
                                                           "a name from 'dgl-graphtx pretrained' or a folder written by 'pretrain'")
    embed.add_argument("--input", help="molecule file: CSV/TSV with a SMILES column, SDF or .smi")
    add_input_options(embed)
    embed.add_argument("--output", required=True, help="output file: .csv, .npy or .parquet")
    embed.add_argument("--atoms", help="also write per-atom states to this .npz (array 'mol_<row>' per valid molecule)")
    embed.add_argument("--device", default="auto")
    embed.add_argument("--batch-size", type=int, default=256)
    add_logging_options(embed)
    embed.set_defaults(func=run)


def embeddings_frame(embeddings: Embeddings) -> pd.DataFrame:
    """``smiles``, ``error`` and one column ``e<k>`` per embedding dimension.

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
    output = Path(args.output)
    if output.suffix.lower() not in FORMATS:
        raise GraphTxError(f"--output must end in one of {FORMATS}, got {output.name}")
    if args.atoms and Path(args.atoms).suffix.lower() != ".npz":
        raise GraphTxError(f"--atoms must name a .npz file, got {args.atoms}")
    checkpoint = args.checkpoint if Path(args.checkpoint).is_file() else get_pretrained(args.checkpoint).checkpoint
    predictor = Predictor(checkpoint, device=args.device, batch_size=args.batch_size)
    if args.input:
        table = read_molecules(args.input, args.smiles_col or "smiles", args.delimiter,
                               explicit_hydrogens=predictor.meta.featurizer.explicit_hydrogens)
        molecules, identifiers = table.molecules, table.identifiers
    else:
        molecules, identifiers = args.smiles, None
    embeddings = predictor.embed(molecules, atoms=bool(args.atoms), progress=verbosity(args) >= 0, identifiers=identifiers)
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix.lower() == ".npy":
        np.save(output, embeddings.molecules)
    elif output.suffix.lower() == ".csv":
        embeddings_frame(embeddings).to_csv(output, index=False)
    else:
        try:
            embeddings_frame(embeddings).to_parquet(output, index=False)
        except ImportError as err:
            raise GraphTxError(f"writing Parquet needs pyarrow or fastparquet ({err}); or use .csv / .npy") from None
    if args.atoms:
        states = {f"mol_{row}": a for row, a in enumerate(embeddings.atoms or []) if a is not None}
        Path(args.atoms).parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.atoms, **states)
    invalid = int(embeddings.table["error"].notna().sum())
    print(f"wrote {len(embeddings.table)} embeddings of size {embeddings.molecules.shape[1]} ({invalid} invalid) to {output}")
    return 0
