"""What ``train`` (and ``demo``, which trains as ``train`` does) prints about a finished training
run: the test metrics of one model, of an ensemble over its replicates, or of cross-validation
folds, and where the files are."""
from __future__ import annotations

from pathlib import Path

from ..models.kernel import describe_fit
from ..runs.config import RunConfig
from ..runs.cross_validation import CVResult
from ..runs.ensemble import EnsembleResult
from ..runs.experiment import ExperimentResult
from ..runs.from_config import RunResult
from ..training.outputs import prediction_column
from ..training.target_metrics import format_metrics, per_target_lines
from ..uncertainty.evaluation import format_uncertainty


def print_run(result: RunResult, config: RunConfig, out: Path) -> None:
    """Print the summary of ``result``, a run of ``config`` written to ``out``."""
    if isinstance(result, CVResult):
        _print_folds(result, config, out)
    elif isinstance(result, EnsembleResult):
        _print_ensemble(result, config, out)
    else:
        _print_single(result, config, out)


def _print_single(result: ExperimentResult, config: RunConfig, out: Path) -> None:
    print(f"best epoch {result.train.best_epoch}; validation: {format_metrics(result.train.best_metrics)}")
    if result.kernel is not None:
        print(describe_fit(result.kernel, list(config.data.targets)))
    print(f"test ({len(result.split.test)} molecules): {format_metrics(result.test_metrics)}"
          + (" (mean over targets)" if len(result.test_per_target) > 1 else ""))
    for line in per_target_lines(result.test_per_target):
        print(line)
    for note in result.test_notes:
        print(f"note: {note}")
    if result.calibration is not None and result.calibration_part is not None:
        part = result.calibration_part
        print(f"uncertainty ({config.uncertainty.method}) calibrated on {len(part.indices)} molecules ({part.source}), none of "
              f"which trained the model or chose its epoch; test: "
              f"{format_uncertainty(result.test_predictions, list(config.data.targets), config.uncertainty.coverage, prediction_column)}")
    print(f"checkpoint: {out / 'best.pt'}")


def _print_ensemble(result: EnsembleResult, config: RunConfig, out: Path) -> None:
    size, replicates = config.ensemble.size, config.ensemble.replicates
    print(f"ensemble of {size} model(s) x {replicates} split(s); test metrics of the ensemble mean over replicates:")
    print(", ".join(f"{k} {v['mean']:.4f} +/- {v['std']:.4f}" for k, v in result.summary.items() if not k.startswith("member_")))
    if len(result.per_target) > 1:
        for name, values in result.per_target.items():
            print(f"  {name}: " + ", ".join(f"{k} {v['mean']:.4f} +/- {v['std']:.4f}" for k, v in values.items()))
    if size > 1:
        print(f"Spearman rho of the ensemble std vs |error| on the test parts: {result.spearman:.3f}")
    if result.calibrations:
        print(f"calibrated on each replicate's calibration part; test: "
              f"{format_uncertainty(result.predictions, list(config.data.targets), config.uncertainty.coverage, prediction_column)}")
    print(f"predictions: {out / 'ensemble_test_predictions.csv'}; checkpoints: {out}/replicate_*/member_*/best.pt")


def _print_folds(result: CVResult, config: RunConfig, out: Path) -> None:
    print(f"cross-validation over {config.data.cv} folds; test metrics, mean +/- std over folds:")
    for target, rows in result.summary.groupby("target", sort=False):
        print(f"  {target}: " + ", ".join(f"{r.metric} {r.mean:.4f} +/- {r.std:.4f}"
                                          + (f" ({r.folds} of {config.data.cv} folds)" if r.folds < config.data.cv else "")
                                          for r in rows.itertuples()))
    print(f"summary: {out / 'cv_metrics.csv'} and cv_metrics.json; out-of-fold predictions: {out / 'oof_predictions.csv'}; "
          f"runs: {out}/fold_<k>/")
    if config.uncertainty.active and config.model.task == "regression":
        print(f"'dgl-graphtx predict --checkpoint {out}' gives CV+ intervals from every molecule's out-of-fold score")
