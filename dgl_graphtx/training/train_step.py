"""One optimisation step that never waits for the device.

Forward, loss, backward, the gradient norm (clipped when asked) and the optimizer's step, with
nothing read back by the host: whether the loss and the gradients were finite is decided on the
device (in every process alike) and a fused optimizer skips the update there
(:func:`~dgl_graphtx.training.adamw.step_unless`). The host can then queue step after step
while the device works, and the whole step can be captured (a CUDA graph) or compiled.
"""
from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence

import torch

from ..datasets import MoleculeBatch
from .adamw import step_unless
from .hooks import ProcessHooks

#: ``loss(output, batch, rows)``: the training loss of a batch from the module's output.
LossFunction = Callable[[torch.Tensor, MoleculeBatch, Optional[torch.Tensor]], torch.Tensor]
#: ``forward_loss(batch, rows)``: the training loss of a batch (:meth:`TrainStep.forward_loss`).
ForwardLoss = Callable[[MoleculeBatch, Optional[torch.Tensor]], torch.Tensor]
#: ``torch.nn.utils.get_total_norm`` (torch 2.6 on), looked up once rather than every step.
_GET_TOTAL_NORM = getattr(torch.nn.utils, "get_total_norm", None)


class StepResult(NamedTuple):
    """What a step leaves on the device (0-d tensors): its loss, the gradient norm (before
    clipping), whether the loss was not finite in some process, and whether the step was skipped."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    loss_not_finite: torch.Tensor
    skipped: torch.Tensor


class TrainStep:
    """A callable optimisation step over ``module`` (see the module docstring).

    Args:
        module: what the batches run through (the model, or a wrapper such as DDP's).
        loss: the training loss of a batch (:data:`LossFunction`).
        parameters: the parameters the optimizer trains (their gradients are normed and clipped).
        optimizer: the optimizer (fused, to skip on the device).
        grad_clip: max global gradient norm; 0: no clipping (the norm is still computed).
        hooks: how the processes of a run agree (``all_sum``).
        distribution: call ``module(..., distribution=True)`` (a distribution head's loss reads
            the whole output).
        levels: call ``module(..., levels=True)`` (a model with atom- or bond-level targets: the
            loss reads every level's outputs).

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset, collate_molecules
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.training.adamw import adamw
        >>> from dgl_graphtx.training.trainer import masked_loss
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2))
        >>> batch = collate_molecules(MoleculeDataset(["CCO", "CC"], [[1.0], [2.0]], progress=False).__getitems__([0, 1]))
        >>> opt = adamw([{"params": list(model.parameters())}], lr=1e-3, weight_decay=0.0, device="cpu")
        >>> step = TrainStep(model, lambda out, b, rows: masked_loss("regression", out, b.labels, b.mask),
        ...                  list(model.parameters()), opt)
        >>> result = step(batch)
        >>> bool(result.skipped), bool(torch.isfinite(result.loss))
        (False, True)
    """

    def __init__(self, module: torch.nn.Module, loss: LossFunction, parameters: Sequence[torch.nn.Parameter],
                 optimizer: torch.optim.Optimizer, grad_clip: float = 0.0, hooks: Optional[ProcessHooks] = None,
                 distribution: bool = False, levels: bool = False) -> None:
        self.module = module
        self.loss = loss
        self.parameters: List[torch.nn.Parameter] = list(parameters)
        self.optimizer = optimizer
        self.grad_clip = grad_clip
        self.hooks = hooks if hooks is not None else ProcessHooks()
        self.distribution = distribution
        self.levels = levels

    def forward_loss(self, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The training loss of ``batch`` (the forward pass and the loss: what a compiled step compiles)."""
        extra: Any = {"distribution": True} if self.distribution else ({"levels": True} if self.levels else {})
        return self.loss(self.module(batch.graph, batch.relation_graph, **extra), batch, rows)

    def __call__(self, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None,
                 frozen: Sequence[torch.nn.Parameter] = (), forward_loss: Optional[ForwardLoss] = None,
                 force_skip: bool = False) -> StepResult:
        """One step on ``batch`` (on the device already); ``rows``: its dataset rows (per-row
        loss inputs); ``frozen``: parameters left out of this step (their gradients dropped);
        ``forward_loss``: what computes the loss (default :meth:`forward_loss`, e.g. compiled);
        ``force_skip``: run it all but leave the parameters and the optimizer's state as they are."""
        loss = (forward_loss or self.forward_loss)(batch, rows)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        for parameter in frozen:  # AdamW leaves parameters without a gradient alone
            parameter.grad = None
        if self.grad_clip:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip, foreach=True)
        else:
            grad_norm = total_norm([p.grad for p in self.parameters if p.grad is not None])
        local = torch.stack([~torch.isfinite(loss.detach()), ~torch.isfinite(grad_norm)]).double()
        loss_not_finite, grad_not_finite = (self.hooks.all_sum(local) > 0).unbind()  # one decision for all processes
        skipped = loss_not_finite | grad_not_finite
        step_unless(self.optimizer, skipped | force_skip)
        return StepResult(loss.detach(), grad_norm, loss_not_finite, skipped)


def total_norm(tensors: List[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all ``tensors`` together, computed on their device (nothing read back):
    ``torch.nn.utils.get_total_norm`` where torch has it (2.6 on), the same sum of per-tensor
    norms otherwise.

    Example:
        >>> total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
        tensor(5.)
    """
    if _GET_TOTAL_NORM is not None:
        return _GET_TOTAL_NORM(tensors, foreach=True)
    if not tensors:
        return torch.tensor(0.0)
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors)))
