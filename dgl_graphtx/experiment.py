"""One training experiment end to end: split, build, train, evaluate on the test part."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

import pandas as pd
from torch.utils.data import Subset

from .checkpoint import CheckpointMeta
from .datasets import MoleculeDataset, Split, random_split, scaffold_split
from .errors import ConfigError
from .models import MoleculeModel, Preset, build_model
from .training import ProcessHooks, Trainer, TrainConfig, TrainResult, compute_metrics, seed_everything

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
    out_dir: Optional[PathLike] = None,
    hooks: Optional[ProcessHooks] = None,
    resume: Union[None, bool, PathLike] = None,
) -> ExperimentResult:
    """Split ``dataset`` (``random`` or ``scaffold``, seeded by ``train_config.seed``, or a given
    :class:`Split`), train ``preset``'s model, select the best validation epoch, and evaluate on
    the test part. Without ``train_config`` the preset's own training recipe is used
    (``TrainConfig.from_recipe(preset.train)``).

    With ``out_dir``: ``best.pt``, ``last.pt`` (resumable), ``log.csv``, ``learning_curve.png``,
    ``metrics.json``, ``test_predictions.csv`` and ``input_report.csv`` are written there (by the
    main process only when ``hooks`` describe a distributed run). ``resume`` is passed to
    :meth:`Trainer.fit`.

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
    parts = make_split(dataset, split, fractions, train_config.seed)
    if not parts.train or not parts.valid or not parts.test:
        what = "the given split" if isinstance(split, Split) else f"split {split} {fractions}"
        raise ConfigError(f"{what} of {len(dataset)} molecules left a part empty; use more data or other fractions")
    seed_everything(train_config.seed)
    model = build_model(preset.model)
    out = Path(out_dir) if out_dir is not None else None
    meta = CheckpointMeta(preset.featurizer, preset.relation, dataset.target_names, {"split": "predefined" if isinstance(split, Split) else split, "fractions": list(fractions)})
    trainer = Trainer(model, train_config, out_dir=out, meta=meta, hooks=hooks)
    result = trainer.fit(Subset(dataset, parts.train), Subset(dataset, parts.valid), resume=resume)
    test_set = Subset(dataset, parts.test)
    predicted = trainer.predict(test_set)
    labels = dataset.raw_labels[parts.test].double().numpy()
    metrics = compute_metrics(preset.model.task, labels, predicted)
    table = pd.DataFrame({"row": dataset.rows[parts.test].numpy(), "smiles": [dataset.identifiers[i] for i in parts.test]})
    for t, name in enumerate(dataset.target_names):
        table[name] = labels[:, t]
        table[f"{name}_pred"] = predicted[:, t]
    if out is not None and trainer.hooks.is_main:
        out.mkdir(parents=True, exist_ok=True)
        table.to_csv(out / "test_predictions.csv", index=False)
        dataset.report.to_csv(out / "input_report.csv")
        summary = {"test": metrics, "valid": result.best_metrics, "best_epoch": result.best_epoch,
                   "sizes": {"train": len(parts.train), "valid": len(parts.valid), "test": len(parts.test)}}
        (out / "metrics.json").write_text(json.dumps(summary, indent=2))
    return ExperimentResult(model, parts, result, metrics, table, out)

