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

from ..atomic_io import check_not_input, check_writable
from ..checksums import file_sha256
from ..datasets import MoleculeTable
from ..datasets.molecule_columns import MoleculeColumns
from ..datasets.readers import check_file
from ..errors import ConfigError
from ..featurize import SizeLimits
from ..progressive_csv import ProgressiveCSV
from .checkpoint_paths import resolve_checkpoints
from .cross_conformal import stored_cv_plus
from .ensemble import ensemble_chunks, stored_calibration
from .level_outputs import write_level_sdf
from .prediction_shards import clear_other_parts, shard_path, shard_rows, shard_source
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
        molecule_columns: the columns holding each row's molecules and mixture weights (a model of
            several molecules per row; default: those it was trained with).
        output: the table's file (``.csv``, ``.tsv`` or ``.parquet``); ``None``: the table is returned.
            A model with atom- or bond-level targets also writes ``<output>_atoms`` and
            ``<output>_bonds`` beside it (long tables, same format).
        sdf_output: an ``.sdf`` file of the predicted molecules with the predictions as SD properties
            (atom and bond values as ``atom.dprop`` / ``bond.dprop`` lists).
        resume: continue the ``.partial`` an interrupted run into ``output`` left (``.csv`` / ``.tsv``).
        shard: ``(index, count)``: predict only shard ``index`` of ``count`` contiguous shards of the
            input's rows, into its part beside ``output`` (one process of several, see
            :mod:`~dgl_graphtx.inference.prediction_shards`, which joins the parts).
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
    molecule_columns: Optional[MoleculeColumns] = None
    output: Optional[PathLike] = None
    sdf_output: Optional[PathLike] = None
    resume: bool = False
    predictor: Mapping[str, Any] = field(default_factory=dict)
    progress: bool = False
    shard: Optional[Tuple[int, int]] = None

    def __post_init__(self) -> None:
        if bool(self.smiles) == (self.input is not None):
            raise ConfigError("give SMILES as arguments or a molecule file with --input (not both)")
        if self.input is None and (self.id_col or self.keep_cols):
            raise ConfigError("--id-col / --keep-cols name columns of an --input file; SMILES arguments have none")
        if self.resume and self.output is None:
            raise ConfigError("--resume continues an --output file; give --output")
        if self.output is not None and not self.streamed and self.resume:
            raise ConfigError("--resume continues a .csv/.tsv --output; a .parquet file is written at once")
        if self.sdf_output is not None and self.resume:
            raise ConfigError("--resume continues a .csv/.tsv --output; an --sdf-output is written at once: run without --resume")
        if self.shard is not None and not (self.streamed and self.sdf_output is None):
            raise ConfigError("several processes write their rows into one .csv/.tsv --output: give --output FILE.csv "
                              "(without --sdf-output), or predict in one process")
        if self.output is not None:
            table_format(self.output)  # a known suffix; Parquet needs pyarrow (what a split or resumed run cannot use is said above)
        check_not_input(self.output, self.input)
        check_not_input(self.sdf_output, self.input, "--sdf-output")

    @property
    def streamed(self) -> bool:
        """Whether the rows go to the output chunk by chunk (a ``.csv`` / ``.tsv`` output)."""
        return self.output is not None and Path(self.output).suffix.lower() != ".parquet"

    @property
    def written(self) -> Optional[Path]:
        """The file the rows are streamed to: ``output``, or the part of a ``shard``."""
        if self.output is None or not self.streamed:
            return None
        return Path(self.output) if self.shard is None else shard_path(self.output, *self.shard)

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
        columns = {} if self.molecule_columns is None else {"molecule_columns": self.molecule_columns.to_dict()}
        found = {"input": digest, "checkpoint": [file_sha256(p) for p in checkpoints], "smiles_col": self.smiles_col,
                 "delimiter": self.delimiter, "id_col": self.id_col, "keep_cols": list(self.keep_cols), **options, **columns}
        return found if self.shard is None else shard_source(found, *self.shard)


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
        levels: a model with atom- or bond-level targets: the long ``atom`` and ``bond`` tables
            when there is no ``output``.
        side_files: the other files written (the atom and bond tables, the SDF).
    """

    rows: int
    invalid: int
    outside_domain: int
    models: int
    resumed_after: int = 0
    output: Optional[Path] = None
    table: Optional[pd.DataFrame] = None
    levels: Dict[str, pd.DataFrame] = field(default_factory=dict)
    side_files: List[Path] = field(default_factory=list)

    def describe(self) -> str:
        """One line for the user.

        Example:
            >>> PredictionSummary(5, 2, 0, 1, output=Path("p.csv")).describe()
            'wrote 5 predictions (2 invalid, 0 outside the training domain) to p.csv'
            >>> PredictionSummary(5, 1, 0, 1, resumed_after=3, output=Path("p.csv")).describe()  # doctest: +NORMALIZE_WHITESPACE
            'wrote 5 predictions (1 invalid, 0 outside the training domain among the 2 predicted now;
             resumed after 3 rows already written) to p.csv'
        """
        kind = "ensemble predictions" if self.models > 1 else "predictions"
        resumed = (f" among the {self.rows - self.resumed_after} predicted now; resumed after {self.resumed_after} rows "
                   "already written" if self.resumed_after else "")
        side = f"; also {', '.join(str(p) for p in self.side_files)}" if self.side_files else ""
        return (f"wrote {self.rows} {kind} ({self.invalid} invalid, {self.outside_domain} outside the training domain"
                f"{resumed}) to {self.output}{side}")


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
    if job.written is not None:
        assert job.output is not None, "rows are streamed to the output or beside it"
        clear_other_parts(job.output, job.shard[1] if job.shard is not None else 1, job.resume)
        writer = ProgressiveCSV(job.written, resume=job.resume, sep=table_separator(job.written), source=job.source(paths))
    elif job.output is not None:
        check_writable(job.output)
    try:
        return _predict(job, paths, writer)
    except BaseException:  # the rows written stay for --resume, the writer's lock goes
        if writer is not None:
            writer.close()
        raise


def _predict(job: PredictionJob, paths: Sequence[Path], writer: Optional[ProgressiveCSV]) -> PredictionSummary:
    """:func:`run_prediction` once its output is checked: the models loaded, the rows predicted
    and written (streamed by ``writer``, else at once)."""
    predictors = [Predictor(path, molecule_columns=job.molecule_columns, **job.predictor) for path in paths]
    first = predictors[0]
    if first.model.levels is not None:
        if writer is not None:
            writer.close()
        return _predict_levels(predictors, job)
    for classes in first.class_labels:
        logger.info("%s is the probability of class %r (%r is 0)", classes.target, classes.positive, classes.negative)
    table = read_input(first, job)
    total = len(table.molecules) if table is not None else len(job.smiles)
    first_row, stop = (0, total) if job.shard is None else shard_rows(total, *job.shard)
    done_before = writer.rows_done if writer is not None else 0
    chunks = _chunks(predictors, job, table, first_row + done_before, stop)
    if job.sdf_output is not None:
        chunks = _with_sdf(first, job, table, chunks)
    if writer is None:
        whole = pd.concat(list(chunks), ignore_index=True)
        invalid, unusual = _counts(whole)
        hint_if_nothing_read(job, len(whole), invalid)
        if job.output is None:
            return PredictionSummary(len(whole), invalid, unusual, models=len(predictors), table=whole)
        return PredictionSummary(len(whole), invalid, unusual, models=len(predictors), output=write_table(whole, job.output))
    invalid = unusual = 0
    for chunk in chunks:
        writer.append(chunk)
        bad, odd = _counts(chunk)
        invalid, unusual = invalid + bad, unusual + odd
    if job.shard is not None:  # a shard's part waits to be joined (the hint is the whole job's, after it)
        writer.close()
        return PredictionSummary(writer.rows_done, invalid, unusual, len(predictors), done_before, writer.partial)
    hint_if_nothing_read(job, writer.rows_done - done_before, invalid)
    written = Path(writer.finish())
    return PredictionSummary(writer.rows_done, invalid, unusual, len(predictors), done_before, written)


def hint_if_nothing_read(job: PredictionJob, rows: int, invalid: int) -> None:
    """A warning when not one of the ``rows`` molecules of a file could be read: most likely the
    SMILES are in another column than ``--smiles-col`` names."""
    if job.input is not None and rows > 1 and invalid == rows and job.molecule_columns is None:
        logger.warning("not one of the %d molecules of %s could be read (each row's error says why): is %r the column of "
                       "SMILES? (--smiles-col)", rows, job.input, job.smiles_col)


def read_input(predictor: Predictor, job: PredictionJob) -> Optional[MoleculeTable]:
    """The molecules of ``job.input`` as ``predictor``'s model reads them (``None`` for SMILES
    given as arguments, which a model of several molecules per row refuses)."""
    if job.input is None:
        count = predictor.model.config.molecules.count
        if count > 1:
            raise ConfigError(f"this model reads {count} molecules per row ({', '.join(predictor.molecule_columns.names)}): give "
                              "them in the columns of an --input file, not as SMILES arguments")
        return None
    return predictor.read_file(job.input, job.smiles_col, job.delimiter)


def _predict_levels(predictors: List[Predictor], job: PredictionJob) -> PredictionSummary:
    """A model with atom- or bond-level targets: its table, and the long atom and bond tables
    beside ``job.output`` (``<output>_atoms``, ``<output>_bonds``), or returned; written at once."""
    if len(predictors) > 1 or job.resume or job.shard is not None:
        raise ConfigError("atom- and bond-level predictions come from one model in one process, written at once: give one "
                          "checkpoint, without --resume or --nproc")
    predictor, table = predictors[0], read_input(predictors[0], job)
    molecules = table.molecules if table is not None else list(job.smiles)
    carried = table.carried_columns(job.id_col, job.keep_cols) if table is not None else None
    found = predictor.predict_atoms(molecules, job.progress, table.identifiers if table is not None else None, carried,
                                    table.columns if table is not None else None)
    invalid, unusual = _counts(found.table)
    levels = {level: frame for level, frame in (("atom", found.atoms), ("bond", found.bonds)) if level_targets_of(predictor, level)}
    side = [write_level_sdf(job.sdf_output, found.table, molecules, predictor.level_targets, predictor.meta.featurizer,
                            predictor.target_names)] if job.sdf_output is not None else []
    if job.output is None:
        return PredictionSummary(len(found.table), invalid, unusual, 1, table=found.table, levels=levels, side_files=side)
    side = [write_table(frame, beside(job.output, level)) for level, frame in levels.items()] + side
    return PredictionSummary(len(found.table), invalid, unusual, 1, output=write_table(found.table, job.output), side_files=side)


def level_targets_of(predictor: Predictor, level: str) -> bool:
    """Whether ``predictor``'s model has targets at ``level`` (``atom`` or ``bond``)."""
    spec = predictor.level_targets
    return bool(spec.atom_targets if level == "atom" else spec.bond_targets)


