"""A prediction run as ``dgl-graphtx predict`` makes it: checkpoints (one model, or an ensemble's
finished members, averaged) and molecules (a file or SMILES) in; a table out, returned or written
to a file chunk by chunk.

A ``.csv`` / ``.tsv`` output streams through :class:`~dgl_graphtx.progressive_csv.ProgressiveCSV`:
memory holds one chunk, and ``resume`` continues the ``.partial`` an interrupted run left, after
checking that it was made from the same input (SHA-256 of the file, or of the SMILES), the same
checkpoints (SHA-256 of each file) and the same settings that shape its rows; a ``.parquet``
output is written at once. An input without molecules gives a table of its header only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from ..atomic_io import check_writable
from ..checksums import file_sha256
from ..datasets import MoleculeTable, read_molecules
from ..datasets.readers import check_file
from ..errors import ConfigError
from ..featurize import SizeLimits
from ..progressive_csv import ProgressiveCSV
from .checkpoint_paths import resolve_checkpoints
from .cross_conformal import stored_cv_plus
from .ensemble import ensemble_chunks, stored_calibration
from .predictor import Predictor, with_carried_columns
from .table_output import table_format, table_separator, write_table

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
#: Predictor options that change the values or columns of the rows (recorded for a resume).
ROW_SHAPING_OPTIONS = ("uncertainty", "mc_samples", "limits", "explain")


@dataclass(frozen=True)
class PredictionJob:
    """What to predict, with what, and where to.

    Attributes:
        checkpoints: checkpoint files, run folders or ensemble folders (see
            :func:`~dgl_graphtx.inference.checkpoint_paths.resolve_checkpoints`); several models
            are averaged, with a ``<target>_std`` column each.
        smiles: SMILES to predict, or
        input: a molecule file (CSV/TSV, SDF, ``.smi``; gzipped too).
        smiles_col, delimiter: how to read a table.
        id_col, keep_cols: input columns copied to every output row.
        output: the table's file (``.csv``, ``.tsv`` or ``.parquet``); ``None``: the table is returned.
        resume: continue the ``.partial`` an interrupted run into ``output`` left (``.csv`` / ``.tsv``).
        predictor: options of every :class:`~dgl_graphtx.inference.Predictor` (``device``,
            ``batch_size``, ``limits``, ``chunk_size``, ``uncertainty``...).
        progress: show a progress bar.

    Example:
        >>> PredictionJob(["best.pt"], smiles=["CCO"], resume=True)
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: --resume continues an --output file; give --output
    """

    checkpoints: Sequence[PathLike]
    smiles: Sequence[str] = ()
    input: Optional[PathLike] = None
    smiles_col: str = "smiles"
    delimiter: Optional[str] = None
    id_col: Optional[str] = None
    keep_cols: Sequence[str] = ()
    output: Optional[PathLike] = None
    resume: bool = False
    predictor: Mapping[str, Any] = field(default_factory=dict)
    progress: bool = False

    def __post_init__(self) -> None:
        if bool(self.smiles) == (self.input is not None):
            raise ConfigError("give SMILES as arguments or a molecule file with --input (not both)")
        if self.input is None and (self.id_col or self.keep_cols):
            raise ConfigError("--id-col / --keep-cols name columns of an --input file; SMILES arguments have none")
        if self.resume and self.output is None:
            raise ConfigError("--resume continues an --output file; give --output")
        if self.output is not None and table_format(self.output) == ".parquet" and self.resume:
            raise ConfigError("--resume continues a .csv/.tsv --output; a .parquet file is written at once")

    @property
    def streamed(self) -> bool:
        """Whether the rows go to the output chunk by chunk (a ``.csv`` / ``.tsv`` output)."""
        return self.output is not None and table_format(self.output) != ".parquet"

    def source(self, checkpoints: Sequence[Path]) -> Dict[str, Any]:
        """What the rows are made from, as recorded beside a streamed output: the input's and
        the checkpoints' SHA-256 and the settings that shape the rows."""
        digest = (file_sha256(check_file(self.input, "molecule")) if self.input is not None
                  else hashlib.sha256(json.dumps(list(self.smiles)).encode()).hexdigest())
        options = {k: self.predictor.get(k) for k in ROW_SHAPING_OPTIONS}
        limits = options.get("limits") or SizeLimits()
        options["limits"] = dataclasses.asdict(limits) if isinstance(limits, SizeLimits) else limits
        explain = options.get("explain")  # ExplainSettings or None
        options["explain"] = None if explain is None else dataclasses.asdict(explain)
        return {"input": digest, "checkpoint": [file_sha256(p) for p in checkpoints], "smiles_col": self.smiles_col,
                "delimiter": self.delimiter, "id_col": self.id_col, "keep_cols": list(self.keep_cols), **options}


