"""Predictions with an uncertainty: a distribution head's std, the spread of MC-dropout passes,
and calibrated probabilities (temperature) for classification."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, NamedTuple, Optional, Protocol, Sequence, TypeVar

import torch
from torch import nn

from .methods import predictive_moments, uncertainty_method

#: Seed of the dropout masks of MC-dropout passes (predictions repeat exactly on CPU).
MC_SEED = 0


class ModelTaskSettings(Protocol):
    """The settings of a model's task these functions read (of a :class:`~dgl_graphtx.models.ModelConfig`)."""

    @property
    def task(self) -> str: ...

    @property
    def uncertainty_head(self) -> str: ...


class ModuleModes(Protocol):
    """The parts of an :class:`torch.nn.Module` that switch and read its modes."""

    training: bool

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...

    def modules(self) -> Iterator[nn.Module]: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...


class MoleculeModelLike(ModuleModes, Protocol):
    """What these functions use of a :class:`~dgl_graphtx.models.MoleculeModel` (the models layer
    sits above this one, so it is described here rather than imported)."""

    target_std: torch.Tensor

    @property
    def config(self) -> ModelTaskSettings: ...

    def __call__(self, graph: Any, relation_graph: Any, *, distribution: bool = False) -> torch.Tensor: ...

    def predict(self, graph: Any, relation_graph: Any) -> torch.Tensor: ...

    def to_target_space(self, output: torch.Tensor) -> torch.Tensor: ...


#: A module, of whatever class, that :func:`dropout_active` hands back.
ModuleT = TypeVar("ModuleT", bound=ModuleModes)


class UncertainOutput(NamedTuple):
    """Predictions ``[B, T]`` in target units (probabilities for classification) and their std
    (``None`` when the method gives none)."""

    mean: torch.Tensor
    std: Optional[torch.Tensor]


@contextlib.contextmanager
def dropout_active(model: ModuleT) -> Iterator[ModuleT]:
    """``model`` with dropout sampling (train mode) but batch statistics frozen (BatchNorm in eval
    mode); the previous modes are restored afterwards.

    Example:
        >>> net = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1d(2)).eval()
        >>> with dropout_active(net):
        ...     [m.training for m in net]
        [True, False]
        >>> net.training
        False
    """
    modes = {m: m.training for m in model.modules()}
    model.train()
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()
    try:
        yield model
    finally:
        for module, mode in modes.items():
            module.train(mode)


@torch.no_grad()
def predict_with_uncertainty(model: MoleculeModelLike, graph, relation_graph, method: str = "none", mc_samples: int = 20,
                             temperature: Optional[Sequence[float]] = None) -> UncertainOutput:
    """Predictions of a :class:`~dgl_graphtx.models.MoleculeModel` for one batch, with the std of
    ``method`` (its ``std`` in :data:`~dgl_graphtx.uncertainty.methods.UNCERTAINTY_METHODS`): the
    model's distribution head (``mve`` / ``evidential``), or the spread of ``mc_samples`` passes
    with dropout on (``mc_dropout``); other methods give no std here.
    Classification logits are divided by ``temperature`` (per target) before the sigmoid.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, uncertainty_head="mve"))
        >>> g, rel = smiles_to_graphs("CCO")
        >>> out = predict_with_uncertainty(model, g, rel, "mve")
        >>> out.mean.shape, bool((out.std > 0).all())
        (torch.Size([1, 1]), True)
    """
    config = model.config
    source = uncertainty_method(method).std
    head = source == "head" and method == config.uncertainty_head
    if source != "dropout" and not head and temperature is None:
        return UncertainOutput(model.predict(graph, relation_graph), None)  # the plain path, unchanged
    was_training = model.training
    model.eval()
    try:
        if source == "dropout":
            with torch.random.fork_rng(devices=_cuda_devices(model)), dropout_active(model):
                torch.manual_seed(MC_SEED)
                passes = torch.stack([_to_output(model, model(graph, relation_graph), temperature) for _ in range(mc_samples)])
            return UncertainOutput(passes.mean(0), passes.std(0, unbiased=False))
        if head:
            moments = predictive_moments(config.uncertainty_head, model(graph, relation_graph, distribution=True))
            return UncertainOutput(model.to_target_space(moments.mean), moments.variance.sqrt() * model.target_std)
        return UncertainOutput(_to_output(model, model(graph, relation_graph), temperature), None)
    finally:
        model.train(was_training)


def _to_output(model: MoleculeModelLike, output: torch.Tensor, temperature: Optional[Sequence[float]]) -> torch.Tensor:
    if temperature is not None and model.config.task == "classification":
        output = output / torch.as_tensor(temperature, dtype=output.dtype, device=output.device)
    return model.to_target_space(output)


def _cuda_devices(model: ModuleModes) -> list:
    return [p.device.index or 0 for p in list(model.parameters())[:1] if p.device.type == "cuda"]
