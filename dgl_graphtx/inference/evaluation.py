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
from ..datasets.level_targets import LevelLabels, LevelTargets, read_level_labels
from ..datasets.molecule_dataset import coerce_targets
from ..datasets.float32_range import FLOAT32_MAX
from ..datasets.report import InputReport, one_line, show_value
from ..errors import ConfigError
from ..training import compute_metrics, json_safe, metric_notes, prediction_column, prediction_values
from ..training.outputs import predicted_targets
from ..training.target_metrics import per_target_metrics
from ..uncertainty import uncertainty_metrics
from .ensemble import ensemble_predict
from .level_outputs import level_column
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
    if first.model.levels is not None and len(predictors) > 1:
        raise ConfigError("atom- and bond-level predictions come from one model: evaluate one checkpoint")
    labels = apply_class_labels(table.targets(names), first.class_labels)
    measured, label_notes = _measured(labels, names, table.identifiers)
    given = dict(progress=progress, identifiers=table.identifiers, features=table.columns)
    if len(predictors) > 1:
        predicted = ensemble_predict(predictors, table.molecules, **given)
    else:
        predicted = first.predict(table.molecules, **given)
    valid = predicted["error"].isna().to_numpy()
    y_true, y_pred = measured[valid], prediction_values(task, config.num_classes, names, predicted.loc[valid])
    metrics = compute_metrics(task, y_true, y_pred) if names else {}
    per_target = per_target_metrics(task, y_true, y_pred, names, config.num_classes)
    if first.model.levels is not None:
        level_metrics, level_per_target = level_scores(read_level_labels(table, first.level_targets), predicted, first.level_targets)
        metrics, per_target = {**metrics, **level_metrics}, {**per_target, **level_per_target}
    report = {"molecules": int(valid.sum()), "labelled": int(np.isfinite(y_true).any(axis=1).sum()) if names else int(valid.sum()),
              "invalid": int((~valid).sum()), **json_safe(metrics),
              "per_target": {name: json_safe(values) for name, values in per_target.items()},
              "notes": label_notes + metric_notes(task, y_true, names, (~np.isnan(measured)).sum(axis=0).tolist())}
    rows = predicted[["smiles", "canonical_smiles"]].copy()
    for t, name in enumerate(names):
        rows[name] = measured[:, t]
        rows[prediction_column(name)] = predicted[prediction_column(name)].to_numpy(dtype=float)
        extra = [c for c in predicted.columns if c == f"{name}_std" or c.startswith(f"{name}_prob_")]
        for column in extra:
            rows[column] = predicted[column].to_numpy(dtype=float)
    spec = first.level_targets
    for column in [level_column(n, "atom") for n in spec.atom_targets] + [level_column(n, "bond") for n in spec.bond_targets]:
        rows[column] = predicted[column]
    rows["error"] = predicted["error"]
    return Evaluation(report, with_carried_columns(rows, carried, 0))


def level_scores(labels: LevelLabels, predicted: pd.DataFrame, spec: LevelTargets
                 ) -> Tuple[Dict[str, float], Dict[str, Dict[str, float]]]:
    """The atom- and bond-level metrics (``atom_rmse``, ...; mean over each level's targets) and
    each atom or bond target's own, over the molecules predicted without error: the measured
    values (``labels``, in the input's order) against the list columns of ``predicted``."""
    metrics: Dict[str, float] = {}
    per_target: Dict[str, Dict[str, float]] = {}
    for level, names, found in (("atom", spec.atom_targets, labels.atoms), ("bond", spec.bond_targets, labels.bonds)):
        if not names:
            continue
        rows = [r for r in range(len(predicted)) if pd.isna(predicted["error"].iloc[r]) and found[r] is not None]
        y_true = np.concatenate([found[r] for r in rows]) if rows else np.zeros((0, len(names)))
        y_pred = (np.stack([np.concatenate([np.asarray(predicted[level_column(n, level)].iloc[r], dtype=np.float64) for r in rows])
                            for n in names], axis=1) if rows else np.zeros((0, len(names))))
        metrics.update({f"{level}_{k}": v for k, v in compute_metrics("regression", y_true, y_pred).items()})
        per_target.update(per_target_metrics("regression", y_true, y_pred, names))
    return metrics, per_target


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


def _numeric(table: pd.DataFrame, columns: Sequence[str], rows: Sequence[str]) -> Tuple[pd.DataFrame, List[str]]:
    """``columns`` of saved predictions as numbers: a text cell becomes NaN (left out) and each
    column with some says how many and names the first row."""
    out, notes = pd.DataFrame(index=table.index), []
    for column in columns:
        values = pd.to_numeric(table[column], errors="coerce")
        text = np.flatnonzero(values.isna().to_numpy() & table[column].notna().to_numpy())
        if len(text):
            first = int(text[0])
            notes.append(f"column {column!r}: {len(text)} cell(s) not a number, left out (first: row {first} "
                         f"{one_line(rows[first])}: {show_value(table[column].iloc[first])})")
        out[column] = values.to_numpy(float)
    return out, notes


