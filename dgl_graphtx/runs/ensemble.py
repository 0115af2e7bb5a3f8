"""Ensembles and replicates: ``K`` models with different seeds on the same split (the prediction is
their mean, the per-molecule standard deviation its uncertainty), repeated over ``R`` splits
(metrics reported as mean and standard deviation over replicates)."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from torch.utils.data import Subset

from ..atomic_io import atomic_to_csv, atomic_write_text, keep_record
from ..datasets import MoleculeDataset, make_split
from ..errors import ConfigError
from ..inference.ensemble import CALIBRATION_FILE, combine_members, with_intervals
from ..models import Preset
from ..training import TrainConfig, Trainer, compute_metrics, prediction_column
from ..training.target_metrics import per_target_metrics
from ..uncertainty import Calibration, UncertaintyConfig, fit_regression_calibration, uncertainty_method
from ..uncertainty.calibration import no_spread_advice
from ..uncertainty.evaluation import UncertainPredictions, json_ready, predict_batches, report_metrics
from .calibration_part import CalibrationPart, GivenCalibration, calibration_part
from .config import EnsembleConfig
from .experiment import Experiment, ExperimentResult, run_experiment
from .folder import open_run_tree
from .plan import RunPlan, plan_of

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]


@dataclass
class EnsembleResult:
    """What :func:`train_ensemble` produced.

    Attributes:
        members: ``[replicate][member]`` experiment results.
        predictions: test parts of every replicate: ``replicate``, ``row``, ``smiles`` and per
            target the label, ``<t>_pred`` (ensemble mean) and ``<t>_std`` (spread of the members).
        metrics: one row per replicate: the ensemble's test metrics and the members' mean.
        summary: ``{metric: {"mean": .., "std": ..}}`` of the ensemble metrics over replicates.
        per_target: ``{target: {metric: {"mean": .., "std": ..}}}``: each target's ensemble
            metrics on its own, over replicates.
        spearman: Spearman rho of ``std`` vs ``|error|`` over all test molecules (first target;
            NaN with a single member).
        calibrations: with uncertainty ``ensemble``, each replicate's calibration (z-scale of the
            std and conformal quantiles, fitted on its calibration part; its test rows then have
            ``<t>_lo`` / ``<t>_hi`` columns and a calibrated ``<t>_std``).
    """

    members: List[List[ExperimentResult]]
    predictions: pd.DataFrame
    metrics: pd.DataFrame
    summary: Dict[str, Dict[str, float]]
    spearman: float
    calibrations: List[Calibration] = dataclasses.field(default_factory=list)
    per_target: Dict[str, Dict[str, Dict[str, float]]] = dataclasses.field(default_factory=dict)


def member_seed(seed: int, replicate: int, member: int, size: int) -> int:
    """Seed of one member: ``seed + replicate * size + member`` (with ``size=1`` replicate ``r``
    is the single run with seed ``seed + r``, split and initialisation alike).

    Example:
        >>> [member_seed(0, r, k, 3) for r in range(2) for k in range(3)]
        [0, 1, 2, 3, 4, 5]
    """
    return seed + replicate * size + member


@dataclass(frozen=True)
class EnsembleRun:
    """An ensemble being trained: its checked ``plan``, the molecules, its output folder and the
    calibration set given (if any)."""

    plan: RunPlan
    dataset: MoleculeDataset
    out: Optional[Path]
    calibration: GivenCalibration

    @property
    def calibrates_spread(self) -> bool:
        """Whether the uncertainty is the members' spread (method ``ensemble``), calibrated here."""
        return uncertainty_method(self.plan.uncertainty.method).std == "members"

    @property
    def names(self) -> List[str]:
        """The target names."""
        return list(self.dataset.target_names)


@dataclass
class ReplicateResult:
    """One replicate: its members' runs, the ensemble's test ``table`` (with a ``replicate``
    column), its ``metrics`` row (with the members' mean), per-target metrics and, when the
    spread is calibrated, the ``calibration`` and its ``uncertainty`` report."""

    runs: List[ExperimentResult]
    table: pd.DataFrame
    metrics: Dict[str, float]
    per_target: Dict[str, Dict[str, float]]
    calibration: Optional[Calibration] = None
    uncertainty: Optional[Dict[str, Any]] = None


#: The settings :func:`train_ensemble` takes beside a preset: the fields of its :class:`RunPlan`,
#: and ``ensemble_size`` / ``replicates`` for its ``ensemble``.
ENSEMBLE_SETTINGS = ("split", "fractions", "uncertainty", "backbone", "ensemble", "ensemble_size", "replicates")


