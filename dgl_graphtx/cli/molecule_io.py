"""Options shared by the commands that read a checkpoint and molecules (``predict``, ``evaluate``,
``embed``, ``plot``): ``--checkpoint`` (a file, a run folder or an ensemble folder) and the
identifier columns carried into their outputs (``--id-col``, ``--keep-cols``)."""
from __future__ import annotations

import argparse
import os
from typing import List, Optional, Sequence

import pandas as pd

from ..datasets import MoleculeTable
from ..datasets.readers import SDF_SUFFIXES, SMI_SUFFIXES, XYZ_SUFFIXES
from ..errors import ConfigError, InvalidMoleculeError
from ..featurize.molecule import parse_smiles
from ..inference.backbones import get_pretrained, is_pretrained_reference
from ..inference.checkpoint_paths import resolve_checkpoints, single_checkpoint
from ..inference.predictor import Predictor
from .common import SMILES_COL, molecule_columns, split_targets

CHECKPOINT_HELP = "checkpoint written by 'train' (best.pt), its run folder, or an ensemble folder (every best.pt below it)"


def add_checkpoint_option(parser: argparse.ArgumentParser, ensembles: bool, pretrained: bool = False,
                          optional: str = "") -> None:
    """``--checkpoint``: a file or a folder; where ``ensembles`` are averaged it may be repeated;
    with ``pretrained`` also a pretrained backbone (a shipped name or a 'pretrain' folder);
    ``optional`` says what the command does without one (the option is then not required)."""
    more = ("; repeat it to combine checkpoints: the ensemble mean, with a <target>_std column" if ensembles
            else "; this command reads one model, so a folder must hold one best.pt")
    if pretrained:
        more += "; or a pretrained model: a name from 'dgl-graphtx pretrained' or a folder written by 'pretrain'"
    parser.add_argument("--checkpoint", required=not optional, action="append", metavar="PATH",
                        help=CHECKPOINT_HELP + more + (f"; without it, {optional}" if optional else ""))


def add_carry_options(parser: argparse.ArgumentParser) -> None:
    """``--id-col`` and ``--keep-cols``: columns copied from the input to every output row."""
    parser.add_argument("--id-col", help="column / SD property identifying each molecule, copied to the output "
                                         "(SDF titles and .smi names are carried as 'name' without it)")
    parser.add_argument("--keep-cols", type=split_targets, default=[], metavar="A,B",
                        help="more input columns / SD properties copied to the output")


#: Endings of the names of molecule files (a SMILES argument ending so that RDKit cannot read is a file name).
FILE_ENDINGS = (".csv", ".tsv", ".txt", ".parquet", ".gz", *SDF_SUFFIXES, *SMI_SUFFIXES, *XYZ_SUFFIXES)


def check_smiles_arguments(smiles: Sequence[str]) -> None:
    """Refuse, in one line, a SMILES argument that is the name of a molecule file (an existing
    file, or a name ending as one does) and not a SMILES RDKit reads: given without ``--input``,
    it was predicted as one invalid molecule.

    Example:
        >>> check_smiles_arguments(["CCO", "c1ccccc1"])
        >>> check_smiles_arguments(["CCO", "data.csv"])
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: 'data.csv' is the name of a molecule file, not a SMILES string: give it with --input data.csv
    """
    for text in smiles:
        if not (os.path.isfile(text) or text.lower().endswith(FILE_ENDINGS)):
            continue
        try:
            parse_smiles(text)
        except InvalidMoleculeError:
            raise ConfigError(f"{text!r} is the name of a molecule file, not a SMILES string: give it with --input {text}") from None


def load_predictors(args: argparse.Namespace, use: Optional[str] = None, pretrained: bool = False, **kwargs) -> List[Predictor]:
    """The predictors of ``args.checkpoint`` (every model of an ensemble; exactly one when ``use``
    names a command that reads one model); with ``pretrained``, a shipped backbone's name or a
    'pretrain' folder (its ``backbone.pt``, hash-checked) is read too."""
    if hasattr(args, "smiles_cols"):  # the commands that read rows of several molecules
        kwargs["molecule_columns"] = molecule_columns(args)
    if pretrained and len(args.checkpoint) == 1 and is_pretrained_reference(args.checkpoint[0]):
        return [Predictor(get_pretrained(args.checkpoint[0]).checkpoint, device=args.device, **kwargs)]
    paths = [single_checkpoint(args.checkpoint, use)] if use else resolve_checkpoints(args.checkpoint)
    return [Predictor(path, device=args.device, **kwargs) for path in paths]


def read_input(args: argparse.Namespace, path: str, predictor: Predictor) -> MoleculeTable:
    """The molecule file ``path``, read as the checkpoint's model reads it (its hydrogen setting,
    its molecules per row) with ``args``'s table options."""
    return predictor.read_file(path, args.smiles_col or SMILES_COL, args.delimiter)


def carried_columns(args: argparse.Namespace, table: Optional[MoleculeTable]) -> Optional[pd.DataFrame]:
    """The columns ``table`` carries into the output (ids, kept columns), or ``None`` for SMILES arguments."""
    if table is None:
        if getattr(args, "id_col", None) or getattr(args, "keep_cols", None):
            raise ConfigError("--id-col / --keep-cols name columns of an --input file; SMILES arguments have none")
        return None
    return table.carried_columns(getattr(args, "id_col", None), getattr(args, "keep_cols", ()) or ())
