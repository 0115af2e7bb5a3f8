"""A dataset of featurized molecules with (possibly missing) targets, built from SMILES, CSV or SDF."""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import sys
from pathlib import Path
from collections.abc import Mapping, Sequence as SequenceABC
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import dgllife
import numpy as np
import ogb
import pandas as pd
import rdkit
import torch
from rdkit import Chem
from torch.utils.data import Dataset
import dgl

from .._version import __version__
from ..checksums import file_sha256
from ..errors import ConfigError, InvalidMoleculeError
from ..featurize import FeaturizerConfig, MoleculeFeaturizer, SizeLimits, describe_molecule
from ..featurize.components import ROW_MOLECULE
from ..featurize.molecule import MoleculeLike
from ..relation_graph import RelationConfig
from .class_labels import ClassLabels
from .cache import cache_path, load_cached, save_cached
from .collate import MoleculeBatch, Sample, labels_and_mask
from .extra_features import ExtraFeatureValues
from .featurized import featurize_and_pack
from .float32_range import FLOAT32_MAX
from .level_targets import LevelTargets
from .molecule_columns import MoleculeColumns
from .packed import Indices, PackedGraphs
from .readers import MoleculeTable, check_unique, read_molecules, smiles_column
from .report import LABEL_MASKED, InputReport, RowIssue, show_value

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]

def coerce_targets(
    targets: Any, names: Optional[Sequence[str]], ids: Sequence[str], report: InputReport
) -> Tuple[np.ndarray, List[str]]:
    """Targets as float64 ``[R, T]`` with NaN where missing, and their names.

    Blank and NaN cells are missing labels; non-numeric or infinite cells, and finite values
    beyond float32's range (they would become ``inf`` in the float32 label tensor), are masked
    too, and reported as :data:`LABEL_MASKED` issues.

    Example:
        >>> report = InputReport(2)
        >>> coerce_targets(pd.DataFrame({"y": ["1.5", "1e308"]}), None, ["CCO", "CCN"], report)[0].tolist()
        [[1.5], [nan]]
        >>> report.issues[0].reason
        "value '1e308' in target 'y' is beyond float32's range (|y| > 3.403e+38); rescale the target"
    """
    num_rows = len(ids)
    if targets is None:
        if names:
            raise ConfigError(f"target_names {list(names)} given without targets")
        return np.zeros((num_rows, 0), dtype=np.float64), []
    if isinstance(targets, Mapping):  # {name: column}, as a DataFrame is built
        try:
            targets = pd.DataFrame(dict(targets))
        except ValueError as err:
            raise ConfigError(f"cannot read the targets dict as columns ({err}); give each target a column of {num_rows} values") from None
    if isinstance(targets, pd.DataFrame):
        frame = targets.reset_index(drop=True)
    else:
        array = np.asarray(targets, dtype=object)
        if array.ndim == 1 and any(isinstance(v, (list, tuple, np.ndarray)) for v in array):
            raise ConfigError("target rows have different lengths; give a rectangular [molecules x targets] table")
        if array.ndim == 0 or array.shape[0] != num_rows:  # reshape would silently refold them
            rows = "a scalar" if array.ndim == 0 else f"{array.shape[0]} target rows"
            raise ConfigError(f"got {rows} for {num_rows} molecules")
        if array.ndim > 2:  # reshape would silently flatten each row's table into columns
            raise ConfigError(f"targets have shape {array.shape}; give a [molecules x targets] table of 2 dimensions")
        frame = pd.DataFrame(array.reshape(num_rows, -1))
    if len(frame) != num_rows:
        raise ConfigError(f"got {len(frame)} target rows for {num_rows} molecules")
    if names is None:
        names = [str(c) for c in frame.columns] if isinstance(targets, pd.DataFrame) else [f"target_{i}" for i in range(frame.shape[1])]
    names = list(names)
    check_unique(names, "target")
    if len(names) != frame.shape[1]:
        raise ConfigError(f"got {frame.shape[1]} target columns but {len(names)} target names")
    out = np.empty((num_rows, len(names)), dtype=np.float64)
    for col, name in enumerate(names):
        raw = frame.iloc[:, col]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, copy=True)
        text = raw.astype(str).str.strip()
        blank = raw.isna().to_numpy() | text.isin(["", "nan", "NaN", "NA", "N/A", "None"]).to_numpy()
        with np.errstate(invalid="ignore"):
            too_large = np.isfinite(values) & (np.abs(values) > FLOAT32_MAX)
        for row in np.flatnonzero(~np.isfinite(values) & ~blank):
            report.add(RowIssue(int(row), ids[int(row)], f"unusable value {show_value(raw.iloc[row])} in target {name!r}", LABEL_MASKED))
        for row in np.flatnonzero(too_large):
            report.add(RowIssue(int(row), ids[int(row)], f"value {show_value(raw.iloc[row])} in target {name!r} is beyond float32's range "
                                f"(|y| > {FLOAT32_MAX:.4g}); rescale the target", LABEL_MASKED))
        values[~np.isfinite(values) | too_large] = np.nan
        out[:, col] = values
    return out, names


