"""One training experiment end to end: split, build, train, evaluate on the test part."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Subset

from ..atomic_io import atomic_to_csv, atomic_write_text
from ..checkpoint import CheckpointExtras, CheckpointMeta, load_checkpoint, save_checkpoint
from ..datasets import MoleculeDataset, Split, make_split
from ..datasets.data_record import training_data_record
from ..datasets.extra_features import FittedExtraFeatures
from ..errors import ConfigError
from ..featurize.similarity import SIMILARITY_COLUMN, nearest_similarity, packed_fingerprints
from ..inference.domain import Domain
from ..models import MoleculeModel, Preset, build_model
from ..models.kernel import KERNEL_TASKS, KernelFit
from ..training import (ProcessHooks, Trainer, TrainConfig, TrainResult, compute_metrics, json_safe, metric_notes, prediction_column,
                        prediction_frame, seed_everything)
from ..training.kernel_fit import fit_kernel, kernel_summary
from ..training.levels import level_metrics, level_per_target, level_table, predict_levels
from ..training.metrics import resolve_metrics
from ..training.target_metrics import per_target_metrics
from ..uncertainty import Calibration, UncertaintyConfig, coverage_spread
from ..uncertainty.evaluation import (UncertainPredictions, add_uncertainty_columns, calibrated, fit_calibration, json_ready,
                                      predict_batches, report_metrics)
from ..uncertainty.mondrian import check_bin_sizes, coverage_by_bin
from .calibration_part import CalibrationPart, GivenCalibration, calibration_part
from .fine_tuning import start_from_pretrained
from .folder import RunFolder
from .plan import PREDEFINED, RunPlan, plan_of

PathLike = Union[str, Path]


@dataclass
class ExperimentResult:
    """What :func:`train_and_evaluate` produced."""

    model: MoleculeModel
    split: Split
    train: TrainResult
    test_metrics: Dict[str, float]
    test_predictions: pd.DataFrame
    out_dir: Optional[Path]
    test_notes: List[str] = field(default_factory=list)
    #: Test metrics of each target alone (``{target: {metric: value}}``).
    test_per_target: Dict[str, Dict[str, float]] = field(default_factory=dict)
    calibration: Optional[Calibration] = None
    #: The molecules that calibrated (with an uncertainty method): never ones that trained or chose the model.
    calibration_part: Optional[CalibrationPart] = None
    #: Their calibrated predictions (``row``, ``smiles``, labels, ``<t>_pred``, ``_std``, ``_lo``, ``_hi``).
    calibration_predictions: Optional[pd.DataFrame] = None
    #: The fingerprint kernel fitted beside the network (see :mod:`dgl_graphtx.models.kernel`), if any.
    kernel: Optional[KernelFit] = None
    #: The test part's atom- and bond-level predictions, one long table per level (``atom``, ``bond``).
    test_level_predictions: Dict[str, pd.DataFrame] = field(default_factory=dict)


#: The settings :func:`train_and_evaluate` takes beside a preset (the fields of its :class:`RunPlan`).
SINGLE_RUN_SETTINGS = ("split", "fractions", "uncertainty", "backbone")


def train_and_evaluate(
    dataset: MoleculeDataset,
    plan: Union[RunPlan, Preset],
    train_config: Optional[TrainConfig] = None,
    *,
    out_dir: Optional[Union[PathLike, RunFolder]] = None,
    overwrite: bool = False,
    hooks: Optional[ProcessHooks] = None,
    resume: Union[None, bool, PathLike] = None,
    calibration: GivenCalibration = None,
    **settings: Any,
) -> ExperimentResult:
    """Split ``dataset`` as ``plan`` says (a :class:`~dgl_graphtx.runs.plan.RunPlan`: a split
    kind seeded by ``plan.train.seed``, or a given :class:`Split`), train its model, select the
    best validation epoch, and evaluate on the test part. A :class:`~dgl_graphtx.models.Preset`
    with the settings ``train_config``, ``split``, ``fractions``, ``uncertainty`` and ``backbone``
    is shorthand for the plan of them: ``train_and_evaluate(data, preset, config, split="scaffold")``
    is ``train_and_evaluate(data, RunPlan(preset, config, split="scaffold"))``; without a
    ``TrainConfig`` the preset's own training recipe is used. The plan checks the settings
    together when it is made, and against ``dataset`` here.

    With ``out_dir``: ``best.pt``, ``last.pt`` (resumable), ``log.csv``, ``learning_curve.png``,
    ``metrics.json``, ``test_predictions.csv``, ``input_report.csv`` and ``run.json`` (which
    records the device and compute path the run used) are written there, each atomically, by
    the main process only when ``hooks`` describe a distributed run.
    The folder is a :class:`~dgl_graphtx.runs.folder.RunFolder`: locked while the run writes, and
    refused if it already holds a run unless ``overwrite=True`` or ``resume`` (which continues
    the run there, see :meth:`Trainer.fit`); pass an opened ``RunFolder`` to check the folder
    before featurizing, as the command line does.

    With an uncertainty method (``plan.uncertainty``, see :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`;
    the model gets the head the method needs; by default the method of the preset's
    ``uncertainty_head``), the uncertainty is calibrated on molecules that neither train the model
    nor choose its best epoch: ``calibration`` rows of ``dataset`` (taken out of the training and
    validation parts) or a dataset of its own (featurized like ``dataset``; molecules also in the
    run's data are left out of it, with a warning saying how many), else
    ``uncertainty.calibration_share`` of the molecules carved from the
    ``uncertainty.calibration_from`` part (whole scaffolds or clusters of those splits). The
    calibration and which molecules made it are stored in ``best.pt`` and ``metrics.json``, whose
    ``uncertainty`` entry also holds the test coverage and the spread it should have
    (:func:`~dgl_graphtx.uncertainty.coverage_spread`); the test predictions get ``<target>_std`` /
    ``_lo`` / ``_hi`` columns, and ``calibration_predictions.csv`` holds the calibration molecules'.
    With ``uncertainty.calibration_bins = "similarity"`` (regression), the conformal quantile is
    fitted per third of the calibration molecules by nearest-neighbour similarity to the training
    part (:mod:`~dgl_graphtx.uncertainty.mondrian`); ``best.pt`` then also stores the training
    part's packed fingerprints (``training_fingerprints``) so that prediction can bin new
    molecules, both tables get a ``similarity_to_training`` column, and ``metrics.json`` the
    test coverage per bin (``test_by_similarity_bin``).

    With ``train.from_pretrained`` (or a plan's ``backbone``), the model starts from that
    backbone's weights (:func:`~dgl_graphtx.runs.fine_tuning.start_from_pretrained`), which the
    plan loads once.

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:40], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = train_and_evaluate(ds, RunPlan(p, TrainConfig(epochs=1, progress=False)))
        >>> sorted(r.test_metrics), r.train.best_epoch
        (['mae', 'r2', 'rmse'], 1)
        >>> sorted(train_and_evaluate(ds, p, TrainConfig(epochs=1, progress=False), split="kmeans").test_metrics)
        ['mae', 'r2', 'rmse']
    """
    plan = plan_of(plan, train_config, settings, "train_and_evaluate", SINGLE_RUN_SETTINGS).for_data(dataset, calibration is not None)
    if not plan.single:
        raise ConfigError("train_and_evaluate trains one model; a plan with an ensemble or folds runs with train_ensemble "
                          "or cross_validate")
    if plan.split == PREDEFINED:
        raise ConfigError("the plan's split is the data's: give it as a Split (plan.with_split(split))")
    parts = make_split(dataset, plan.split, plan.fractions, plan.train.seed)
    if not parts.train or not parts.valid or not parts.test:
        what = "the given split" if isinstance(plan.split, Split) else f"split {plan.split} {plan.fractions}"
        raise ConfigError(f"{what} of {len(dataset)} molecules left a part empty; use more data or other fractions")
    parts, part = calibration_part(dataset, parts, plan.uncertainty, plan.train.seed, given=calibration, kind=plan.split)
    if part is not None and plan.uncertainty.calibration_bins == "similarity":
        labels = part.dataset.raw_labels[part.indices].double().numpy()
        check_bin_sizes([int(n) for n in np.isfinite(labels).sum(axis=0)], plan.uncertainty.coverage)
    return run_experiment(Experiment(plan, dataset, parts, part), out_dir, overwrite, hooks, resume)


@dataclass(frozen=True)
class Experiment:
    """What one experiment trains and evaluates: its checked ``plan``, the molecules (``dataset``),
    their split ``parts`` (indices into ``dataset``, without the calibration molecules) and the
    molecules that calibrate the uncertainty (``calibration``; ``None`` without a method). Made
    by :func:`train_and_evaluate`, and by ensembles and cross-validation for each of their runs."""

    plan: RunPlan
    dataset: MoleculeDataset
    parts: Split
    calibration: Optional[CalibrationPart]


def run_experiment(experiment: Experiment, out_dir: Union[None, PathLike, RunFolder] = None, overwrite: bool = False,
                   hooks: Optional[ProcessHooks] = None, resume: Union[None, bool, PathLike] = None) -> ExperimentResult:
    """Train and evaluate ``experiment`` (in its run folder ``out_dir``, opened here unless it is
    opened already; see :func:`train_and_evaluate`)."""
    hooks = hooks if hooks is not None else ProcessHooks()
    if out_dir is None or isinstance(out_dir, RunFolder) or not hooks.is_main:
        return _run(experiment, out_dir, hooks, resume)
    with RunFolder(out_dir, overwrite, resume=bool(resume)) as run:
        return _run(experiment, run, hooks, resume)


@dataclass
class EvaluationOnTest:
    """The trained model on the test part (``labels``, mean predictions ``predicted``, their
    ``metrics``, ``notes``, ``per_target`` metrics and prediction ``table``) and, with an
    uncertainty method, its ``calibration``, the calibrated test predictions
    (``with_uncertainty``), the calibration molecules' table and, with similarity bins, the
    molecules' similarity to the training part (``near``)."""

    labels: np.ndarray
    predicted: np.ndarray
    metrics: Dict[str, float]
    notes: List[str]
    per_target: Dict[str, Dict[str, float]]
    table: pd.DataFrame
    calibration: Optional[Calibration] = None
    with_uncertainty: Optional[UncertainPredictions] = None
    calibration_table: Optional[pd.DataFrame] = None
    near: Optional[TrainingSimilarity] = None
    level_tables: Dict[str, pd.DataFrame] = field(default_factory=dict)


def _run(experiment: Experiment, out_dir: Union[None, PathLike, RunFolder], hooks: ProcessHooks,
         resume: Union[None, bool, PathLike]) -> ExperimentResult:
    """Train and evaluate; ``out_dir`` is the main process's opened run folder, or the folder's
    path on the other processes of a distributed run (which read ``last.pt`` but write nothing)."""
    plan, dataset, parts = experiment.plan, experiment.dataset, experiment.parts
    run = out_dir if isinstance(out_dir, RunFolder) else None
    out = out_dir.path if isinstance(out_dir, RunFolder) else (Path(out_dir) if out_dir is not None else None)
    if run is not None:
        run.record(device=plan.train.device, compute=plan.train.compute)
    seed_everything(plan.train.seed)
    fitted = _fit_extra_features(experiment)
    model = build_model(plan.preset.model if fitted is None else dataclasses.replace(
        plan.preset.model, molecule_features=len(fitted.spec.molecule_names), atom_extra_features=len(fitted.spec.atom_names)))
    pretrained = start_from_pretrained(model, plan.backbone, dataset) if plan.backbone is not None else None
    meta = CheckpointMeta(plan.preset.featurizer, plan.preset.relation, dataset.target_names,
                          _checkpoint_extra(experiment, run, fitted, pretrained))
    trainer = Trainer(model, plan.train, out_dir=out, meta=meta, hooks=hooks, uncertainty=plan.uncertainty)
    result = trainer.fit(Subset(dataset, parts.train), Subset(dataset, parts.valid), resume=resume)
    kernel = _fit_kernel(experiment, trainer, fitted)
    tested = _evaluate_test(experiment, trainer)
    if run is not None:
        _write_outputs(experiment, run, result, tested, model, kernel)
        run.finish()
    return ExperimentResult(model, parts, result, tested.metrics, tested.table, out, tested.notes, tested.per_target,
                            tested.calibration, experiment.calibration, tested.calibration_table, kernel, tested.level_tables)


def _fit_kernel(experiment: Experiment, trainer: Trainer, fitted: Optional[FittedExtraFeatures]) -> Optional[KernelFit]:
    """The fingerprint kernel fitted beside the trained network and attached to it, when the data
    carries its fingerprints (``ExtraFeatures.kernel``) and the task takes one."""
    if fitted is None or not fitted.spec.kernel or experiment.plan.preset.model.task not in KERNEL_TASKS:
        return None
    if not experiment.dataset.target_names:  # atom- or bond-level targets only: nothing for the kernel to predict
        return None
    dataset, parts = experiment.dataset, experiment.parts
    return fit_kernel(trainer, Subset(dataset, parts.train), Subset(dataset, parts.valid), seed=experiment.plan.train.seed)


def _fit_extra_features(experiment: Experiment) -> Optional[FittedExtraFeatures]:
    """The dataset's extra features (if any) with their scalers fitted on the training part, and
    attached, scaled alike, to the calibration molecules of a dataset of their own."""
    dataset, part = experiment.dataset, experiment.calibration
    extras = dataset.extra_values  # set by dgl_graphtx.datasets.add_extra_features
    fitted = extras.fit(experiment.parts.train) if extras is not None else None
    if fitted is not None and part is not None and part.dataset is not dataset:  # a calibration file: the same scalers
        values = part.dataset.extra_values
        if values is None:
            raise ConfigError("the model reads extra features, but the calibration dataset has none: compute them on it "
                              "as on the training data (add_extra_features with the same settings)")
        fitted.attach(values.graphs, values.molecule, values.atom)
    return fitted


def _checkpoint_extra(experiment: Experiment, run: Optional[RunFolder], fitted: Optional[FittedExtraFeatures],
                      pretrained: Optional[Dict[str, Any]]) -> CheckpointExtras:
    """What the run's checkpoints record beside the model: split, data, applicability domain,
    run id, class labels, uncertainty settings, extra features and the pretrained start."""
    dataset, parts, plan = experiment.dataset, experiment.parts, experiment.plan
    split, uncertainty = plan.split, plan.uncertainty
    domain = Domain.from_molecules(dataset.identifiers[i] for i in parts.train).with_feature_values(dataset.graphs, parts.train)
    return CheckpointExtras(split=PREDEFINED if isinstance(split, Split) else split, fractions=list(plan.fractions),
                            data=training_data_record(dataset, parts,
                                                      experiment.calibration.identity() if experiment.calibration else None),
                            domain=domain.to_dict(),
                            run_id=run.run_id if run is not None else None,
                            class_labels=[c.to_dict() for c in dataset.class_labels] if dataset.class_labels else None,
                            uncertainty=dataclasses.asdict(uncertainty) if uncertainty.active else None,
                            extra_features=fitted.to_dict() if fitted is not None else None, pretrained=pretrained,
                            molecule_columns=dataset.molecule_columns.to_dict() if dataset.molecule_columns.several else None,
                            levels=dataset.level_targets.to_dict() if dataset.level_targets.any else None)


def _evaluate_test(experiment: Experiment, trainer: Trainer) -> EvaluationOnTest:
    """Predict the test part (calibrated, with an uncertainty method) and score the predictions."""
    plan, dataset, parts, part = experiment.plan, experiment.dataset, experiment.parts, experiment.calibration
    preset, uncertainty = plan.preset, plan.uncertainty
    predicted = trainer.predict(Subset(dataset, parts.test))
    labels = dataset.raw_labels[parts.test].double().numpy()
    calibration = with_uncertainty = calibration_table = None
    near = _similarity_to_training(dataset, parts, part) if part is not None and uncertainty.calibration_bins == "similarity" else None
    if part is not None:
        calibration, calibrated_part, with_uncertainty = _calibrate(trainer, dataset, parts.test, uncertainty, part, near)
        predicted = with_uncertainty.mean
        calibration_table = prediction_table(part.dataset, part.indices, preset, calibrated_part,
                                             near.calibration if near is not None else None)
    task, names = preset.model.task, dataset.target_names
    table = prediction_table(dataset, parts.test, preset, with_uncertainty if with_uncertainty is not None else predicted,
                             near.test if near is not None else None)
    metrics = compute_metrics(task, labels, predicted, plan.train.metrics) if names else {}
    per_target = per_target_metrics(task, labels, predicted, names, preset.model.num_classes)
    tested = EvaluationOnTest(labels, predicted, metrics, metric_notes(task, labels, names), per_target, table, calibration,
                              with_uncertainty, calibration_table, near)
    return _with_levels(tested, trainer, dataset, parts.test, plan.train.metrics) if trainer.level_names else tested


def _with_levels(tested: EvaluationOnTest, trainer: Trainer, dataset: MoleculeDataset, test: List[int],
                 metrics: Sequence[str]) -> EvaluationOnTest:
    """``tested`` with the test part's atom- and bond-level metrics (``atom_rmse``, ... beside the
    molecule-level ones, and per target) and long tables of their predictions."""
    _, levels = predict_levels(trainer.model, trainer.loader(Subset(dataset, test)), trainer.device)
    names = trainer.level_names
    per_target = {name: values for found in level_per_target(levels, names).values() for name, values in found.items()}
    rows = dataset.rows[test].tolist()
    identifiers = [dataset.identifiers[i] for i in test]
    tables = {level: level_table(found, level, names[level], rows, identifiers) for level, found in levels.items()}
    return dataclasses.replace(tested, metrics={**tested.metrics, **level_metrics(levels, resolve_metrics("regression", metrics))},
                               per_target={**tested.per_target, **per_target}, level_tables=tables)


def _write_outputs(experiment: Experiment, run: RunFolder, result: TrainResult, tested: EvaluationOnTest,
                   model: MoleculeModel, kernel: Optional[KernelFit]) -> None:
    """``test_predictions.csv``, ``input_report.csv`` and ``metrics.json`` into the run folder;
    with an uncertainty method also ``calibration_predictions.csv`` and the calibration in
    ``best.pt``, and with a fingerprint kernel the kernel in ``best.pt``."""
    out, parts, part = run.path, experiment.parts, experiment.calibration
    atomic_to_csv(tested.table, out / "test_predictions.csv", index=False)
    for level, table in tested.level_tables.items():
        atomic_to_csv(table, out / f"test_{level}_predictions.csv", index=False)
    experiment.dataset.report.to_csv(out / "input_report.csv")
    summary = {"run_id": run.run_id, "test": json_safe(tested.metrics),
               "test_per_target": {name: json_safe(values) for name, values in tested.per_target.items()},
               "valid": json_safe(result.best_metrics),
               "best_epoch": result.best_epoch, "notes": tested.notes,
               "sizes": {"train": len(parts.train), "valid": len(parts.valid), "test": len(parts.test),
                         **({"calibration": len(part.indices)} if part is not None else {})}}
    if kernel is not None:
        summary["fingerprint_kernel"] = kernel_summary(kernel)
    if tested.calibration is not None and part is not None and tested.with_uncertainty is not None:
        calibrated_on = part.record()
        summary["uncertainty"] = _uncertainty_summary(experiment, tested, calibrated_on)
        atomic_to_csv(tested.calibration_table, out / "calibration_predictions.csv", index=False)
        _store_calibration(out, model, experiment.plan.uncertainty, tested.calibration, calibrated_on, tested.near)
    elif kernel is not None:  # the fitted kernel into best.pt (the calibration's rewrite stores it too)
        _store_model(out, model)
    atomic_write_text(json.dumps(summary, indent=2, allow_nan=False), out / "metrics.json")


def _uncertainty_summary(experiment: Experiment, tested: EvaluationOnTest, calibrated_on: Dict[str, Any]) -> Dict[str, Any]:
    """The ``uncertainty`` entry of ``metrics.json``: the calibration, which molecules made it, the
    test metrics of the uncertainty, the test coverage to expect and, with similarity bins, per bin."""
    uncertainty, labels, near, names = experiment.plan.uncertainty, tested.labels, tested.near, experiment.dataset.target_names
    calibration, with_uncertainty = tested.calibration, tested.with_uncertainty
    assert experiment.calibration is not None and calibration is not None and with_uncertainty is not None, (
        "only a run calibrated on a calibration part has an uncertainty summary")
    return json_ready({
        "method": uncertainty.method, "calibration": calibration.to_dict(), "calibrated_on": calibrated_on,
        "test": report_metrics(experiment.plan.preset.model.task, labels, with_uncertainty, names),
        "expected_test_coverage": _expected_coverage(experiment.calibration, labels, names, uncertainty.coverage),
        **({"test_by_similarity_bin": coverage_by_bin(calibration.similarity_bins, near.test, labels, with_uncertainty.lo,
                                                      with_uncertainty.hi, names)}
           if near is not None and calibration.similarity_bins is not None and with_uncertainty.lo is not None
           and with_uncertainty.hi is not None else {})})


def _store_model(out: Path, model: MoleculeModel) -> None:
    """Rewrite ``best.pt`` with ``model`` as it is now (its fingerprint kernel fitted after training)."""
    save_checkpoint(out / "best.pt", model, load_checkpoint(out / "best.pt").meta)


def _store_calibration(out: Path, model: MoleculeModel, uncertainty: UncertaintyConfig, calibration: Calibration,
                       calibrated_on: Dict[str, Any], near: Optional[TrainingSimilarity]) -> None:
    """Rewrite ``best.pt`` with the calibration, the molecules that made it and, with similarity
    bins, the training part's fingerprints (which prediction bins new molecules by)."""
    best = load_checkpoint(out / "best.pt")
    recorded = {**dataclasses.asdict(uncertainty), "calibration": calibration.to_dict(), "calibrated_on": calibrated_on}
    fingerprints = torch.from_numpy(near.fingerprints) if near is not None else best.meta.extra.training_fingerprints
    extra = dataclasses.replace(best.meta.extra, uncertainty=recorded, training_fingerprints=fingerprints)
    save_checkpoint(out / "best.pt", model, dataclasses.replace(best.meta, extra=extra))


def prediction_table(dataset: MoleculeDataset, indices: List[int], preset: Preset,
                     predicted: Union[np.ndarray, UncertainPredictions], similarity: Optional[np.ndarray] = None) -> pd.DataFrame:
    """The rows ``indices`` of ``dataset`` with their predictions: ``row``, ``smiles``,
    ``similarity_to_training`` (when given), and per target the label, ``<target>_pred``
    (multiclass: also ``_prob_<k>``) and, for predictions with an uncertainty, ``_std`` / ``_lo`` / ``_hi``."""
    values = predicted.mean if isinstance(predicted, UncertainPredictions) else predicted
    labels = dataset.raw_labels[indices].double().numpy()
    table = pd.DataFrame({"row": dataset.rows[indices].numpy(), "smiles": [dataset.identifiers[i] for i in indices]})
    if similarity is not None:
        table[SIMILARITY_COLUMN] = similarity
    width = values.shape[1] // max(len(dataset.target_names), 1)
    for t, name in enumerate(dataset.target_names):
        table[name] = labels[:, t]
        columns = prediction_frame(preset.model.task, preset.model.num_classes, [name], values[:, t * width:(t + 1) * width])
        table = pd.concat([table, columns], axis=1)
    if isinstance(predicted, UncertainPredictions):
        add_uncertainty_columns(table, dataset.target_names, predicted, prediction_column)
    return table


class TrainingSimilarity(NamedTuple):
    """The training part's packed fingerprints and the calibration and test molecules'
    nearest-neighbour similarity to it."""

    fingerprints: np.ndarray
    calibration: np.ndarray
    test: np.ndarray


def _similarity_to_training(dataset: MoleculeDataset, parts: Split, part: CalibrationPart) -> TrainingSimilarity:
    fingerprints = packed_fingerprints(dataset.identifiers[i] for i in parts.train)
    return TrainingSimilarity(
        fingerprints,
        nearest_similarity(packed_fingerprints(part.dataset.identifiers[i] for i in part.indices), fingerprints),
        nearest_similarity(packed_fingerprints(dataset.identifiers[i] for i in parts.test), fingerprints))


def _calibrate(trainer: Trainer, dataset: MoleculeDataset, test: List[int], uncertainty: UncertaintyConfig,
               part: CalibrationPart, near: Optional[TrainingSimilarity] = None
               ) -> Tuple[Calibration, UncertainPredictions, UncertainPredictions]:
    """The calibration fitted on the calibration molecules (per similarity bin with ``near``),
    their calibrated predictions, and the calibrated test predictions."""
    def batches(data: MoleculeDataset, rows: List[int]):
        return lambda: trainer.loader(Subset(data, rows))

    model = trainer.model
    labels = part.dataset.raw_labels[part.indices].double().numpy()
    calibration, on_part = fit_calibration(model, batches(part.dataset, part.indices), labels, trainer.device, uncertainty,
                                           near.calibration if near is not None else None, dataset.target_names)
    predicted = predict_batches(model, batches(dataset, test)(), trainer.device, uncertainty, calibration.temperature)
    return calibration, on_part, calibrated(model.config.task, predicted, calibration, near.test if near is not None else None)


def _expected_coverage(part: CalibrationPart, test_labels: np.ndarray, names: List[str], coverage: float) -> Dict[str, Dict[str, float]]:
    """Per target, the spread the test coverage should have for exchangeable data, given its
    labelled calibration and test molecules (:func:`~dgl_graphtx.uncertainty.coverage_spread`)."""
    labels = part.dataset.raw_labels[part.indices].double().numpy()
    out = {}
    for t, name in enumerate(names):
        n_calibration, n_test = int(np.isfinite(labels[:, t]).sum()), int(np.isfinite(test_labels[:, t]).sum())
        spread = coverage_spread(n_calibration, coverage, n_test or None)
        out[name] = {"calibration_labels": n_calibration, "test_labels": n_test, **spread._asdict()}
    return out
