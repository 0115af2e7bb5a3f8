"""K-fold cross-validation: one training run per fold, test metrics as mean +/- std per target."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Hashable, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..atomic_io import atomic_to_csv, atomic_write_text
from ..datasets import MoleculeDataset, cv_splits
from ..inference.backbones import Pretrained
from ..models import Preset
from ..training import TrainConfig, compute_metrics, json_safe, prediction_values
from ..uncertainty import UncertaintyConfig
from .experiment import ExperimentResult, train_and_evaluate

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
            when there are several) and metric.
        summary: ``target, metric, mean, std`` over folds (population std).
    """

    folds: List[ExperimentResult]
    per_fold: pd.DataFrame
    summary: pd.DataFrame


def fold_metrics(result: ExperimentResult, preset: Preset, names: Sequence[str], metrics: Sequence[str] = ()) -> pd.DataFrame:
    """Test metrics of one fold's run per target, and averaged over targets (``all``) when there are several."""
    if len(names) == 1:
        return pd.DataFrame([{"target": names[0], "metric": k, "value": v} for k, v in result.test_metrics.items()])
    rows = [{"target": ALL_TARGETS, "metric": k, "value": v} for k, v in result.test_metrics.items()]
    table, task = result.test_predictions, preset.model.task
    for name in names:
        predicted = prediction_values(task, preset.model.num_classes, [name], table)
        values = compute_metrics(task, table[[name]].to_numpy(dtype=np.float64), predicted, metrics)
        rows += [{"target": name, "metric": k, "value": v} for k, v in values.items()]
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
) -> CVResult:
    """Train ``folds`` runs of ``preset``: run ``k`` tests on fold ``k``, validates on fold
    ``k + 1`` and trains on the rest (folds ``random``, by ``scaffold``, or by ``groups``, one
    value per molecule, seeded by ``train_config.seed``); every molecule is tested exactly once.

    With ``out_dir``, run ``k`` writes its usual files to ``out_dir/fold_<k>/``, and
    ``cv_metrics.json`` / ``cv_metrics.csv`` (mean and std over folds per target and metric,
    and each fold's value) go to ``out_dir``. ``uncertainty`` and ``backbone`` go to every
    fold's run (see :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`).

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:30], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = cross_validate(ds, p, TrainConfig(epochs=1, progress=False), folds=3)
        >>> sorted(len(f.split.test) for f in r.folds), list(r.summary.columns)
        ([10, 10, 10], ['target', 'metric', 'mean', 'std'])
    """
    if train_config is None:
        train_config = TrainConfig.from_recipe(preset.train)
    kind = "group" if groups is not None else kind
    splits = cv_splits(kind, folds, train_config.seed, n=len(dataset), smiles=dataset.identifiers, groups=groups or ())
    out = Path(out_dir) if out_dir is not None else None
    runs: List[ExperimentResult] = []
    frames = []
    for k, split in enumerate(splits):
        logger.info("cross-validation fold %d of %d: %d train, %d valid, %d test molecules",
                    k + 1, folds, len(split.train), len(split.valid), len(split.test))
        run = train_and_evaluate(dataset, preset, train_config, split=split, out_dir=out / f"fold_{k}" if out is not None else None,
                                 overwrite=overwrite, uncertainty=uncertainty, backbone=backbone)
        runs.append(run)
        frames.append(fold_metrics(run, preset, dataset.target_names, train_config.metrics).assign(fold=k))
    per_fold = pd.concat(frames, ignore_index=True)[["fold", "target", "metric", "value"]]
    grouped = per_fold.groupby(["target", "metric"], sort=False)["value"]
    summary = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=0)}).reset_index()
    if out is not None:
        _write(out, per_fold, summary, folds, kind)
    return CVResult(runs, per_fold, summary)


def _write(out: Path, per_fold: pd.DataFrame, summary: pd.DataFrame, folds: int, kind: str) -> None:
    wide = per_fold.pivot_table(index=["target", "metric"], columns="fold", values="value", sort=False, dropna=False)
    wide.columns = [f"fold_{k}" for k in wide.columns]
    table = summary.merge(wide.reset_index(), on=["target", "metric"])
    atomic_to_csv(table, out / "cv_metrics.csv", index=False)
    report = {"folds": folds, "kind": kind, "targets": {}}
    for row in table.to_dict("records"):
        values = json_safe({"mean": row["mean"], "std": row["std"], **{f"fold_{k}": row[f"fold_{k}"] for k in range(folds)}})
        report["targets"].setdefault(row["target"], {})[row["metric"]] = values
    atomic_write_text(json.dumps(report, indent=2, allow_nan=False), out / "cv_metrics.json")
