"""Ensembles and replicates: ``K`` models with different seeds on the same split (the prediction is
their mean, the per-molecule standard deviation its uncertainty), repeated over ``R`` splits
(metrics reported as mean and standard deviation over replicates)."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from torch.utils.data import Subset

from ..datasets import MoleculeDataset, Split, make_split
from ..datasets.splits import DEFAULT_FRACTIONS
from ..errors import ConfigError
from ..inference.backbones import Pretrained
from ..inference.ensemble import combine_members, with_intervals
from ..models import Preset
from ..training import TrainConfig, Trainer, compute_metrics, prediction_column
from ..training.target_metrics import per_target_metrics
from ..uncertainty import Calibration, UncertaintyConfig, fit_regression_calibration, uncertainty_method
from ..uncertainty.evaluation import UncertainPredictions, json_ready, predict_batches, report_metrics
from .calibration_part import CalibrationPart, GivenCalibration, calibration_part
from .experiment import ExperimentResult, train_and_evaluate

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


def train_ensemble(
    dataset: MoleculeDataset,
    preset: Preset,
    train_config: TrainConfig = TrainConfig(),
    split: Union[str, Split] = "random",
    fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS,
    ensemble_size: int = 1,
    replicates: int = 1,
    out_dir: Optional[PathLike] = None,
    uncertainty: Optional[UncertaintyConfig] = None,
    backbone: Optional[Pretrained] = None,
    calibration: GivenCalibration = None,
) -> EnsembleResult:
    """Train ``ensemble_size`` models per split over ``replicates`` splits and evaluate the
    ensemble mean on each test part.

    With an ``uncertainty`` method, each replicate sets apart one calibration part that no member
    trains on or chooses its epoch with (``calibration``, else a carved share: see
    :func:`~dgl_graphtx.runs.calibration_part.calibration_part`). Method ``ensemble`` calibrates
    the members' spread on it (z-scaling and conformal intervals, written to
    ``replicate_<r>/calibration.json`` with ``out_dir``); any other method is passed to every
    member, which calibrates on the same molecules (see :func:`~dgl_graphtx.runs.experiment.train_and_evaluate`, which also takes
    ``backbone``).

    Replicate ``r`` splits with seed ``train_config.seed + r``; member ``k`` trains with
    :func:`member_seed`. A given :class:`Split` allows a single replicate. With ``out_dir``,
    member runs go to ``replicate_<r>/member_<k>/`` and ``ensemble_test_predictions.csv`` and
    ``ensemble_metrics.json`` to ``out_dir``.

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
    if ensemble_size < 1 or replicates < 1:
        raise ConfigError(f"ensemble size and replicates must be >= 1, got {ensemble_size} and {replicates}")
    if isinstance(split, Split) and replicates > 1:
        raise ConfigError("replicates need random or scaffold splits; the data defines a single split")
    calibrate = uncertainty is not None and uncertainty_method(uncertainty.method).std == "members"
    if calibrate and (ensemble_size < 2 or preset.model.task != "regression"):
        raise ConfigError("uncertainty 'ensemble' calibrates the spread of >= 2 regression models; raise the ensemble size "
                          "(or use mc_dropout for classification)")
    if uncertainty is not None and uncertainty.calibration_bins != "none" and ensemble_size > 1:
        raise ConfigError(f"--calibration-bins {uncertainty.calibration_bins} bins one model's split-conformal intervals; an "
                          "ensemble's intervals are calibrated on its members' spread: drop the option or use --ensemble-size 1")
    member_uncertainty = None if uncertainty is None or calibrate else uncertainty
    calibrations: List[Calibration] = []
    uncertainty_rows = []
    out = Path(out_dir) if out_dir is not None else None
    names = list(dataset.target_names)
    members: List[List[ExperimentResult]] = []
    predictions, rows, target_rows = [], [], []
    for replicate in range(replicates):
        seed = train_config.seed + replicate
        parts, part = calibration_part(dataset, make_split(dataset, split, fractions, seed), uncertainty or UncertaintyConfig(),
                                       seed, given=calibration, kind=split)
        given = (part.indices if part.dataset is dataset else part.dataset) if part is not None and not calibrate else None
        runs = []
        for member in range(ensemble_size):
            seed = member_seed(train_config.seed, replicate, member, ensemble_size)
            logger.info("replicate %d/%d, member %d/%d (seed %d)", replicate + 1, replicates, member + 1, ensemble_size, seed)
            member_dir = out / f"replicate_{replicate}" / f"member_{member}" if out is not None else None
            runs.append(train_and_evaluate(dataset, preset, dataclasses.replace(train_config, seed=seed), parts,
                                           fractions, member_dir, uncertainty=member_uncertainty, calibration=given, backbone=backbone))
        members.append(runs)
        table = combine_members([r.test_predictions for r in runs], names)
        if calibrate and part is not None and uncertainty is not None:
            calibration_fit = _calibrate_spread(runs, part, uncertainty, train_config)
            calibrations.append(calibration_fit)
            table = with_intervals(table, names, calibration_fit)
            uncertainty_rows.append({"replicate": replicate, "calibration": calibration_fit.to_dict(), "calibrated_on": part.record(),
                                     "test": _interval_metrics(table, names)})
            if out is not None:
                (out / f"replicate_{replicate}" / "calibration.json").write_text(
                    json.dumps(json_ready(calibration_fit.to_dict()), indent=2))
        table.insert(0, "replicate", replicate)
        predictions.append(table)
        labels = table[names].to_numpy(dtype=float)
        predicted = table[[prediction_column(n) for n in names]].to_numpy(dtype=float)
        metrics = compute_metrics(preset.model.task, labels, predicted)
        member_means = {f"member_{k}": float(np.mean([r.test_metrics[k] for r in runs])) for k in metrics}
        rows.append({"replicate": replicate, **metrics, **member_means})
        target_rows.append(per_target_metrics(preset.model.task, labels, predicted, names))
    frame = pd.concat(predictions, ignore_index=True)
    metrics_frame = pd.DataFrame(rows)
    summary = {k: _mean_std(metrics_frame[k]) for k in metrics_frame.columns if k != "replicate"}
    per_target = {name: {k: _mean_std(pd.Series([r[name][k] for r in target_rows])) for k in target_rows[0][name]}
                  for name in names}
    first = names[0]
    errors = (frame[prediction_column(first)] - frame[first]).abs()
    keep = errors.notna() & frame[f"{first}_std"].notna()
    rho = float(spearmanr(frame.loc[keep, f"{first}_std"], errors[keep]).statistic) if ensemble_size > 1 and keep.sum() > 2 else float("nan")
    if out is not None:
        frame.to_csv(out / "ensemble_test_predictions.csv", index=False)
        report = {"ensemble_size": ensemble_size, "replicates": replicates, "summary": json_ready(summary),
                  "per_target": json_ready(per_target),
                  "spearman_std_vs_abs_error": None if np.isnan(rho) else rho, "replicate_metrics": json_ready(rows)}
        if calibrate:
            report["uncertainty"] = json_ready(uncertainty_rows)
        (out / "ensemble_metrics.json").write_text(json.dumps(report, indent=2))
    return EnsembleResult(members, frame, metrics_frame, summary, rho, calibrations, per_target)


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
    return fit_regression_calibration(uncertainty.method, labels, stack.mean(0), stack.std(0), uncertainty.coverage)
