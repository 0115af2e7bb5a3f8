"""A checkpoint (or an ensemble of them) scored on a labelled molecule file: overall and
per-target metrics, and one row per molecule with its identifiers, measured and predicted values;
and a table of saved predictions (``test_predictions.csv``, a cross-validation's
``oof_predictions.csv``) scored as it is."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..datasets import MoleculeTable
from ..datasets.class_labels import apply_class_labels
from ..datasets.molecule_dataset import coerce_targets
from ..datasets.report import InputReport, one_line
from ..errors import ConfigError
from ..training import compute_metrics, json_safe, metric_notes, prediction_column, prediction_values
from ..training.outputs import predicted_targets
from ..training.target_metrics import per_target_metrics
from ..uncertainty import uncertainty_metrics
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


def prediction_task(table: pd.DataFrame, names: Sequence[str]) -> str:
    """The task of saved predictions: ``multiclass`` when they carry class probabilities
    (``<t>_prob_<k>``), ``classification`` when every label is 0/1 and every prediction a
    probability, else ``regression``.

    Example:
        >>> prediction_task(pd.DataFrame({"y": [0.0, 1.0], "y_pred": [0.2, 0.9]}), ["y"])
        'classification'
    """
    if any(c.startswith(f"{names[0]}_prob_") for c in table.columns):
        return "multiclass"
    labels = table[list(names)].to_numpy(float)
    predicted = table[[prediction_column(n) for n in names]].to_numpy(float)
    binary = np.isin(labels[np.isfinite(labels)], (0.0, 1.0)).all()
    probabilities = ((predicted[np.isfinite(predicted)] >= 0) & (predicted[np.isfinite(predicted)] <= 1)).all()
    return "classification" if binary and probabilities else "regression"


def _scores(table: pd.DataFrame, names: Sequence[str], task: str, num_classes: int) -> Dict[str, Any]:
    """Metrics (mean over targets), ``per_target`` and, where intervals exist, each target's coverage and width."""
    labels = table[list(names)].to_numpy(float)
    predicted = prediction_values(task, num_classes, names, table)
    per_target = per_target_metrics(task, labels, predicted, names, num_classes)
    out: Dict[str, Any] = {**json_safe(compute_metrics(task, labels, predicted)),
                           "per_target": {n: json_safe(v) for n, v in per_target.items()}}
    intervals = {n: json_safe(uncertainty_metrics(table[n].to_numpy(float), table[prediction_column(n)].to_numpy(float),
                                                  lo=table[f"{n}_lo"].to_numpy(float), hi=table[f"{n}_hi"].to_numpy(float)))
                 for n in names if f"{n}_lo" in table and f"{n}_hi" in table}
    if intervals:
        out["intervals"] = intervals
    return out


def evaluate_predictions(table: pd.DataFrame, task: Optional[str] = None, source: str = "the table") -> Dict[str, Any]:
    """Score a table of saved predictions (``test_predictions.csv``, ``oof_predictions.csv``,
    ``ensemble_test_predictions.csv``): every target ``<t>`` with a ``<t>_pred`` column, overall
    and per target; interval ``coverage`` and ``width`` where ``<t>_lo`` / ``<t>_hi`` exist; and
    the same per ``fold`` (or ``replicate``) when the table has that column. ``task`` is read from
    the table when not given (see :func:`prediction_task`).

    Example:
        >>> oof = pd.DataFrame({"row": [0, 1, 2, 3], "fold": [0, 0, 1, 1], "y": [1.0, 2.0, 3.0, 4.0],
        ...                     "y_pred": [1.0, 2.0, 3.0, 6.0], "y_lo": [0.0, 1.0, 2.0, 5.0], "y_hi": [2.0, 3.0, 4.0, 7.0]})
        >>> report = evaluate_predictions(oof)
        >>> report["task"], report["molecules"], report["mae"], report["intervals"]["y"]["coverage"]
        ('regression', 4, 0.5, 0.75)
        >>> [(f["fold"], f["mae"]) for f in report["folds"]]
        [(0, 0.0), (1, 1.0)]
    """
    names = predicted_targets(table)
    if not names:
        raise ConfigError(f"{source} has no <target> and <target>_pred column pair; give a table written by train "
                          "(test_predictions.csv, oof_predictions.csv) or a --checkpoint to predict with")
    task = task or prediction_task(table, names)
    num_classes = sum(1 for c in table.columns if c.startswith(f"{names[0]}_prob_")) or 2
    labels = table[list(names)].to_numpy(float)
    report: Dict[str, Any] = {"task": task, "targets": list(names), "molecules": len(table),
                              "labelled": int(np.isfinite(labels).any(axis=1).sum()), **_scores(table, names, task, num_classes),
                              "notes": metric_notes(task, labels, names)}
    group = next((c for c in ("fold", "replicate") if c in table), None)
    if group is not None:
        report[f"{group}s"] = [{group: int(key), "molecules": len(rows), **_scores(rows, names, task, num_classes)}
                               for key, rows in table.groupby(group, sort=True)]
    return report
