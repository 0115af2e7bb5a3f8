"""One training experiment end to end: split, build, train, evaluate on the test part."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import pandas as pd
from torch.utils.data import Subset

from .atomic_io import atomic_to_csv, atomic_write_text
from .checkpoint import CheckpointMeta
from .datasets import MoleculeDataset, Split, random_split, scaffold_split
from .domain import Domain
from .errors import ConfigError
from .models import MoleculeModel, Preset, build_model
from .pretrained import start_from_pretrained
from .run_folder import RunFolder
from .training import ProcessHooks, Trainer, TrainConfig, TrainResult, check_binary_labels, compute_metrics, json_safe, metric_notes, seed_everything

PathLike = Union[str, Path]
SPLITS = ("random", "scaffold")


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


def make_split(dataset: MoleculeDataset, kind: Union[str, Split], fractions: Tuple[float, float, float], seed: int) -> Split:
    """Random or scaffold split of ``dataset`` (scaffolds from the dataset's SMILES); a given
    :class:`Split` (e.g. from :func:`~dgl_graphtx.datasets.load_labelled`) is used as it is."""
    if isinstance(kind, Split):
        return kind
    if kind == "random":
        return random_split(len(dataset), fractions, seed)
    if kind == "scaffold":
        return scaffold_split(dataset.identifiers, fractions, seed)
    raise ConfigError(f"split must be one of {SPLITS}, got {kind!r}")


def train_and_evaluate(
    dataset: MoleculeDataset,
    preset: Preset,
    train_config: Optional[TrainConfig] = None,
    split: Union[str, Split] = "random",
    fractions: Tuple[float, float, float] = (0.8, 0.1, 0.1),
    out_dir: Optional[Union[PathLike, RunFolder]] = None,
    overwrite: bool = False,
    hooks: Optional[ProcessHooks] = None,
    resume: Union[None, bool, PathLike] = None,
) -> ExperimentResult:
    """Split ``dataset`` (``random`` or ``scaffold``, seeded by ``train_config.seed``, or a given
    :class:`Split`), train ``preset``'s model, select the best validation epoch, and evaluate on
    the test part. Without ``train_config`` the preset's own training recipe is used
    (``TrainConfig.from_recipe(preset.train)``).

    With ``out_dir``: ``best.pt``, ``last.pt`` (resumable), ``log.csv``, ``learning_curve.png``,
    ``metrics.json``, ``test_predictions.csv``, ``input_report.csv`` and ``run.json`` are written
    there, each atomically, by the main process only when ``hooks`` describe a distributed run.
    The folder is a :class:`~dgl_graphtx.run_folder.RunFolder`: locked while the run writes, and
    refused if it already holds a run unless ``overwrite=True`` or ``resume`` (which continues
    the run there, see :meth:`Trainer.fit`); pass an opened ``RunFolder`` to check the folder
    before featurizing, as the command line does.

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
    if dataset.relation != preset.relation or dataset.featurizer.config != preset.featurizer:
        raise ConfigError("dataset was featurized with settings different from the preset's; rebuild it with preset.featurizer / preset.relation")
    if train_config is None:
        train_config = TrainConfig.from_recipe(preset.train)
    if preset.model.task == "classification":
        check_binary_labels(dataset.raw_labels.double().numpy(), dataset.target_names)
    parts = make_split(dataset, split, fractions, train_config.seed)
    if not parts.train or not parts.valid or not parts.test:
        what = "the given split" if isinstance(split, Split) else f"split {split} {fractions}"
        raise ConfigError(f"{what} of {len(dataset)} molecules left a part empty; use more data or other fractions")
    hooks = hooks if hooks is not None else ProcessHooks()
    if out_dir is None or isinstance(out_dir, RunFolder) or not hooks.is_main:
        return _run(dataset, preset, train_config, split, fractions, parts, out_dir, hooks, resume)
    with RunFolder(out_dir, overwrite, resume=bool(resume)) as run:
        return _run(dataset, preset, train_config, split, fractions, parts, run, hooks, resume)


def _run(dataset: MoleculeDataset, preset: Preset, train_config: TrainConfig, split: Union[str, Split],
         fractions: Tuple[float, float, float], parts: Split, out_dir: Union[None, PathLike, RunFolder],
         hooks: ProcessHooks, resume: Union[None, bool, PathLike]) -> ExperimentResult:
    """Train and evaluate; ``out_dir`` is the main process's opened run folder, or the folder's
    path on the other processes of a distributed run (which read ``last.pt`` but write nothing)."""
    run = out_dir if isinstance(out_dir, RunFolder) else None
    out = run.path if run is not None else (Path(out_dir) if out_dir is not None else None)
    seed_everything(train_config.seed)
    extras = getattr(dataset, "extra_values", None)  # set by dgl_graphtx.extra_features.add_extra_features
    fitted = extras.fit(parts.train) if extras is not None else None
    model = build_model(fitted.model_config(preset.model) if fitted is not None else preset.model)
    pretrained = start_from_pretrained(model, train_config.from_pretrained, dataset) if train_config.from_pretrained else None
    domain = Domain.from_molecules(dataset.identifiers[i] for i in parts.train)
    extra = {"split": "predefined" if isinstance(split, Split) else split, "fractions": list(fractions),
             "domain": domain.to_dict(), **({"run_id": run.run_id} if run is not None else {}),
             **({"extra_features": fitted.to_dict()} if fitted is not None else {}),
             **({"pretrained": pretrained} if pretrained is not None else {})}
    meta = CheckpointMeta(preset.featurizer, preset.relation, dataset.target_names, extra)
    trainer = Trainer(model, train_config, out_dir=out, meta=meta, hooks=hooks)
    result = trainer.fit(Subset(dataset, parts.train), Subset(dataset, parts.valid), resume=resume)
    test_set = Subset(dataset, parts.test)
    predicted = trainer.predict(test_set)
    labels = dataset.raw_labels[parts.test].double().numpy()
    metrics = compute_metrics(preset.model.task, labels, predicted)
    notes = metric_notes(preset.model.task, labels, dataset.target_names)
    table = pd.DataFrame({"row": dataset.rows[parts.test].numpy(), "smiles": [dataset.identifiers[i] for i in parts.test]})
    for t, name in enumerate(dataset.target_names):
        table[name] = labels[:, t]
        table[f"{name}_pred"] = predicted[:, t]
    if run is not None:
        atomic_to_csv(table, out / "test_predictions.csv", index=False)
        dataset.report.to_csv(out / "input_report.csv")
        summary = {"run_id": run.run_id, "test": json_safe(metrics), "valid": json_safe(result.best_metrics),
                   "best_epoch": result.best_epoch, "notes": notes,
                   "sizes": {"train": len(parts.train), "valid": len(parts.valid), "test": len(parts.test)}}
        atomic_write_text(json.dumps(summary, indent=2, allow_nan=False), out / "metrics.json")
        run.finish()
    return ExperimentResult(model, parts, result, metrics, table, out, notes)
