"""K-fold cross-validation: each fold is the test part of one run, whose validation (and
calibration) parts come from the other K - 1 folds; test metrics as mean +/- std per target, and
every molecule's out-of-fold prediction in one table."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..atomic_io import atomic_to_csv, atomic_write_text
from ..datasets import MoleculeDataset, fold_groups, folds_to_splits, group_folds, random_folds
from ..errors import ConfigError
from ..inference.cross_conformal import CV_REPORT, OOF_FILE
from ..models import Preset
from ..training import TrainConfig, compute_metrics, json_safe, prediction_column, prediction_values
from ..uncertainty import UncertaintyConfig, uncertainty_metrics
from .calibration_part import calibration_part
from .experiment import Experiment, ExperimentResult, run_experiment
from .folder import open_run_tree
from .plan import RunPlan, plan_of

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
#: Name of the row of :attr:`CVResult.summary` holding the metrics averaged over targets.
ALL_TARGETS = "all"


@dataclass
class CVResult:
    """What :func:`cross_validate` produced.

    Attributes:
        folds: the run of every fold (its test part is the fold).
        per_fold: test metrics, one row per fold, target (and ``all``, averaged over targets,
            when there are several) and metric; with calibrated intervals also each target's
            ``coverage`` and ``width``.
        summary: ``target, metric, mean, std, folds`` over folds (population std; ``folds``: those where
            the metric is defined, e.g. not a test fold of one class).
        oof_predictions: every molecule once, predicted by the run that left its fold out:
            ``row``, ``smiles``, ``fold``, per target the label, ``<t>_pred`` (and ``_std``,
            ``_lo``, ``_hi`` with an uncertainty method; multiclass ``_prob_<k>``), by ``row``.
    """

    folds: List[ExperimentResult]
    per_fold: pd.DataFrame
    summary: pd.DataFrame
    oof_predictions: pd.DataFrame


def fold_metrics(result: ExperimentResult, preset: Preset, names: Sequence[str], metrics: Sequence[str] = ()) -> pd.DataFrame:
    """Test metrics of one fold's run per target, and averaged over targets (``all``) when there
    are several; each target's interval ``coverage`` and ``width`` when its run calibrated them."""
    table, task = result.test_predictions, preset.model.task
    rows = [{"target": ALL_TARGETS if len(names) > 1 else names[0], "metric": k, "value": v}
            for k, v in result.test_metrics.items()]
    for name in names:
        if len(names) > 1:
            predicted = prediction_values(task, preset.model.num_classes, [name], table)
            values = compute_metrics(task, table[[name]].to_numpy(dtype=np.float64), predicted, metrics)
            rows += [{"target": name, "metric": k, "value": v} for k, v in values.items()]
        if f"{name}_lo" in table:
            interval = uncertainty_metrics(table[name].to_numpy(float), table[prediction_column(name)].to_numpy(float),
                                           lo=table[f"{name}_lo"].to_numpy(float), hi=table[f"{name}_hi"].to_numpy(float))
            rows += [{"target": name, "metric": k, "value": v} for k, v in interval.items()]
    return pd.DataFrame(rows)


#: The settings :func:`cross_validate` takes beside a preset: the fields of its :class:`RunPlan`,
#: and ``kind`` for its ``split``.
CV_SETTINGS = ("folds", "split", "kind", "valid_share", "uncertainty", "backbone")
#: Folds of :func:`cross_validate` given a preset and no ``folds``.
DEFAULT_FOLDS = 5