def train_ensemble(
    dataset: MoleculeDataset,
    plan: Union[RunPlan, Preset],
    train_config: Optional[TrainConfig] = None,
    *,
    out_dir: Optional[PathLike] = None,
    calibration: GivenCalibration = None,
    overwrite: bool = False,
    **settings: Any,
) -> EnsembleResult:
    """Train ``plan.ensemble.size`` models per split over ``plan.ensemble.replicates`` splits and
    evaluate the ensemble mean on each test part. A :class:`~dgl_graphtx.models.Preset` with the
    settings ``train_config``, ``split``, ``fractions``, ``ensemble_size``, ``replicates``,
    ``uncertainty`` and ``backbone`` is shorthand for the plan of them (see
    :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`).

    With an uncertainty method, each replicate sets apart one calibration part that no member
    trains on or chooses its epoch with (``calibration``, else a carved share: see
    :func:`~dgl_graphtx.runs.calibration_part.calibration_part`). Method ``ensemble`` calibrates
    the members' spread on it (z-scaling and conformal intervals, written to
    ``replicate_<r>/calibration.json`` with ``out_dir``); any other method is passed to every
    member, which calibrates on the same molecules.

    Replicate ``r`` splits with seed ``train.seed + r``; member ``k`` trains with
    :func:`member_seed`. A given :class:`Split` allows a single replicate. With ``out_dir``,
    member runs go to ``replicate_<r>/member_<k>/`` and ``ensemble_test_predictions.csv`` and
    ``ensemble_metrics.json`` to ``out_dir``; a folder already holding runs is refused unless
    ``overwrite``, which deletes them first (see :func:`~dgl_graphtx.runs.folder.open_run_tree`).

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:40], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = train_ensemble(ds, p, TrainConfig(epochs=1, progress=False), ensemble_size=2, replicates=2)
        >>> len(r.metrics), sorted(r.summary["rmse"]), "expt_std" in r.predictions
        (2, ['mean', 'std'], True)
    """
    size, replicates = settings.pop("ensemble_size", None), settings.pop("replicates", None)
    if size is not None or replicates is not None:
        settings["ensemble"] = EnsembleConfig(size or 1, replicates or 1)
    plan = plan_of(plan, train_config, settings, "train_ensemble", ENSEMBLE_SETTINGS).for_data(dataset, calibration is not None)
    if plan.folds:
        raise ConfigError("train_ensemble trains ensembles; a plan with folds runs with cross_validate")
    run = EnsembleRun(plan, dataset, Path(out_dir) if out_dir is not None else None, calibration)
    if run.out is not None:
        open_run_tree(run.out, overwrite)
        for replicate in range(plan.ensemble.replicates):
            keep_record(run.out / f"replicate_{replicate}")
    done = [_train_replicate(run, replicate) for replicate in range(plan.ensemble.replicates)]
    result = _ensemble_result(run, done)
    if run.out is not None:
        _write_report(run, result, done)
    return result


def _train_replicate(run: EnsembleRun, replicate: int) -> ReplicateResult:
    """Split with the replicate's seed, train its members, and evaluate their ensemble on the test part."""
    plan, names, size = run.plan, run.names, run.plan.ensemble.size
    seed = plan.train.seed + replicate
    parts, part = calibration_part(run.dataset, make_split(run.dataset, plan.split, plan.fractions, seed), plan.uncertainty, seed,
                                   given=run.calibration, kind=plan.split)
    runs = []
    for member in range(size):
        seed = member_seed(plan.train.seed, replicate, member, size)
        logger.info("replicate %d/%d, member %d/%d (seed %d)", replicate + 1, plan.ensemble.replicates, member + 1, size, seed)
        member_dir = run.out / f"replicate_{replicate}" / f"member_{member}" if run.out is not None else None
        member_plan = dataclasses.replace(plan, train=dataclasses.replace(plan.train, seed=seed), split=parts, ensemble=EnsembleConfig(),
                                          uncertainty=UncertaintyConfig() if run.calibrates_spread else plan.uncertainty,
                                          calibration_given=False)
        runs.append(run_experiment(Experiment(member_plan, run.dataset, parts, None if run.calibrates_spread else part), member_dir))
    table = combine_members([r.test_predictions for r in runs], names)
    calibration_fit = uncertainty_row = None
    if run.calibrates_spread and part is not None:
        calibration_fit = _calibrate_spread(runs, part, plan.uncertainty, plan.train)
        table = with_intervals(table, names, calibration_fit)
        uncertainty_row = {"replicate": replicate, "calibration": calibration_fit.to_dict(), "calibrated_on": part.record(),
                           "test": _interval_metrics(table, names)}
        if run.out is not None:
            atomic_write_text(json.dumps(json_ready(calibration_fit.to_dict()), indent=2),
                              run.out / f"replicate_{replicate}" / CALIBRATION_FILE)
    table.insert(0, "replicate", replicate)
    labels = table[names].to_numpy(dtype=float)
    predicted = table[[prediction_column(n) for n in names]].to_numpy(dtype=float)
    task = plan.preset.model.task
    metrics = compute_metrics(task, labels, predicted)
    member_means = {f"member_{k}": float(np.mean([r.test_metrics[k] for r in runs])) for k in metrics}
    return ReplicateResult(runs, table, {"replicate": replicate, **metrics, **member_means},
                           per_target_metrics(task, labels, predicted, names), calibration_fit, uncertainty_row)