def beside(output: PathLike, level: str) -> Path:
    """The file of a level's long table beside the prediction table ``output``.

    Example:
        >>> beside("out/p.csv", "atom").as_posix()
        'out/p_atoms.csv'
    """
    path = Path(output)
    return path.with_name(f"{path.stem}_{level}s{path.suffix}")


def _with_sdf(predictor: Predictor, job: PredictionJob, table: Optional[MoleculeTable],
              chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """``chunks`` passed on, their molecules written to ``job.sdf_output`` with their predictions once all are done."""
    molecules = table.molecules if table is not None else list(job.smiles)
    assert job.sdf_output is not None, "chunks pass through here to be written to an SDF"
    seen = []
    for chunk in chunks:
        seen.append(chunk)
        yield chunk
    write_level_sdf(job.sdf_output, pd.concat(seen, ignore_index=True), molecules, predictor.level_targets, predictor.meta.featurizer,
                    predictor.target_names)


def _counts(table: pd.DataFrame) -> Tuple[int, int]:
    """Rows with an ``error``, and rows with a ``warning`` (outside the training domain)."""
    return int(table["error"].notna().sum()), int(table["warning"].notna().sum())


def _chunks(predictors: List[Predictor], job: PredictionJob, table: Optional[MoleculeTable], start: int,
            stop: int) -> Iterator[pd.DataFrame]:
    """The tables of the input's rows ``start`` to ``stop``, one chunk at a time (one empty table
    with every column when there is no row left)."""
    molecules = table.molecules if table is not None else list(job.smiles)
    identifiers = table.identifiers[start:stop] if table is not None else None
    carried = table.carried_columns(job.id_col, job.keep_cols) if table is not None else None
    features = table.columns.iloc[start:stop].reset_index(drop=True) if table is not None else None
    rest = molecules[start:stop]
    if len(predictors) > 1:
        calibration, cv_plus = stored_calibration(job.checkpoints), stored_cv_plus(job.checkpoints)
        done = start
        for chunk in ensemble_chunks(predictors, rest, job.progress, identifiers, calibration, features, cv_plus):
            yield with_carried_columns(chunk, carried, done)
            done += len(chunk)
        return
    remaining = carried.iloc[start:stop].reset_index(drop=True) if carried is not None else None
    if not rest:
        yield predictors[0].predict([], carried=remaining)
        return
    yield from predictors[0].predict_chunks(rest, job.progress, identifiers, remaining, features)
