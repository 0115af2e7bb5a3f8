"""The training data of a run, read as its configuration says: a molecule file through the common
reader (with the extra features it asks for), a store written by ``dgl-graphtx featurize``, or QM9
from its DFT geometries. The command line, hyperparameter search and Python read it the same way."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..datasets import MoleculeDataset, Split, is_store, load_labelled, load_store, qm9
from ..errors import GraphTxError
from ..featurize import SizeLimits
from .config import RunConfig
from .store_recipe import check_store_settings


def load_training_data(config: RunConfig) -> Tuple[MoleculeDataset, Optional[Split]]:
    """The featurized training data of a run and, when the data defines it, its split: a file
    through the common reader, a store written by ``dgl-graphtx featurize``, or QM9 from its DFT
    geometries when ``data.path`` is ``qm9``.

    Example:
        >>> from dgl_graphtx.datasets import freesolv_path
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> run = resolve_run_config(overrides=[f"data.path={freesolv_path()}", "data.targets=expt", "data.cache=false",
        ...                                     "train.progress=false"])
        >>> dataset, split = load_training_data(run)
        >>> len(dataset), split
        (642, None)
    """
    data = config.data
    if (data.weight_col or data.group_col) and (data.is_qm9 or (data.path is not None and is_store(data.path))):
        raise GraphTxError("--weight-col and --group-col read columns of a CSV/SDF file, not of a store or qm9")
    featurized = data.is_qm9 or (data.path is not None and is_store(data.path))
    if (data.molecule_columns.several or data.level_targets.any) and featurized:
        raise GraphTxError("several molecules per row (--smiles-cols, --reaction-cols) and atom or bond targets (--atom-targets, "
                           "--bond-targets) are read from a CSV/TSV or SDF file, not from a featurized store or qm9")
    if config.extra_features.any and (data.is_qm9 or (data.path is not None and is_store(data.path))):
        raise GraphTxError("extra features (--features-generators/--features-cols/--atom-properties) and the fingerprint "
                           "kernel (--kernel) are computed from a molecule file (CSV/SDF/.smi), not from a featurized store "
                           "or qm9")
    if data.path is not None and is_store(data.path):
        dataset = load_store(data.path)
        check_store_settings(data.path, dataset, config.featurizer, config.relation, data.max_atoms)
        if dataset.target_names != list(data.targets):
            raise GraphTxError(f"store {data.path} holds targets {dataset.target_names}, not {list(data.targets)}; "
                               f"use --targets {','.join(dataset.target_names)}")
        return dataset, None
    kwargs: Dict[str, Any] = dict(featurizer=config.featurizer, relation=config.relation, cache_dir=data.dataset_cache,
                                  progress=config.train.progress, limits=SizeLimits(max_atoms=data.max_atoms))
    if data.is_qm9:
        return qm9(as_dataset=True, targets=list(data.targets), subset=data.subset, seed=config.train.seed, **kwargs), None
    dataset, split = load_labelled(data.training_path, data.targets, smiles_col=data.smiles_col, delimiter=data.delimiter,
                                   split_col=data.split_col, valid=data.valid, test=data.test, task=config.model.task,
                                   positive_label=data.positive_label, censored=config.train.loss == "bounded_mse",
                                   weight_col=data.weight_col, group_col=data.group_col,
                                   extra_features=config.extra_features, molecule_columns=data.molecule_columns,
                                   level_targets=data.level_targets, **kwargs)
    return dataset, split


def load_calibration_data(config: RunConfig, dataset: MoleculeDataset) -> Optional[MoleculeDataset]:
    """The molecules of ``data.calibration`` (``None`` without one), featurized and given extra
    features like ``dataset``, the run's training data.

    Example:
        >>> from dgl_graphtx.datasets import freesolv_path
        >>> from dgl_graphtx.runs.config import resolve_run_config
        >>> run = resolve_run_config(overrides=[f"data.path={freesolv_path()}", f"data.calibration={freesolv_path()}",
        ...                                     "data.targets=expt", "uncertainty.method=mve", "data.cache=false", "train.progress=false"])
        >>> len(load_calibration_data(run, load_training_data(run)[0]))
        642
    """
    data = config.data
    if data.calibration is None:
        return None
    calibration, _ = load_labelled(data.calibration, data.targets, smiles_col=data.smiles_col, delimiter=data.delimiter,
                                   task=config.model.task, featurizer=config.featurizer,
                                   positive_label=data.positive_label or _positive_class(dataset),
                                   relation=config.relation, cache_dir=data.dataset_cache, progress=config.train.progress,
                                   extra_features=config.extra_features, limits=SizeLimits(max_atoms=data.max_atoms),
                                   molecule_columns=data.molecule_columns)
    if calibration.class_labels != dataset.class_labels:
        raise GraphTxError(f"the calibration file {data.calibration} has the classes {calibration.class_labels}, the training "
                           f"data {dataset.class_labels}; give the same class names")
    return calibration


def _positive_class(dataset: MoleculeDataset) -> Optional[str]:
    """The text class the training data mapped to 1 (``None`` for numeric labels)."""
    return dataset.class_labels[0].positive if dataset.class_labels else None