def _ensemble_result(run: EnsembleRun, done: Sequence[ReplicateResult]) -> EnsembleResult:
    """The replicates together: their predictions and metrics, the metrics' mean and spread over
    replicates, and the Spearman rho of the first target's std vs its absolute error."""
    names = run.names
    frame = pd.concat([r.table for r in done], ignore_index=True)
    metrics_frame = pd.DataFrame([r.metrics for r in done])
    summary = {k: _mean_std(metrics_frame[k]) for k in metrics_frame.columns if k != "replicate"}
    per_target = {name: {k: _mean_std(pd.Series([r.per_target[name][k] for r in done])) for k in done[0].per_target[name]}
                  for name in names}
    first = names[0]
    errors = (frame[prediction_column(first)] - frame[first]).abs()
    keep = errors.notna() & frame[f"{first}_std"].notna()
    stds = frame.loc[keep, f"{first}_std"]
    spread = run.plan.ensemble.size > 1 and keep.sum() > 2 and stds.nunique() > 1
    if run.plan.ensemble.size > 1 and keep.sum() > 2 and not spread:
        logger.warning("the ensemble's members agree on every test molecule of %r (std %g), as they do when the fingerprint "
                       "kernel carries every member's prediction (network weight 0): its std says nothing here; %s", first,
                       float(stds.iloc[0]), no_spread_advice(run.plan.preset.model.task))
    rho = float(spearmanr(stds, errors[keep]).statistic) if spread else float("nan")
    calibrations = [r.calibration for r in done if r.calibration is not None]
    return EnsembleResult([r.runs for r in done], frame, metrics_frame, summary, rho, calibrations, per_target)


def _write_report(run: EnsembleRun, result: EnsembleResult, done: Sequence[ReplicateResult]) -> None:
    """``ensemble_test_predictions.csv`` and ``ensemble_metrics.json`` into ``run.out``."""
    out = run.out
    assert out is not None, "only a run with a folder writes its report"
    atomic_to_csv(result.predictions, out / "ensemble_test_predictions.csv", index=False)
    rho = result.spearman
    report = {"ensemble_size": run.plan.ensemble.size, "replicates": run.plan.ensemble.replicates, "summary": json_ready(result.summary),
              "per_target": json_ready(result.per_target),
              "spearman_std_vs_abs_error": None if np.isnan(rho) else rho, "replicate_metrics": json_ready([r.metrics for r in done])}
    if run.calibrates_spread:
        report["uncertainty"] = json_ready([r.uncertainty for r in done if r.uncertainty is not None])
    atomic_write_text(json.dumps(report, indent=2), out / "ensemble_metrics.json")


def _interval_metrics(table: pd.DataFrame, names: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """The test metrics of an ensemble's calibrated ``<t>_pred`` / ``_std`` / ``_lo`` / ``_hi`` columns."""
    columns = [table[[f"{n}_{s}" for n in names]].to_numpy(dtype=float) for s in ("pred", "std", "lo", "hi")]
    return report_metrics("regression", table[list(names)].to_numpy(dtype=float), UncertainPredictions(*columns), names)


def _mean_std(values: pd.Series) -> Dict[str, float]:
    return {"mean": float(values.mean()), "std": float(values.std(ddof=0))}


def _calibrate_spread(runs: Sequence[ExperimentResult], part: CalibrationPart, uncertainty: UncertaintyConfig,
                      train_config: TrainConfig) -> Calibration:
    """z-scale and conformal quantiles of the members' mean and spread on the calibration part."""
    def member_predictions(model) -> np.ndarray:
        trainer = Trainer(model, train_config)  # its loader and device: the same compute path as training
        return predict_batches(model, trainer.loader(Subset(part.dataset, part.indices)), trainer.device, UncertaintyConfig()).mean

    stack = np.stack([member_predictions(r.model) for r in runs])
    labels = part.dataset.raw_labels[part.indices].double().numpy()
    return fit_regression_calibration(uncertainty.method, labels, stack.mean(0), stack.std(0), uncertainty.coverage,
                                      names=part.dataset.target_names)