def _content_fingerprint(molecules: Sequence[Any], targets: np.ndarray) -> str:
    digest = hashlib.sha256()
    for mol in molecules:
        if isinstance(mol, Chem.Mol):
            digest.update(Chem.MolToMolBlock(mol).encode())
        else:
            digest.update(repr(mol).encode())
        digest.update(b"\0")
    digest.update(np.ascontiguousarray(targets).tobytes())
    return digest.hexdigest()


def featurization_settings(featurizer: MoleculeFeaturizer, target_names: Sequence[str]) -> Dict[str, Any]:
    """Everything that determines a featurized dataset except the input content: featurizer and
    relation settings, target names, the versions of dgl_graphtx, RDKit, DGL, dgllife and OGB,
    and the size budgets where they are not the default ones (so that the keys of datasets and
    stores made with the default budget stay those of before it).

    Example:
        >>> sorted(featurization_settings(MoleculeFeaturizer(limits=SizeLimits()), ["y"]))
        ['featurizer', 'relation', 'target_names', 'versions']
        >>> featurization_settings(MoleculeFeaturizer(limits=SizeLimits(max_atoms=50)), ["y"])["limits"]
        {'max_atoms': 50, 'max_relation_edges': 1048576}
        >>> featurization_settings(MoleculeFeaturizer(), ["y"])["limits"] is None  # no budget at all
        True
    """
    settings: Dict[str, Any] = {
        "featurizer": featurizer.config.to_dict(),
        "relation": str(featurizer.relation),
        "target_names": list(target_names),
        "versions": {"dgl_graphtx": __version__, "rdkit": rdkit.__version__, "dgl": dgl.__version__,
                     "dgllife": dgllife.__version__, "ogb": ogb.__version__},
    }
    if featurizer.limits != SizeLimits():
        settings["limits"] = dataclasses.asdict(featurizer.limits) if featurizer.limits is not None else None
    return settings


