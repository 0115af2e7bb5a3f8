"""A checkpoint (or an ensemble of them) scored on a labelled molecule file: overall and
per-target metrics, and one row per molecule with its identifiers, measured and predicted values."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..datasets import MoleculeTable
from ..datasets.class_labels import apply_class_labels
from ..datasets.molecule_dataset import coerce_targets
from ..datasets.report import InputReport, one_line
from ..training import compute_metrics, json_safe, metric_notes, prediction_column, prediction_values
from ..training.target_metrics import per_target_metrics
from .ensemble import ensemble_predict
from .predictor import Predictor, with_carried_columns


class Evaluation(NamedTuple):
    """What :func:`evaluate_table` returns.

    Attributes:
        report: ``molecules``, ``labelled``, ``invalid``, the metrics (mean over targets),
            ``per_target`` and ``notes``, JSON-ready (undefined metrics are ``None``).
        rows: per molecule: carried columns, ``smiles``, ``canonical_smiles``, ``<target>``
            (measured), ``<target>_pred`` (and ``<target>_std`` for ensembles, ``<target>_prob_<k>`` for
            multiclass), ``error``.
    """

    report: Dict[str, Any]
    rows: pd.DataFrame


def _measured(labels: pd.DataFrame, names: Sequence[str], identifiers: Sequence[str]) -> Tuple[np.ndarray, List[str]]:
    """The labels as numbers (``[M, T]``, NaN where missing), read as training reads them: text,
    infinite values and values beyond float32's range are left out, with one note per target saying
    how many and why (the first one)."""
    columns, notes = [], []
    for name in names:
        report = InputReport(len(labels))
        values, _ = coerce_targets(labels[[name]], [name], identifiers, report)
        columns.append(values[:, 0])
        if report.issues:
            first = report.issues[0]
            notes.append(f"target {name!r}: {len(report.issues)} label value(s) unusable and left out of the metrics "
                         f"(first: row {first.row} {one_line(first.smiles)}: {first.reason})")
    return np.stack(columns, axis=1) if columns else np.zeros((len(labels), 0)), notes


def evaluate_table(predictors: Sequence[Predictor], table: MoleculeTable, carried: Optional[pd.DataFrame] = None,
                   progress: bool = False) -> Evaluation:
    """Score ``predictors`` (their mean when several) on the labelled molecules of ``table``;
    text class labels are mapped as at training time (:attr:`Predictor.class_labels`).

    Example:
        >>> import tempfile, pathlib
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.datasets import read_molecules
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model), CheckpointMeta(p.featurizer, p.relation, ["y"]))
        >>> data = pathlib.Path(tempfile.mkdtemp()) / "d.csv"
        >>> _ = data.write_text("smiles,y,cid\\nCCO,1.0,A\\nCCN,2.0,B\\nC1CC,3.0,C\\n")
        >>> table = read_molecules(data)
        >>> result = evaluate_table([Predictor(path)], table, table.carried_columns("cid"))
        >>> result.report["molecules"], result.report["invalid"], list(result.rows.columns)
        (2, 1, ['cid', 'smiles', 'canonical_smiles', 'y', 'y_pred', 'error'])
    """
    first = predictors[0]
    config = first.model.config
    names, task = first.target_names, config.task
    labels = apply_class_labels(table.targets(names), first.class_labels)
    measured, label_notes = _measured(labels, names, table.identifiers)
    given = dict(progress=progress, identifiers=table.identifiers, features=table.columns)
    if len(predictors) > 1:
        predicted = ensemble_predict(predictors, table.molecules, **given)
    else:
        predicted = first.predict(table.molecules, **given)
    valid = predicted["error"].isna().to_numpy()
    y_true, y_pred = measured[valid], prediction_values(task, config.num_classes, names, predicted.loc[valid])
    metrics = compute_metrics(task, y_true, y_pred)
    per_target = per_target_metrics(task, y_true, y_pred, names, config.num_classes)
    report = {"molecules": int(valid.sum()), "labelled": int(np.isfinite(y_true).any(axis=1).sum()),
              "invalid": int((~valid).sum()), **json_safe(metrics),
              "per_target": {name: json_safe(values) for name, values in per_target.items()},
              "notes": label_notes + metric_notes(task, y_true, names)}
    rows = predicted[["smiles", "canonical_smiles"]].copy()
    for t, name in enumerate(names):
        rows[name] = measured[:, t]
        rows[prediction_column(name)] = predicted[prediction_column(name)].to_numpy(dtype=float)
        extra = [c for c in predicted.columns if c == f"{name}_std" or c.startswith(f"{name}_prob_")]
        for column in extra:
            rows[column] = predicted[column].to_numpy(dtype=float)
    rows["error"] = predicted["error"]
    return Evaluation(report, with_carried_columns(rows, carried, 0))
