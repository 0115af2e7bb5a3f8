"""Labelled training data with the split the data itself defines: a split column, or separate
validation and test files."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union, cast

import numpy as np
import pandas as pd

from ..checksums import file_sha256
from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from .class_labels import ClassLabels, check_usable_targets, encode_class_labels
from .extra_features import ExtraFeatures, add_extra_features, check_feature_columns
from .level_targets import LevelLabels, LevelTargets, attach_level_labels, read_level_labels
from .molecule_columns import MoleculeColumns, attach_mixture_weights
from .molecule_dataset import MoleculeDataset
from .readers import MoleculeTable, read_molecules, split_labels
from .row_columns import fold_groups, sample_weights, split_censored
from .splits import Split

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
PARTS = ("train", "valid", "test")


def load_labelled(
    path: PathLike,
    targets: Sequence[str],
    *,
    smiles_col: str = "smiles",
    delimiter: Optional[str] = None,
    split_col: Optional[str] = None,
    valid: Optional[PathLike] = None,
    test: Optional[PathLike] = None,
    task: str = "regression",
    positive_label: Optional[str] = None,
    censored: bool = False,
    weight_col: Optional[str] = None,
    group_col: Optional[str] = None,
    extra_features: Optional[ExtraFeatures] = None,
    molecule_columns: MoleculeColumns = MoleculeColumns(),
    level_targets: LevelTargets = LevelTargets(),
    **dataset_kwargs: Any,
) -> Tuple[MoleculeDataset, Optional[Split]]:
    """Read and featurize labelled molecules; return the dataset and, when the data defines it,
    the split (indices into the dataset; molecules that could not be featurized are left out).

    Args:
        path: the (training) file, any format :func:`~dgl_graphtx.datasets.read_molecules` reads.
        targets: target columns / SD properties.
        smiles_col, delimiter: how to read tables.
        split_col: column of ``path`` saying ``train``, ``valid`` or ``test`` for each row.
        valid, test: separate validation and test files (both or neither); ``path`` is then the
            training part. Rows are numbered across the files in the order train, valid, test.
        task: ``regression`` or ``classification``; for classification, targets of two text
            classes are mapped to 0/1 (see :func:`~dgl_graphtx.datasets.class_labels.encode_class_labels`)
            and the mapping is kept as ``dataset.class_labels``.
        positive_label: the class that becomes 1 (classification only).
        censored: read target cells such as ``<5.2`` / ``>7`` as censored labels: their numbers
            become the labels and ``dataset.censor`` (int8 ``[M, T]``: -1 below, 0 exact, 1 above)
            says which side (for the ``bounded_mse`` loss); otherwise such cells are unusable.
        weight_col: column of per-molecule loss weights, kept as ``dataset.sample_weights``
            (float64 ``[M]``; blank means 1).
        group_col: column of group names, kept as ``dataset.groups`` (cross-validation folds
            keep each group together).
        extra_features: extra features computed from the files as read (see
            :func:`~dgl_graphtx.datasets.add_extra_features`; kept as ``dataset.extra_values``).
        molecule_columns: several molecules per row: the columns holding them (reactions read as
            two), and their mixture weights (see :mod:`~dgl_graphtx.datasets.molecule_columns`;
            kept as ``dataset.molecule_columns``).
        level_targets: atom- and bond-level targets (lists in columns, or SD atom and bond
            properties; see :mod:`~dgl_graphtx.datasets.level_targets`), put on the graphs and
            kept as ``dataset.level_targets``.
        **dataset_kwargs: passed to :class:`MoleculeDataset` (featurizer, relation, cache_dir, ...).

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
        >>> _ = p.write_text("smiles,y,part\\nC,1,train\\nCC,2,train\\nCCC,3,valid\\nCCCC,4,test\\n")
        >>> ds, split = load_labelled(p, ["y"], split_col="part", progress=False)
        >>> split
        Split(train=[0, 1], valid=[2], test=[3])
    """
    if (valid is None) != (test is None):
        raise ConfigError("give both a validation and a test file, or neither")
    if split_col is not None and valid is not None:
        raise ConfigError("give either a split column or separate validation/test files, not both")
    tables = [molecule_columns.read(table) for table in _read_tables(path, valid, test, molecule_columns.first_column(smiles_col),
                                                                    delimiter, dataset_kwargs.get("featurizer", FeaturizerConfig()))]
    row_parts = _row_parts(tables, split_col)
    if positive_label is not None and task != "classification":
        raise ConfigError(f"--positive-label {positive_label!r} applies to --task classification only")
    labels = _read_targets(tables, targets, task, positive_label, censored)
    # per-row columns are read (and checked) before the molecules are featurized
    weights = None if weight_col is None else np.concatenate(
        [sample_weights(t.column(weight_col), str(t.source), weight_col) for t in tables])
    groups = None if group_col is None else [g for t in tables for g in fold_groups(t.column(group_col), str(t.source), group_col)]
    mixture = [molecule_columns.weights(t.columns, t.identifiers, t.source) for t in tables]
    levels = [read_level_labels(t, level_targets) for t in tables] if level_targets.any else []
    if extra_features is not None and extra_features.columns:
        check_feature_columns(pd.concat([t.columns for t in tables], ignore_index=True), extra_features.columns,
                              [i for t in tables for i in t.identifiers], " / ".join(str(t.source) for t in tables))
    fingerprint = "|".join(f"{file_sha256(t.source)}:{t.kind}" for t in tables) + f"|{smiles_col}|{list(targets)}"
    fingerprint += "".join(f"|{c.to_dict()}" for c in labels.classes)
    fingerprint += "|censored" if censored else ""
    fingerprint += f"|{molecule_columns.to_dict()}" if molecule_columns.several else ""
    molecules = [m for t in tables for m in t.molecules]
    dataset = MoleculeDataset(
        molecules,
        labels.frame,
        target_names=list(targets),
        identifiers=[i for t in tables for i in t.identifiers],
        **{"fingerprint": fingerprint, **dataset_kwargs},
    )
    dataset.class_labels = labels.classes
    kept_rows = dataset.rows.numpy()
    if labels.censor is not None:
        dataset.censor = labels.censor[kept_rows]
    if weights is not None:
        dataset.sample_weights = weights[kept_rows]
    if groups is not None:
        dataset.groups = [groups[r] for r in kept_rows]
    _attach_rows(dataset, molecule_columns, mixture, level_targets, levels, molecules)
    if extra_features is not None and extra_features.any:
        frame = pd.concat([t.columns for t in tables], ignore_index=True) if extra_features.columns else None
        add_extra_features(dataset, extra_features, molecules, frame,
                           source=" / ".join(str(t.source) for t in tables))
    return dataset, (None if row_parts is None else _data_split(row_parts[kept_rows], split_col))


def _attach_rows(dataset: MoleculeDataset, columns: MoleculeColumns, mixture: List[Optional[np.ndarray]], spec: LevelTargets,
                 levels: List[LevelLabels], molecules: List[Any]) -> None:
    """Give the dataset's graphs their rows' mixture weights and atom- and bond-level labels (read
    from every file, rows numbered across them), and record how they were read."""
    kept = dataset.rows.tolist()
    dataset.molecule_columns, dataset.level_targets = columns, spec
    if columns.mixture_weights:
        attach_mixture_weights(dataset.graphs, np.concatenate([w for w in mixture if w is not None])[kept])
    if levels:
        joined = LevelLabels([a for found in levels for a in found.atoms], [b for found in levels for b in found.bonds],
                             np.concatenate([found.totals for found in levels]))
        attach_level_labels(dataset.graphs, kept, joined, molecules, spec)


class LabelledTargets(NamedTuple):
    """The targets of labelled files: their ``frame`` (``None`` without targets), the censoring
    codes of censored labels and the text classes mapped to 0/1 (classification)."""

    frame: Optional[pd.DataFrame]
    censor: Optional[np.ndarray]
    classes: Tuple[ClassLabels, ...]


def _read_tables(path: PathLike, valid: Optional[PathLike], test: Optional[PathLike], smiles_col: str,
                 delimiter: Optional[str], featurizer: FeaturizerConfig) -> List[MoleculeTable]:
    """The training file, and the validation and test files when given (both or neither)."""
    files = [path] if valid is None else [path, valid, cast(PathLike, test)]  # both or neither (checked by the caller)
    return [read_molecules(file, smiles_col, delimiter, featurizer) for file in files]


def _row_parts(tables: Sequence[MoleculeTable], split_col: Optional[str]) -> Optional[np.ndarray]:
    """The part (``train``, ``valid`` or ``test``) of every row of ``tables``, as the split column or
    the separate files say; ``None`` when the data defines no split."""
    if split_col is not None:
        return split_labels(tables[0].column(split_col), tables[0].source, split_col)
    if len(tables) == 1:
        return None
    parts = np.concatenate([np.full(len(t), part) for t, part in zip(tables, PARTS)])
    logger.info("training rows 0-%d from %s, validation rows %d-%d from %s, test rows %d-%d from %s",
                len(tables[0]) - 1, tables[0].source, len(tables[0]), len(tables[0]) + len(tables[1]) - 1,
                tables[1].source, len(tables[0]) + len(tables[1]), len(parts) - 1, tables[2].source)
    return parts


def _read_targets(tables: Sequence[MoleculeTable], targets: Sequence[str], task: str, positive_label: Optional[str],
                  censored: bool) -> LabelledTargets:
    """The target columns of all ``tables``: censored cells split into numbers and codes (with
    ``censored``), text classes encoded (classification), checked usable before any featurization."""
    frame = pd.concat([t.targets(targets) for t in tables], ignore_index=True) if targets else None
    censor = None
    if censored and frame is not None:
        frame, censor = split_censored(frame)
    classes: Tuple[ClassLabels, ...] = ()
    if frame is not None:
        if task == "classification":
            frame, classes = encode_class_labels(frame, positive_label)
        check_usable_targets(frame, tables[0].source, task)
    return LabelledTargets(frame, censor, classes)


def _data_split(parts: np.ndarray, split_col: Optional[str]) -> Split:
    """The split (indices into the dataset) by the part each molecule is in (``parts``); refused when a part holds none."""
    split = Split(*(np.flatnonzero(parts == part).tolist() for part in PARTS))
    empty = [part for part, indices in zip(PARTS, split) if not indices]
    if empty:
        raise ConfigError(f"the {' and '.join(empty)} part(s) of the split hold no valid molecule; check {split_col or 'the files'}")
    return split
