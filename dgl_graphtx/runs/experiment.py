"""One training experiment end to end: split, build, train, evaluate on the test part."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import pandas as pd
from torch.utils.data import Subset

from ..atomic_io import atomic_to_csv, atomic_write_text
from ..checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from ..datasets import MoleculeDataset, Split, make_split
from ..datasets.data_record import training_data_record
from ..datasets.splits import DEFAULT_FRACTIONS
from ..errors import ConfigError
from ..inference.backbones import Pretrained, get_pretrained
from ..inference.domain import Domain
from ..models import MoleculeModel, Preset, build_model
from ..training import ProcessHooks, Trainer, TrainConfig, TrainResult, check_binary_labels, check_class_labels, compute_metrics, json_safe, metric_notes, prediction_column, prediction_frame, seed_everything
from ..training.target_metrics import per_target_metrics
from ..uncertainty import Calibration, UncertaintyConfig
from ..uncertainty.evaluation import add_uncertainty_columns, calibrated, fit_calibration, json_ready, predict_batches, report_metrics
from .fine_tuning import start_from_pretrained
from .folder import RunFolder

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


def train_and_evaluate(
    dataset: MoleculeDataset,
    preset: Preset,
    train_config: Optional[TrainConfig] = None,
    split: Union[str, Split] = "random",
    fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS,
    out_dir: Optional[Union[PathLike, RunFolder]] = None,
    overwrite: bool = False,
    hooks: Optional[ProcessHooks] = None,
    resume: Union[None, bool, PathLike] = None,
    uncertainty: Optional[UncertaintyConfig] = None,
    backbone: Optional[Pretrained] = None,
) -> ExperimentResult:
    """Split ``dataset`` (``random`` or ``scaffold``, seeded by ``train_config.seed``, or a given
    :class:`Split`), train ``preset``'s model, select the best validation epoch, and evaluate on
    the test part. Without ``train_config`` the preset's own training recipe is used
    (``TrainConfig.from_recipe(preset.train)``).

    With ``out_dir``: ``best.pt``, ``last.pt`` (resumable), ``log.csv``, ``learning_curve.png``,
    ``metrics.json``, ``test_predictions.csv``, ``input_report.csv`` and ``run.json`` are written
    there, each atomically, by the main process only when ``hooks`` describe a distributed run.
    The folder is a :class:`~dgl_graphtx.runs.folder.RunFolder`: locked while the run writes, and
    refused if it already holds a run unless ``overwrite=True`` or ``resume`` (which continues
    the run there, see :meth:`Trainer.fit`); pass an opened ``RunFolder`` to check the folder
    before featurizing, as the command line does.

    With an ``uncertainty`` method (see :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`; the
    preset's model gets the head the method needs; by default the method of the preset's
    ``uncertainty_head``), the uncertainty is calibrated on the
    validation part, the calibration is stored in ``best.pt``, the test predictions get
    ``<target>_std`` / ``_lo`` / ``_hi`` columns and ``metrics.json`` an ``uncertainty`` entry.

    With ``train_config.from_pretrained``, the model starts from that backbone's weights
    (:func:`~dgl_graphtx.runs.fine_tuning.start_from_pretrained`); ``backbone`` passes it when
    it is loaded already, so that a run loads it once.

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:40], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = train_and_evaluate(ds, p, TrainConfig(epochs=1, progress=False))
        >>> sorted(r.test_metrics)
        ['mae', 'r2', 'rmse']
    """
    if preset.model.num_tasks != dataset.num_tasks:
        raise ConfigError(f"model has {preset.model.num_tasks} outputs but the dataset has {dataset.num_tasks} targets")
    dataset.check_featurized_as(preset.featurizer, preset.relation, f"the {preset.model.variant} model",
                                "featurize it with preset.featurizer / preset.relation")
    if train_config is None:
        train_config = TrainConfig.from_recipe(preset.train)
    if uncertainty is None:
        uncertainty = UncertaintyConfig(preset.model.uncertainty_head)
    if uncertainty.active and preset.model.task == "multiclass":
        raise ConfigError(f"uncertainty {uncertainty.method!r} is for regression and binary classification, not for "
                          "--task multiclass; drop --uncertainty")
    if uncertainty.method == "ensemble":
        raise ConfigError("uncertainty 'ensemble' is the spread of several models: train with ensemble size >= 2 "
                          "(--ensemble-size, train_ensemble)")
    if uncertainty.method == "mc_dropout" and not (preset.model.dropout or preset.model.attn_dropout):
        raise ConfigError("uncertainty 'mc_dropout' samples dropout, but the model has dropout=0 and attn_dropout=0; "
                          "set one, e.g. --set model.dropout=0.1")
    if preset.model.uncertainty_head != uncertainty.head:
        preset = dataclasses.replace(preset, model=dataclasses.replace(preset.model, uncertainty_head=uncertainty.head))
    if preset.model.task == "classification":
        check_binary_labels(dataset.raw_labels.double().numpy(), dataset.target_names)
    if preset.model.task == "multiclass":
        check_class_labels(dataset.raw_labels.double().numpy(), preset.model.num_classes, dataset.target_names)
    parts = make_split(dataset, split, fractions, train_config.seed)
    if not parts.train or not parts.valid or not parts.test:
        what = "the given split" if isinstance(split, Split) else f"split {split} {fractions}"
        raise ConfigError(f"{what} of {len(dataset)} molecules left a part empty; use more data or other fractions")
    hooks = hooks if hooks is not None else ProcessHooks()
    if out_dir is None or isinstance(out_dir, RunFolder) or not hooks.is_main:
        return _run(dataset, preset, train_config, split, fractions, parts, out_dir, hooks, resume, uncertainty, backbone)
    with RunFolder(out_dir, overwrite, resume=bool(resume)) as run:
        return _run(dataset, preset, train_config, split, fractions, parts, run, hooks, resume, uncertainty, backbone)


def _run(dataset: MoleculeDataset, preset: Preset, train_config: TrainConfig, split: Union[str, Split],
         fractions: Tuple[float, float, float], parts: Split, out_dir: Union[None, PathLike, RunFolder],
         hooks: ProcessHooks, resume: Union[None, bool, PathLike], uncertainty: UncertaintyConfig,
         backbone: Optional[Pretrained]) -> ExperimentResult:
    """Train and evaluate; ``out_dir`` is the main process's opened run folder, or the folder's
    path on the other processes of a distributed run (which read ``last.pt`` but write nothing)."""
    run = out_dir if isinstance(out_dir, RunFolder) else None
    out = run.path if run is not None else (Path(out_dir) if out_dir is not None else None)
    seed_everything(train_config.seed)
    extras = getattr(dataset, "extra_values", None)  # set by dgl_graphtx.datasets.add_extra_features
    fitted = extras.fit(parts.train) if extras is not None else None
    model = build_model(preset.model if fitted is None else dataclasses.replace(
        preset.model, molecule_features=len(fitted.spec.molecule_names), atom_extra_features=len(fitted.spec.atom_names)))
    if backbone is None and train_config.from_pretrained:
        backbone = get_pretrained(train_config.from_pretrained)
    pretrained = start_from_pretrained(model, backbone, dataset) if backbone is not None else None
    domain = Domain.from_molecules(dataset.identifiers[i] for i in parts.train).with_feature_values(dataset.graphs, parts.train)
    extra = {"split": "predefined" if isinstance(split, Split) else split, "fractions": list(fractions),
             "data": training_data_record(dataset, parts),
             "domain": domain.to_dict(), **({"run_id": run.run_id} if run is not None else {}),
             **({"class_labels": [c.to_dict() for c in dataset.class_labels]} if dataset.class_labels else {}),
             **({"uncertainty": dataclasses.asdict(uncertainty)} if uncertainty.active else {}),
             **({"extra_features": fitted.to_dict()} if fitted is not None else {}),
             **({"pretrained": pretrained} if pretrained is not None else {})}
    meta = CheckpointMeta(preset.featurizer, preset.relation, dataset.target_names, extra)
    trainer = Trainer(model, train_config, out_dir=out, meta=meta, hooks=hooks, evidential_reg=uncertainty.evidential_reg)
    result = trainer.fit(Subset(dataset, parts.train), Subset(dataset, parts.valid), resume=resume)
    test_set = Subset(dataset, parts.test)
    predicted = trainer.predict(test_set)
    labels = dataset.raw_labels[parts.test].double().numpy()
    calibration = None
    if uncertainty.active:
        calibration, with_uncertainty = _calibrate(trainer, dataset, parts, uncertainty)
        predicted = with_uncertainty.mean
    metrics = compute_metrics(preset.model.task, labels, predicted, train_config.metrics)
    notes = metric_notes(preset.model.task, labels, dataset.target_names)
    per_target = per_target_metrics(preset.model.task, labels, predicted, dataset.target_names, preset.model.num_classes)
    table = pd.DataFrame({"row": dataset.rows[parts.test].numpy(), "smiles": [dataset.identifiers[i] for i in parts.test]})
    width = predicted.shape[1] // len(dataset.target_names)
    for t, name in enumerate(dataset.target_names):
        table[name] = labels[:, t]
        columns = prediction_frame(preset.model.task, preset.model.num_classes, [name], predicted[:, t * width:(t + 1) * width])
        table = pd.concat([table, columns], axis=1)
    if calibration is not None:
        add_uncertainty_columns(table, dataset.target_names, with_uncertainty, prediction_column)
    if run is not None:
        atomic_to_csv(table, out / "test_predictions.csv", index=False)
        dataset.report.to_csv(out / "input_report.csv")
        summary = {"run_id": run.run_id, "test": json_safe(metrics),
                   "test_per_target": {name: json_safe(values) for name, values in per_target.items()},
                   "valid": json_safe(result.best_metrics),
                   "best_epoch": result.best_epoch, "notes": notes,
                   "sizes": {"train": len(parts.train), "valid": len(parts.valid), "test": len(parts.test)}}
        if calibration is not None:
            summary["uncertainty"] = json_ready({
                "method": uncertainty.method, "calibration": calibration.to_dict(),
                "test": report_metrics(preset.model.task, labels, with_uncertainty, dataset.target_names)})
            best = load_checkpoint(out / "best.pt")
            extra = {**best.meta.extra, "uncertainty": {**dataclasses.asdict(uncertainty), "calibration": calibration.to_dict()}}
            save_checkpoint(out / "best.pt", model, dataclasses.replace(best.meta, extra=extra))
        atomic_write_text(json.dumps(summary, indent=2, allow_nan=False), out / "metrics.json")
        run.finish()
    return ExperimentResult(model, parts, result, metrics, table, out, notes, per_target, calibration)


def _calibrate(trainer: Trainer, dataset: MoleculeDataset, parts: Split, uncertainty: UncertaintyConfig):
    """The calibration fitted on the validation part and the calibrated test predictions."""
    def batches(rows):
        return lambda: trainer.loader(Subset(dataset, rows))

    model = trainer.model
    calibration = fit_calibration(model, batches(parts.valid), dataset.raw_labels[parts.valid].double().numpy(),
                                  trainer.device, uncertainty)
    test = predict_batches(model, batches(parts.test)(), trainer.device, uncertainty, calibration.temperature)
    return calibration, calibrated(model.config.task, test, calibration)
