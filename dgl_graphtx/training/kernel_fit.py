"""Fitting a trained model's fingerprint kernel (:mod:`dgl_graphtx.models.kernel`): kernel ridge
regression on the training part's count fingerprints and labels, its ridge and the network's blend
weight chosen on the validation part against the network's own validation predictions; the fitted
kernel is attached to the model, whose predictions are then the blend."""
from __future__ import annotations

import logging
from typing import Any, Dict, Tuple

import torch
from torch.utils.data import Dataset, Subset

from ..errors import ConfigError
from ..featurize.descriptors import kernel_segments
from ..featurize.molecule import KERNEL_FINGERPRINTS
from ..models.kernel import FingerprintKernel, KernelFit, describe_fit, few_validation_warning, fit_fingerprint_kernel
from .trainer import Trainer, dataset_labels

logger = logging.getLogger("dgl_graphtx")


def dataset_fingerprints(dataset: Dataset) -> torch.Tensor:
    """The kernel's count fingerprints ``[M, F]`` of a :class:`~dgl_graphtx.datasets.MoleculeDataset`
    or a ``Subset`` of one (attached by :func:`~dgl_graphtx.datasets.add_extra_features` with a
    ``kernel`` spec).

    Example:
        >>> from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, add_extra_features
        >>> ds = MoleculeDataset(["C", "CC", "CCO"], [[1.0], [2.0], [3.0]], progress=False)
        >>> _ = add_extra_features(ds, ExtraFeatures(kernel="morgan_counts:radius=1:size=8"), ["C", "CC", "CCO"])
        >>> dataset_fingerprints(Subset(ds, [2])).sum().item()
        6
    """
    if isinstance(dataset, Subset):
        return dataset_fingerprints(dataset.dataset)[torch.as_tensor(dataset.indices, dtype=torch.int64)]
    stored = getattr(getattr(dataset, "graphs", None), "graph_data", {})
    if KERNEL_FINGERPRINTS not in stored:
        raise ConfigError("the dataset holds no fingerprints for the fingerprint kernel: build it with "
                          "ExtraFeatures(kernel=...) (see dgl_graphtx.datasets.add_extra_features)")
    return stored[KERNEL_FINGERPRINTS]


def dataset_kernel_segments(dataset: Dataset) -> Tuple[int, ...]:
    """The bins of each count fingerprint held side by side in the dataset's kernel fingerprints,
    from the spec :func:`~dgl_graphtx.datasets.add_extra_features` recorded on it (``()``: one
    fingerprint, or none recorded).

    Example:
        >>> from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, add_extra_features
        >>> ds = MoleculeDataset(["C", "CC"], [[1.0], [2.0]], progress=False)
        >>> _ = add_extra_features(ds, ExtraFeatures(kernel="morgan_counts:size=8+atom_pair_counts:size=4"), ["C", "CC"])
        >>> dataset_kernel_segments(Subset(ds, [1]))
        (8, 4)
    """
    values = getattr(_root(dataset), "extra_values", None)
    spec = values.spec.kernel if values is not None else ""
    return kernel_segments(spec) if spec else ()


def fit_kernel(trainer: Trainer, train: Dataset, valid: Dataset, seed: int = 0) -> KernelFit:
    """Fit the fingerprint kernel of ``trainer.model`` (trained, at its selected epoch) on
    ``train``, choose its ridge and blend weight on ``valid``, and attach it to the model (the
    mean of one similarity per count fingerprint of the dataset's kernel spec,
    :func:`dataset_kernel_segments`).

    Example:
        >>> from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, add_extra_features, freesolv
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.training import TrainConfig
        >>> frame = freesolv().head(60)
        >>> ds = MoleculeDataset(list(frame.smiles), frame[["expt"]].values, progress=False)
        >>> _ = add_extra_features(ds, ExtraFeatures(kernel="morgan_counts"), list(frame.smiles))
        >>> trainer = Trainer(build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)),
        ...                   TrainConfig(epochs=1, progress=False))
        >>> fit = fit_kernel(trainer, Subset(ds, range(40)), Subset(ds, range(40, 60)))
        >>> trainer.model.config.kernel_references
        60
    """
    model = trainer.model
    if model.kernel is not None:
        raise ConfigError("the model already has a fingerprint kernel")
    network = torch.from_numpy(trainer.predict(valid))
    fit = fit_fingerprint_kernel(dataset_fingerprints(train), dataset_labels(train), dataset_fingerprints(valid),
                                 dataset_labels(valid), network, seed=seed,
                                 probabilities=model.config.task == "classification",
                                 segments=dataset_kernel_segments(train))
    model.attach_kernel(FingerprintKernel.from_fit(fit))
    names = getattr(_root(train), "target_names", None)
    logger.info("%s", describe_fit(fit, names))
    warning = few_validation_warning(fit, names)
    if warning is not None:
        logger.warning("%s", warning)
    return fit


def kernel_summary(fit: KernelFit) -> Dict[str, Any]:
    """The fit in plain numbers (for ``metrics.json``): per task the network's weight, the ridge,
    the validation RMSE of the network, the kernel and the blend (their mean log-loss for
    classification, ``valid_log_loss_*``; ``None`` where unused), and the labelled validation
    molecules they were measured on.

    Example:
        >>> fit = KernelFit(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), torch.tensor([0.5]), [0.1],
        ...                 [1.0], [0.25], [0.16], [12])
        >>> summary = kernel_summary(fit)
        >>> summary["network_weight"], summary["ridge"], summary["valid_molecules"]
        ([0.5], [0.1], [12])
        >>> summary["valid_rmse_network"], summary["valid_rmse_kernel"], summary["valid_rmse_blend"]
        ([1.0], [0.5], [0.4])
    """
    def shown(values):
        return [None if v != v else round(v if fit.log_loss else v ** 0.5, 6) for v in values]

    measure = "log_loss" if fit.log_loss else "rmse"
    return {"network_weight": [round(w, 4) for w in fit.weight.tolist()], "ridge": [None if a != a else a for a in fit.alphas],
            f"valid_{measure}_network": shown(fit.validation_network), f"valid_{measure}_kernel": shown(fit.validation_kernel),
            f"valid_{measure}_blend": shown(fit.validation_blend), "valid_molecules": list(fit.validation_counts)}


def _root(dataset: Dataset) -> Dataset:
    return _root(dataset.dataset) if isinstance(dataset, Subset) else dataset