class MoleculeDataset(Dataset):
    """Featurized molecules with targets, ready for a :class:`~torch.utils.data.DataLoader`.

    Each item is ``(molecular graph, relation graph, labels [T], mask [T])``; ``mask`` is ``False``
    where a label is missing (blank or NaN in the input), and such labels are 0 in ``labels``, so a
    masked loss never sees them. Fetching a list of indices (what a DataLoader does through
    ``__getitems__``) assembles a whole :class:`MoleculeBatch` with vectorised gathers; pass
    :func:`collate_molecules` as ``collate_fn``.

    Invalid molecules never stop the build: they are left out and recorded in :attr:`report`
    (row, SMILES, reason), summarised in one log line, and writable with ``report.to_csv``.
    With ``strict=True`` the first invalid row raises :class:`InvalidMoleculeError` instead.

    Args:
        molecules: a list of SMILES strings or RDKit molecules (``None`` entries count as
            unreadable). A sequence is read item by item while featurizing (never on a cache hit),
            so it may build its molecules lazily, as :class:`~dgl_graphtx.datasets.qm9.GeometryMolecules` does.
        targets: ``[M, T]`` array-like, DataFrame or ``{name: column}`` dict of target values
            (``None`` for no targets).
        target_names: names of the ``T`` target columns.
        identifiers: text naming each molecule in reports (default: the SMILES).
        featurizer: featurization settings.
        relation: relation-graph settings.
        cache_dir: if given, the featurized result is stored there under a key hashing the
            settings, the versions of dgl_graphtx, RDKit, DGL, dgllife and OGB, and the input
            content, and reused when all of them match.
        fingerprint: content hash used in the cache key (computed from the inputs if omitted).
        limits: size budgets (atoms, relation-graph edges): a molecule above one is left out and
            reported with its row before its relation graph is built, as prediction does; the
            default is prediction's (:class:`~dgl_graphtx.featurize.SizeLimits`), ``None`` sets none.
        strict: raise on the first invalid molecule instead of skipping it.
        progress: show a progress bar (default: when stderr is a terminal).

    Example:
        >>> ds = MoleculeDataset(["CCO", "C1CC", "c1ccccc1"], [[1.0], [2.0], [None]], target_names=["y"])
        >>> len(ds), ds.report.num_skipped
        (2, 1)
        >>> graph, relation_graph, labels, mask = ds[1]
        >>> labels.tolist(), mask.tolist()
        ([0.0], [False])
    """

    #: Text classes mapped to 0/1 when the labels were read (set by :func:`~dgl_graphtx.datasets.load_labelled`).
    class_labels: Tuple[ClassLabels, ...] = ()
    #: Optional per-row data set by :func:`~dgl_graphtx.datasets.load_labelled`: censoring codes
    #: ``[M, T]``, loss weights ``[M]`` and group names (``None`` when not read).
    censor: Optional[np.ndarray] = None
    sample_weights: Optional[np.ndarray] = None
    groups: Optional[List[str]] = None
    #: Raw extra features per molecule and atom, set by :func:`~dgl_graphtx.datasets.add_extra_features`
    #: (``None`` without them; a training run fits their scalers on its training part).
    extra_values: Optional[ExtraFeatureValues] = None
    #: How each row's molecules (several per row: :mod:`~dgl_graphtx.datasets.molecule_columns`) and
    #: its atom- and bond-level targets (:mod:`~dgl_graphtx.datasets.level_targets`, on the graphs)
    #: were read, set by :func:`~dgl_graphtx.datasets.load_labelled`.
    molecule_columns: MoleculeColumns = MoleculeColumns()
    level_targets: LevelTargets = LevelTargets()

    def __init__(
        self,
        molecules: Iterable[Optional[MoleculeLike]],
        targets: Any = None,
        *,
        target_names: Optional[Sequence[str]] = None,
        identifiers: Optional[Sequence[str]] = None,
        featurizer: FeaturizerConfig = FeaturizerConfig(),
        relation: RelationConfig = RelationConfig(),
        cache_dir: Optional[PathLike] = None,
        fingerprint: Optional[str] = None,
        limits: Optional[SizeLimits] = SizeLimits(),
        strict: bool = False,
        progress: Optional[bool] = None,
    ) -> None:
        if isinstance(molecules, (str, Chem.Mol)):  # a string would be read letter by letter
            raise ConfigError(f"molecules is one molecule, {describe_molecule(molecules)!r}; pass a list of molecules, "
                              f"e.g. [{describe_molecule(molecules)!r}]")
        if not isinstance(molecules, SequenceABC):
            molecules = list(molecules)
        num_rows = len(molecules)
        if num_rows == 0:
            raise ConfigError("no molecules given")
        self.featurizer = MoleculeFeaturizer(featurizer, relation, limits)
        ids = list(identifiers) if identifiers is not None else [describe_molecule(m) for m in molecules]
        if len(ids) != num_rows:
            raise ConfigError(f"got {len(ids)} identifiers for {num_rows} molecules")
        report = InputReport(num_rows)
        raw_targets, self.target_names = coerce_targets(targets, target_names, ids, report)

        settings = self.settings
        settings["fingerprint"] = fingerprint or _content_fingerprint(molecules, raw_targets)
        path = cache_path(cache_dir, settings) if cache_dir is not None else None
        payload = load_cached(path) if path is not None else None
        if payload is None:
            payload = self._featurize(molecules, ids, raw_targets, report, strict, progress)
            if path is not None:
                save_cached(path, payload)
                logger.info("cached featurized dataset at %s", path)
        else:
            logger.info("featurized molecules read from the cache %s", path)
            skipped = InputReport.from_state_dict(payload["report"]).skipped
            if strict and skipped:
                raise self._strict_error(skipped[0])
        self.cache_file: Optional[Path] = path
        self._load_payload(payload)
        log = logger.warning if self.report.issues else logger.info
        log("MoleculeDataset: %s", self.report.summary())

    # -- construction -------------------------------------------------------------------------
    @property
    def settings(self) -> Dict[str, Any]:
        """Everything that determines the featurized result except the input content."""
        return featurization_settings(self.featurizer, self.target_names)

    @classmethod
    def from_payload(cls, payload: Dict[str, Any], featurizer: FeaturizerConfig, relation: RelationConfig,
                     target_names: Sequence[str]) -> "MoleculeDataset":
        """A dataset over tensors featurized elsewhere (a cache payload; the tensors may be memory-mapped).

        Example:
            >>> ds = MoleculeDataset(["C", "CO"], [[1.0], [2.0]], progress=False)
            >>> len(MoleculeDataset.from_payload(ds.payload(), ds.featurizer.config, ds.relation, ds.target_names))
            2
        """
        dataset = cls.__new__(cls)
        dataset.featurizer = MoleculeFeaturizer(featurizer, relation)
        dataset.target_names = list(target_names)
        dataset.cache_file = None
        dataset._load_payload(payload)
        return dataset

    def payload(self) -> Dict[str, Any]:
        """The featurized content as plain tensors and lists (what the cache stores)."""
        return {
            "graphs": self.graphs.state_dict(),
            "relations": self.relations.state_dict(),
            "labels": self.raw_labels,
            "rows": self.rows,
            "identifiers": list(self.identifiers),
            "report": self.report.state_dict(),
        }

    @staticmethod
    def _strict_error(issue: RowIssue) -> InvalidMoleculeError:
        return InvalidMoleculeError(
            f"row {issue.row} (SMILES {issue.smiles!r}): {issue.reason}. Fix or remove this row, "
            "or build the dataset with strict=False to skip invalid rows and get a report."
        )

    def _featurize(self, molecules, ids, raw_targets, report, strict, progress) -> Dict[str, Any]:
        def on_error(row: int, error: str) -> None:
            issue = RowIssue(row, ids[row], error)
            if strict:
                raise self._strict_error(issue)
            report.add(issue)

        show = sys.stderr.isatty() if progress is None else progress
        done = featurize_and_pack(self.featurizer, molecules, show, on_error)
        if not done.rows:
            raise InvalidMoleculeError(f"no valid molecule among {len(molecules)} rows; {report.summary()}")
        report.issues.sort(key=lambda issue: issue.row)
        assert done.graphs is not None and done.relations is not None  # some rows were featurized
        return {
            "graphs": done.graphs.state_dict(),
            "relations": done.relations.state_dict(),
            "labels": torch.from_numpy(raw_targets[done.rows].astype(np.float32)),
            "rows": torch.tensor(done.rows, dtype=torch.int64),
            "identifiers": [ids[r] for r in done.rows],
            "report": report.state_dict(),
        }

    def _load_payload(self, payload: Dict[str, Any]) -> None:
        self.graphs = PackedGraphs.from_state_dict(payload["graphs"])
        self.relations = PackedGraphs.from_state_dict(payload["relations"])
        self.raw_labels: torch.Tensor = payload["labels"]
        self.rows: torch.Tensor = payload["rows"]
        self.identifiers: List[str] = list(payload["identifiers"])
        self.report = InputReport.from_state_dict(payload["report"])

    @classmethod
    def from_dataframe(
        cls,
        frame: pd.DataFrame,
        smiles_col: str = "smiles",
        target_cols: Optional[Sequence[str]] = None,
        **kwargs: Any,
    ) -> "MoleculeDataset":
        """Build from a DataFrame with one SMILES column and zero or more target columns.

        Example:
            >>> import pandas as pd
            >>> ds = MoleculeDataset.from_dataframe(pd.DataFrame({"smiles": ["C", "CC"], "y": [0.5, 1.5]}), target_cols=["y"])
            >>> ds.target_names, len(ds)
            (['y'], 2)
        """
        missing = [c for c in [smiles_col, *(target_cols or [])] if c not in frame.columns]
        if missing:
            raise ConfigError(f"column(s) {missing} not found; available columns: {list(frame.columns)}")
        smiles = smiles_column(frame, smiles_col)
        targets = frame[list(target_cols)].reset_index(drop=True) if target_cols else None
        return cls(smiles, targets, target_names=list(target_cols or []), **kwargs)

    @classmethod
    def from_table(cls, table: MoleculeTable, target_cols: Optional[Sequence[str]] = None, **kwargs: Any) -> "MoleculeDataset":
        """Build from molecules read by :func:`~dgl_graphtx.datasets.readers.read_molecules`.

        Example:
            >>> from dgl_graphtx.datasets import freesolv_path, read_molecules
            >>> table = read_molecules(freesolv_path())
            >>> len(MoleculeDataset.from_table(table, ["expt"], progress=False))
            642
        """
        cols = list(target_cols or [])
        targets = table.targets(cols) if cols else None
        return cls(table.molecules, targets, target_names=cols, identifiers=table.identifiers, **kwargs)

    @classmethod
    def from_file(
        cls,
        path: PathLike,
        target_cols: Optional[Sequence[str]] = None,
        smiles_col: str = "smiles",
        delimiter: Optional[str] = None,
        **kwargs: Any,
    ) -> "MoleculeDataset":
        """Build from any molecule file: CSV/TSV (delimiter sniffed unless given; gzip allowed),
        SDF (SD properties as targets; coordinates used when the featurizer's ``coordinates`` is
        ``"auto"`` or ``"conformer"``) or ``.smi``. Rows and records are reported 0-based (header
        excluded); unreadable SDF records are named by their record number and first line.

        Example:
            >>> from dgl_graphtx.datasets import example_sdf_path
            >>> ds = MoleculeDataset.from_file(example_sdf_path(), featurizer=FeaturizerConfig(coordinates="conformer"))
            >>> "pos" in ds[0][0].ndata
            True
        """
        featurizer = kwargs.get("featurizer", FeaturizerConfig())
        table = read_molecules(path, smiles_col, delimiter, featurizer)
        kwargs.setdefault("fingerprint", f"{file_sha256(table.source)}|{table.kind}|{smiles_col}|{list(target_cols or [])}")
        return cls.from_table(table, target_cols, **kwargs)

    @classmethod
    def from_csv(cls, path: PathLike, smiles_col: str = "smiles", target_cols: Optional[Sequence[str]] = None,
                 **kwargs: Any) -> "MoleculeDataset":
        """Build from a delimited table (see :meth:`from_file`; rows are 0-based, header excluded).

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
            >>> _ = p.write_text("smiles,y\\nCCO,1.0\\nC1CC,2.0\\n")
            >>> MoleculeDataset.from_csv(p, target_cols=["y"]).report.skipped[0].row
            1
        """
        return cls.from_file(path, target_cols, smiles_col, **kwargs)

    @classmethod
    def from_sdf(cls, path: PathLike, target_cols: Optional[Sequence[str]] = None, **kwargs: Any) -> "MoleculeDataset":
        """Build from an SDF file (or ``.sdf.gz``); ``target_cols`` name SD properties (see :meth:`from_file`).

        Example:
            >>> from dgl_graphtx.datasets import example_sdf_path
            >>> MoleculeDataset.from_sdf(example_sdf_path(), progress=False).num_tasks
            0
        """
        return cls.from_file(path, target_cols, **kwargs)

    # -- access -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.graphs)

    @property
    def num_tasks(self) -> int:
        """Number of target columns."""
        return self.raw_labels.shape[1]

    @property
    def molecules_per_row(self) -> int:
        """Molecules each row holds (rows of several: tuples of molecules, see
        :mod:`~dgl_graphtx.featurize.components`).

        Example:
            >>> MoleculeDataset([("CCO", "O"), ("C", "CC")], progress=False).molecules_per_row
            2
        """
        rows = self.graphs.ndata.get(ROW_MOLECULE)
        return int(rows.max()) + 1 if rows is not None and len(rows) else 1

    @property
    def relation(self) -> RelationConfig:
        """The relation-graph settings the dataset was built with."""
        return self.featurizer.relation

    def check_featurized_as(self, featurizer: FeaturizerConfig, relation: RelationConfig, needed_by: str,
                            fix: str, name: str = "the dataset") -> None:
        """Refuse this dataset unless it was featurized with ``featurizer`` and ``relation``, the
        settings ``needed_by`` (a model, a backbone, a run) reads: one :class:`ConfigError`
        naming every difference, then ``fix``.

        Example:
            >>> ds = MoleculeDataset(["CCO"], progress=False)
            >>> needed = FeaturizerConfig(atom_features="canonical")
            >>> ds.check_featurized_as(needed, ds.relation, "the model", "featurize it again")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            dgl_graphtx.errors.ConfigError: the dataset was featurized with other settings than the model reads: atom_features 'ogb' ...
        """
        stored = {**self.featurizer.config.to_dict(), "relation": str(self.relation)}
        wanted = {**featurizer.to_dict(), "relation": str(relation)}
        differences = [f"{key} {stored.get(key)!r} (needed: {value!r})" for key, value in wanted.items() if stored.get(key) != value]
        if differences:
            raise ConfigError(f"{name} was featurized with other settings than {needed_by} reads: {', '.join(differences)}; {fix}")

    def __getitem__(self, index: int) -> Sample:
        labels, mask = labels_and_mask(self.raw_labels[index])
        return self.graphs[index], self.relations[index], labels, mask

    def __getitems__(self, indices: Indices) -> MoleculeBatch:
        idx = torch.as_tensor(indices, dtype=torch.int64)
        idx = torch.where(idx < 0, idx + len(self), idx)  # from the end, as ds[-1] and Subset(ds, [-1])
        labels, mask = labels_and_mask(self.raw_labels[idx])
        return MoleculeBatch(self.graphs.batch(idx), self.relations.batch(idx), labels, mask)