@dataclass
class PredictionSummary:
    """What :func:`run_prediction` did.

    Attributes:
        rows: rows of the output (those of an earlier run continued included).
        invalid, outside_domain: rows predicted now with an ``error`` / a ``warning``.
        models: the number of models averaged.
        resumed_after: rows an interrupted run had written before.
        output: the file written, or ``None``.
        table: the whole table when there is no ``output``.
    """

    rows: int
    invalid: int
    outside_domain: int
    models: int
    resumed_after: int = 0
    output: Optional[Path] = None
    table: Optional[pd.DataFrame] = None

    def describe(self) -> str:
        """One line for the user.

        Example:
            >>> PredictionSummary(5, 2, 0, 1, output=Path("p.csv")).describe()
            'wrote 5 predictions (2 invalid, 0 outside the training domain) to p.csv'
        """
        kind = "ensemble predictions" if self.models > 1 else "predictions"
        resumed = f"; resumed after {self.resumed_after} rows already written" if self.resumed_after else ""
        return (f"wrote {self.rows} {kind} ({self.invalid} invalid, {self.outside_domain} outside the training domain"
                f"{resumed}) to {self.output}")


def run_prediction(job: PredictionJob) -> PredictionSummary:
    """Predict what ``job`` names: the output is checked, and a resumed ``.partial`` compared with
    the input and checkpoints, before any model is loaded or molecule read.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> folder = Path(tempfile.mkdtemp())
        >>> path = save_checkpoint(folder / "best.pt", build_model(p.model), CheckpointMeta(p.featurizer, p.relation, ["y"]))
        >>> run_prediction(PredictionJob([path], smiles=["CCO", "C1CC"], output=folder / "p.csv")).describe()  # doctest: +ELLIPSIS
        'wrote 2 predictions (1 invalid, 0 outside the training domain) to .../p.csv'
    """
    paths = resolve_checkpoints(job.checkpoints)
    if job.predictor.get("explain") is not None and len(paths) > 1:
        raise ConfigError(f"--explain explains one model; {len(paths)} checkpoints were given (an ensemble): give one")
    writer = None
    if job.output is not None and job.streamed:
        writer = ProgressiveCSV(job.output, resume=job.resume, sep=table_separator(job.output), source=job.source(paths))
    elif job.output is not None:
        check_writable(job.output)
    predictors = [Predictor(path, **job.predictor) for path in paths]
    for classes in predictors[0].class_labels:
        logger.info("%s is the probability of class %r (%r is 0)", classes.target, classes.positive, classes.negative)
    table = read_molecules(job.input, job.smiles_col, job.delimiter, predictors[0].meta.featurizer) if job.input is not None else None
    start = writer.rows_done if writer is not None else 0
    chunks = _chunks(predictors, job, table, start)
    if writer is None:
        whole = pd.concat(list(chunks), ignore_index=True)
        invalid, unusual = _counts(whole)
        if job.output is None:
            return PredictionSummary(len(whole), invalid, unusual, models=len(predictors), table=whole)
        return PredictionSummary(len(whole), invalid, unusual, models=len(predictors), output=write_table(whole, job.output))
    invalid = unusual = 0
    for chunk in chunks:
        writer.append(chunk)
        bad, odd = _counts(chunk)
        invalid, unusual = invalid + bad, unusual + odd
    return PredictionSummary(writer.rows_done, invalid, unusual, len(predictors), start, Path(writer.finish()))


def _counts(table: pd.DataFrame) -> Tuple[int, int]:
    """Rows with an ``error``, and rows with a ``warning`` (outside the training domain)."""
    return int(table["error"].notna().sum()), int(table["warning"].notna().sum())


def _chunks(predictors: List[Predictor], job: PredictionJob, table: Optional[MoleculeTable], start: int) -> Iterator[pd.DataFrame]:
    """The tables of the input's rows from ``start`` on, one chunk at a time (one empty table with
    every column when there is no row left)."""
    molecules = table.molecules if table is not None else list(job.smiles)
    identifiers = table.identifiers[start:] if table is not None else None
    carried = table.carried_columns(job.id_col, job.keep_cols) if table is not None else None
    features = table.columns.iloc[start:].reset_index(drop=True) if table is not None else None
    rest = molecules[start:]
    if len(predictors) > 1:
        calibration, cv_plus = stored_calibration(job.checkpoints), stored_cv_plus(job.checkpoints)
        done = start
        for chunk in ensemble_chunks(predictors, rest, job.progress, identifiers, calibration, features, cv_plus):
            yield with_carried_columns(chunk, carried, done)
            done += len(chunk)
        return
    remaining = carried.iloc[start:].reset_index(drop=True) if carried is not None else None
    if not rest:
        yield predictors[0].predict([], carried=remaining)
        return
    yield from predictors[0].predict_chunks(rest, job.progress, identifiers, remaining, features)
