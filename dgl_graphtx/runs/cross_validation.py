"""K-fold cross-validation: each fold is the test part of one run, whose validation (and
calibration) parts come from the other K - 1 folds; test metrics as mean +/- std per target, and
every molecule's out-of-fold prediction in one table."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..atomic_io import atomic_to_csv, atomic_write_text
from ..datasets import MoleculeDataset, fold_groups, folds_to_splits, group_folds, random_folds
from ..datasets.folds import VALID_SHARE
from ..errors import ConfigError
from ..inference.backbones import Pretrained
from ..inference.cross_conformal import CV_REPORT, OOF_FILE
from ..models import Preset
from ..training import TrainConfig, compute_metrics, json_safe, prediction_column, prediction_values
from ..uncertainty import UncertaintyConfig, uncertainty_metrics
from .calibration_part import calibration_part
from .experiment import ExperimentResult, train_and_evaluate
from .folder import open_run_tree

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
        summary: ``target, metric, mean, std`` over folds (population std).
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


def cross_validate(
    dataset: MoleculeDataset,
    preset: Preset,
    train_config: Optional[TrainConfig] = None,
    folds: int = 5,
    kind: str = "random",
    groups: Optional[Sequence[Hashable]] = None,
    out_dir: Optional[PathLike] = None,
    overwrite: bool = False,
    uncertainty: Optional[UncertaintyConfig] = None,
    backbone: Optional[Pretrained] = None,
    valid_share: float = VALID_SHARE,
) -> CVResult:
    """Train ``folds`` runs of ``preset``: run ``k`` tests on fold ``k``; its validation part,
    ``valid_share`` of the other folds' molecules, is carved from them, and the rest trains (so
    each model trains on about ``(K - 1) / K`` of the data less its validation share). Folds are
    random, by a split kind's groups (``scaffold``, ``kmeans``), or by ``groups`` (one value per
    molecule); the carved parts keep the same groups whole. Seeded by ``train_config.seed``;
    every molecule is tested exactly once.

    With an ``uncertainty`` method, each run also carves its calibration part from the other
    folds (``uncertainty.calibration_share`` of all molecules) and calibrates its intervals on it;
    the out-of-fold predictions then carry ``_std`` / ``_lo`` / ``_hi``, and their scores give
    CV+ intervals for new molecules (:class:`~dgl_graphtx.inference.CVPlus`, which
    ``predict --checkpoint OUT`` uses).

    With ``out_dir``, run ``k`` writes its usual files to ``out_dir/fold_<k>/``;
    ``oof_predictions.csv``, ``cv_metrics.json`` and ``cv_metrics.csv`` (mean and std over folds
    per target and metric, and each fold's value) go to ``out_dir``; a folder already holding runs
    is refused unless ``overwrite``, which deletes them first (see :func:`~dgl_graphtx.runs.folder.open_run_tree`). ``backbone`` goes to every
    fold's run (see :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`).

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:30], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = cross_validate(ds, p, TrainConfig(epochs=1, progress=False), folds=3)
        >>> sorted(len(f.split.test) for f in r.folds), [len(f.split.train) for f in r.folds], list(r.summary.columns)
        ([10, 10, 10], [18, 18, 18], ['target', 'metric', 'mean', 'std'])
        >>> r.oof_predictions["row"].tolist() == list(range(30)), sorted(set(r.oof_predictions["fold"]))
        (True, [0, 1, 2])
    """
    if train_config is None:
        train_config = TrainConfig.from_recipe(preset.train)
    uncertainty = uncertainty if uncertainty is not None else UncertaintyConfig(preset.model.uncertainty_head)
    if uncertainty.calibration_bins != "none":
        raise ConfigError(f"--calibration-bins {uncertainty.calibration_bins} bins one model's split-conformal intervals; "
                          "cross-validation's CV+ intervals use every molecule's out-of-fold score in one set: drop the option "
                          "or train without --cv")
    kind = "group" if groups is not None else kind
    seed = train_config.seed
    together = fold_groups(kind, seed, smiles=dataset.identifiers, groups=groups or ())
    cut = random_folds(len(dataset), folds, seed) if together is None else group_folds(together, folds, seed)
    out = open_run_tree(out_dir, overwrite) if out_dir is not None else None
    runs: List[ExperimentResult] = []
    frames, tested = [], []
    for k, split in enumerate(folds_to_splits(cut, valid_share, seed, together)):
        split, part = calibration_part(dataset, split, uncertainty, seed + k, together)
        logger.info("cross-validation fold %d of %d: %d train, %d valid, %s%d test molecules", k + 1, folds, len(split.train),
                    len(split.valid), f"{len(part.indices)} calibration, " if part is not None else "", len(split.test))
        run = train_and_evaluate(dataset, preset, train_config, split=split, out_dir=out / f"fold_{k}" if out is not None else None,
                                 overwrite=overwrite, uncertainty=uncertainty, calibration=part.indices if part is not None else None,
                                 backbone=backbone)
        runs.append(run)
        frames.append(fold_metrics(run, preset, dataset.target_names, train_config.metrics).assign(fold=k))
        tested.append(run.test_predictions.assign(fold=k))
    per_fold = pd.concat(frames, ignore_index=True)[["fold", "target", "metric", "value"]]
    grouped = per_fold.groupby(["target", "metric"], sort=False)["value"]
    summary = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=0)}).reset_index()
    oof = pd.concat(tested, ignore_index=True).sort_values("row", kind="stable").reset_index(drop=True)
    oof.insert(2, "fold", oof.pop("fold"))
    if out is not None:
        atomic_to_csv(oof, out / OOF_FILE, index=False)
        _write(out, per_fold, summary, folds, kind, uncertainty, preset.model.task)
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
        targets.setdefault(row["target"], {})[row["metric"]] = values
    atomic_write_text(json.dumps(report, indent=2, allow_nan=False), out / CV_REPORT)