def _unusable(values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` ``[M, C]`` with a NaN, infinite or beyond-float32 entry."""
    with np.errstate(invalid="ignore"):
        return (~np.isfinite(values) | (np.abs(values) > FLOAT32_MAX)).any(axis=1)


def _check_task(task: str, numbers: pd.DataFrame, labels: np.ndarray, names: Sequence[str], source: str) -> None:
    """Refuse a ``--task`` the saved predictions do not hold, in one line."""
    has_probabilities = any(c.startswith(f"{names[0]}_prob_") for c in numbers.columns)
    if task == "multiclass" and not has_probabilities:
        raise ConfigError(f"--task multiclass needs class probabilities (<target>_prob_<k> columns); {source} has none: "
                          "give the task its model was trained for, or leave --task out to read it from the table")
    if task != "multiclass" and has_probabilities:
        raise ConfigError(f"{source} holds class probabilities (<target>_prob_<k> columns): it is multiclass, not {task}; "
                          "use --task multiclass or leave --task out")
    predicted = numbers[[prediction_column(n) for n in names]].to_numpy(float)
    finite = predicted[np.isfinite(predicted)]
    if task == "classification" and not (np.isin(labels[np.isfinite(labels)], (0.0, 1.0)).all() and ((finite >= 0) & (finite <= 1)).all()):
        raise ConfigError(f"--task classification needs 0/1 labels and predicted probabilities in [0, 1]; {source} holds "
                          "others: give the task its model was trained for, or leave --task out to read it from the table")


class _Checked(NamedTuple):
    """Saved predictions as the metrics read them: ``labels`` ``[M, T]`` (NaN where the label or
    its prediction is unusable), the model outputs ``predicted``, each target's interval (rows
    with ``lo > hi`` NaN) and the notes saying what was left out."""

    labels: np.ndarray
    predicted: np.ndarray
    intervals: Dict[str, Tuple[np.ndarray, np.ndarray]]
    notes: List[str]


def _checked(table: pd.DataFrame, names: Sequence[str], task: Optional[str], source: str) -> Tuple[_Checked, str, int]:
    """The saved predictions read as :func:`evaluate_table` reads labels, checked: text cells left
    out and named by row, predictions that are not finite numbers left out and counted, inverted
    and unbounded intervals said; with the task (``task``, checked, or read from the table) and
    the class count."""
    rows = table["smiles"].astype(str).tolist() if "smiles" in table else [""] * len(table)
    labels, notes = _measured(table[list(names)], names, rows)
    columns = [c for c in table.columns for n in names
               if c in (prediction_column(n), f"{n}_lo", f"{n}_hi") or c.startswith(f"{n}_prob_")]
    numbers, more = _numeric(table, columns, rows)
    task = task or prediction_task(numbers.assign(**{n: labels[:, t] for t, n in enumerate(names)}), names)
    _check_task(task, numbers, labels, names, source)
    num_classes = sum(1 for c in table.columns if c.startswith(f"{names[0]}_prob_")) or 2
    predicted = prediction_values(task, num_classes, names, numbers)
    width = predicted.shape[1] // len(names)
    intervals = {}
    for t, name in enumerate(names):
        bad = _unusable(predicted[:, t * width:(t + 1) * width]) & np.isfinite(labels[:, t])
        if bad.any():
            more.append(f"target {name!r}: {int(bad.sum())} prediction(s) not a finite number (NaN, infinite or beyond "
                        f"float32's range) left out of the metrics (first: row {int(np.argmax(bad))})")
            labels[bad, t] = np.nan
        bounds = [f"{name}_{end}" for end in ("lo", "hi") if f"{name}_{end}" in numbers]
        if len(bounds) == 1:
            more.append(f"target {name!r}: the table has {bounds[0]} without its other bound, so no interval is scored")
        if len(bounds) == 2:
            blank = table[bounds].isna().any(axis=1).to_numpy() & np.isfinite(labels[:, t])
            if blank.any():
                more.append(f"target {name!r}: {int(blank.sum())} labelled row(s) with a blank {name}_lo or {name}_hi (first: "
                            f"row {int(np.argmax(blank))}) left out of coverage and width")
            intervals[name] = _interval(numbers[bounds[0]].to_numpy(), numbers[bounds[1]].to_numpy(), labels[:, t], name, more)
    return _Checked(labels, predicted, intervals, notes + more), task, num_classes


def _interval(lo: np.ndarray, hi: np.ndarray, labels: np.ndarray, name: str, notes: List[str]) -> Tuple[np.ndarray, np.ndarray]:
    """A target's interval bounds, rows with ``lo > hi`` left out (NaN), with a note on those and
    on unbounded intervals."""
    labelled = np.isfinite(labels)
    with np.errstate(invalid="ignore"):
        inverted = labelled & (lo > hi)
    if inverted.any():
        notes.append(f"target {name!r}: {int(inverted.sum())} interval(s) with {name}_lo above {name}_hi (first: row "
                     f"{int(np.argmax(inverted))}) are not intervals: left out of coverage and width")
        lo, hi = np.where(inverted, np.nan, lo), np.where(inverted, np.nan, hi)
    unbounded = labelled & (np.isinf(lo) | np.isinf(hi))
    if unbounded.any():
        notes.append(f"target {name!r}: {int(unbounded.sum())} interval(s) are unbounded (too few calibration or "
                     "out-of-fold labels for their coverage), so the width is undefined")
    return lo, hi


def _scores(checked: _Checked, rows: np.ndarray, names: Sequence[str], task: str, num_classes: int) -> Dict[str, Any]:
    """Metrics (mean over targets), ``per_target`` and, where intervals exist, each target's
    coverage and width, over ``rows``."""
    labels, predicted = checked.labels[rows], checked.predicted[rows]
    per_target = per_target_metrics(task, labels, predicted, names, num_classes)
    out: Dict[str, Any] = {**json_safe(compute_metrics(task, labels, predicted)),
                           "per_target": {n: json_safe(v) for n, v in per_target.items()}}
    intervals = {}
    for t, name in enumerate(names):
        if name in checked.intervals:
            lo, hi = checked.intervals[name][0][rows], checked.intervals[name][1][rows]
            keep = np.isfinite(labels[:, t]) & ~np.isnan(lo) & ~np.isnan(hi)
            mean = predicted[:, t] if task != "multiclass" else np.zeros(len(rows))
            intervals[name] = json_safe(uncertainty_metrics(labels[keep, t], mean[keep], lo=lo[keep], hi=hi[keep]))
    if intervals:
        out["intervals"] = intervals
    return out


def evaluate_predictions(table: pd.DataFrame, task: Optional[str] = None, source: str = "the table") -> Dict[str, Any]:
    """Score a table of saved predictions (``test_predictions.csv``, ``oof_predictions.csv``,
    ``ensemble_test_predictions.csv``): every target ``<t>`` with a ``<t>_pred`` column, overall
    and per target; interval ``coverage`` and ``width`` where ``<t>_lo`` / ``<t>_hi`` exist; and
    the same per ``fold`` (or ``replicate``) when the table has that column. ``task`` is read from
    the table when not given (see :func:`prediction_task`), else checked against it.

    Labels are read as the checkpoint route reads them; a cell that is not a number, a prediction
    that is not a finite number (NaN, infinite, beyond float32's range), an interval with
    ``lo > hi`` or a blank bound are left out of the metrics, and ``notes`` says how many and names
    the first row (and names a bound without the other).

    Example:
        >>> oof = pd.DataFrame({"row": [0, 1, 2, 3], "fold": [0, 0, 1, 1], "y": [1.0, 2.0, 3.0, 4.0],
        ...                     "y_pred": [1.0, 2.0, 3.0, 6.0], "y_lo": [0.0, 1.0, 2.0, 5.0], "y_hi": [2.0, 3.0, 4.0, 7.0]})
        >>> report = evaluate_predictions(oof)
        >>> report["task"], report["molecules"], report["mae"], report["intervals"]["y"]["coverage"]
        ('regression', 4, 0.5, 0.75)
        >>> [(f["fold"], f["mae"]) for f in report["folds"]]
        [(0, 0.0), (1, 1.0)]
        >>> evaluate_predictions(oof.assign(y_pred=[1.0, 2.0, 3.0, np.inf]))["notes"]  # doctest: +ELLIPSIS
        ["target 'y': 1 prediction(s) not a finite number (NaN, infinite or beyond float32's range) left out of the metrics (first: row 3)"]
    """
    names = predicted_targets(table)
    if not names:
        raise ConfigError(f"{source} has no <target> and <target>_pred column pair; give a table written by train "
                          "(test_predictions.csv, oof_predictions.csv) or a --checkpoint to predict with")
    checked, task, num_classes = _checked(table.reset_index(drop=True), names, task, source)
    everything = np.arange(len(table))
    report: Dict[str, Any] = {"task": task, "targets": list(names), "molecules": len(table),
                              "labelled": int(np.isfinite(checked.labels).any(axis=1).sum()),
                              **_scores(checked, everything, names, task, num_classes),
                              "notes": checked.notes + metric_notes(task, checked.labels, names)}
    group = next((c for c in ("fold", "replicate") if c in table), None)
    if group is not None:
        keys = pd.to_numeric(table[group], errors="coerce").to_numpy(float)
        numbered = np.isfinite(keys) & (keys == np.round(keys))
        if not numbered.all():
            report["notes"].append(f"{(~numbered).sum()} row(s) without a whole {group} number (first: row "
                                   f"{int(np.argmax(~numbered))}) are left out of the per-{group} scores")
        report[f"{group}s"] = [{group: int(key), "molecules": int((keys == key).sum()),
                                **_scores(checked, np.flatnonzero(keys == key), names, task, num_classes)}
                               for key in np.unique(keys[numbered])]
    return report