def cross_validate(
    dataset: MoleculeDataset,
    plan: Union[RunPlan, Preset],
    train_config: Optional[TrainConfig] = None,
    *,
    groups: Optional[Sequence[Hashable]] = None,
    out_dir: Optional[PathLike] = None,
    overwrite: bool = False,
    **settings: Any,
) -> CVResult:
    """Train ``plan.folds`` runs of ``plan``: run ``k`` tests on fold ``k``; its validation part,
    ``plan.valid_share`` of the other folds' molecules, is carved from them, and the rest trains
    (so each model trains on about ``(K - 1) / K`` of the data less its validation share). Folds
    are random, by a split kind's groups (``plan.split``: ``scaffold``, ``kmeans``), or by
    ``groups`` (one value per molecule); the carved parts keep the same groups whole. Seeded by
    ``plan.train.seed``; every molecule is tested exactly once. A
    :class:`~dgl_graphtx.models.Preset` with the settings ``train_config``, ``folds`` (default 5),
    ``kind`` (the split kind), ``valid_share``, ``uncertainty`` and ``backbone`` is shorthand for
    the plan of them (see :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`).

    With an uncertainty method, each run also carves its calibration part from the other
    folds (``uncertainty.calibration_share`` of all molecules) and calibrates its intervals on it;
    the out-of-fold predictions then carry ``_std`` / ``_lo`` / ``_hi``, and their scores give
    CV+ intervals for new molecules (:class:`~dgl_graphtx.inference.CVPlus`, which
    ``predict --checkpoint OUT`` uses).

    With ``out_dir``, run ``k`` writes its usual files to ``out_dir/fold_<k>/``;
    ``oof_predictions.csv``, ``cv_metrics.json`` and ``cv_metrics.csv`` (mean and std over folds
    per target and metric, and each fold's value) go to ``out_dir``; a folder already holding runs
    is refused unless ``overwrite``, which deletes them first (see
    :func:`~dgl_graphtx.runs.folder.open_run_tree`).

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:30], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = cross_validate(ds, p, TrainConfig(epochs=1, progress=False), folds=3)
        >>> sorted(len(f.split.test) for f in r.folds), [len(f.split.train) for f in r.folds], list(r.summary.columns)
        ([10, 10, 10], [18, 18, 18], ['target', 'metric', 'mean', 'std', 'folds'])
        >>> r.oof_predictions["row"].tolist() == list(range(30)), sorted(set(r.oof_predictions["fold"]))
        (True, [0, 1, 2])
    """
    if not isinstance(plan, RunPlan):
        settings.setdefault("folds", DEFAULT_FOLDS)
        if "kind" in settings:
            settings["split"] = settings.pop("kind")
    plan = plan_of(plan, train_config, settings, "cross_validate", CV_SETTINGS).for_data(dataset)
    if not plan.folds:
        raise ConfigError("cross_validate needs a plan with folds (RunPlan(..., folds=5))")
    kind = "group" if groups is not None else str(plan.split)
    seed, folds = plan.train.seed, plan.folds
    together = fold_groups(kind, seed, smiles=dataset.identifiers, groups=groups or ())
    cut = random_folds(len(dataset), folds, seed) if together is None else group_folds(together, folds, seed)
    out = open_run_tree(out_dir, overwrite) if out_dir is not None else None
    runs: List[ExperimentResult] = []
    frames, tested = [], []
    for k, split in enumerate(folds_to_splits(cut, plan.valid_share, seed, together)):
        split, part = calibration_part(dataset, split, plan.uncertainty, seed + k, together)
        logger.info("cross-validation fold %d of %d: %d train, %d valid, %s%d test molecules", k + 1, folds, len(split.train),
                    len(split.valid), f"{len(part.indices)} calibration, " if part is not None else "", len(split.test))
        fold = Experiment(dataclasses.replace(plan, split=split, folds=0), dataset, split, part)
        run = run_experiment(fold, out / f"fold_{k}" if out is not None else None, overwrite)
        runs.append(run)
        frames.append(fold_metrics(run, plan.preset, dataset.target_names, plan.train.metrics).assign(fold=k))
        tested.append(run.test_predictions.assign(fold=k))
    per_fold = pd.concat(frames, ignore_index=True)[["fold", "target", "metric", "value"]]
    grouped = per_fold.groupby(["target", "metric"], sort=False)["value"]
    summary = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=0), "folds": grouped.count()}).reset_index()
    for row in summary[summary["folds"] < folds].itertuples():  # a fold's test part left the metric undefined (one class, say)
        logger.warning("cross-validation: %s %s is defined on %d of %d folds only (the others' notes say why): its mean and std "
                       "are over those", row.target, row.metric, row.folds, folds)
    oof = pd.concat(tested, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
    oof.insert(2, "fold", oof.pop("fold"))
    if out is not None:
        atomic_to_csv(oof, out / OOF_FILE, index=False)
        _write(out, per_fold, summary, folds, kind, plan.uncertainty, plan.preset.model.task)
    return CVResult(runs, per_fold, summary, oof)


def _write(out: Path, per_fold: pd.DataFrame, summary: pd.DataFrame, folds: int, kind: str,
           uncertainty: UncertaintyConfig, task: str) -> None:
    wide = per_fold.pivot_table(index=["target", "metric"], columns="fold", values="value", sort=False, dropna=False)
    wide.columns = [f"fold_{k}" for k in wide.columns]
    table = summary.merge(wide.reset_index(), on=["target", "metric"])
    atomic_to_csv(table, out / "cv_metrics.csv", index=False)
    targets: Dict[str, Dict[str, Any]] = {}
    report: Dict[str, Any] = {"folds": folds, "kind": kind, "task": task, "targets": targets}
    if uncertainty.active:
        report["uncertainty"] = {"method": uncertainty.method, "coverage": uncertainty.coverage}
    for row in table.to_dict("records"):
        values = json_safe({"mean": row["mean"], "std": row["std"], **{f"fold_{k}": row[f"fold_{k}"] for k in range(folds)}})
        targets.setdefault(row["target"], {})[row["metric"]] = {**values, "folds": int(row["folds"])}
    atomic_write_text(json.dumps(report, indent=2, allow_nan=False), out / CV_REPORT)
