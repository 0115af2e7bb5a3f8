"""``Linear``, ``Dropout`` and ``BatchNorm1d`` that dispatch fewer operations per step.

A training step of a small molecule model on a GPU costs what the host spends dispatching
operations, not what the device computes (docs/scaling.md, "Operations per step"). These drop-in
subclasses of the ``torch.nn`` layers compute the same values with fewer dispatches, and keep
their parameters, buffers and state-dict keys:

* :class:`Linear`: the backward pass of ``addmm`` in autograd dispatches nine operations (the
  transposes of a general ``alpha * A B + beta * C``); this layer's backward dispatches four (one
  product per gradient, one sum for the bias), and its forward one (the transposed weight is a
  view kept between steps).
* :class:`Dropout`: ``torch.native_dropout``, one operation forward and one backward, where
  ``F.dropout`` on the CPU dispatches four (the same kernel as on CUDA, one random draw per
  element); on the CPU, large tensors draw their masks four elements per random word instead.
* :class:`BatchNorm1d`: ``torch.native_batch_norm`` in training, one operation; it leaves
  ``num_batches_tracked`` alone, which only a momentum of ``None`` (a cumulative average) reads.

:func:`stacked_linear` applies several layers that read the same input (say, the same projection
in each of a model's layers) as one product.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import torch
from torch import nn

# Whether torch.compile is tracing the caller: torch.compiler's since torch 2.3, dynamo's before.
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._dynamo.is_compiling


class _LinearFunction(torch.autograd.Function):
    """``x W^T + b`` for 2-D ``x`` with a four-operation backward; ``weight_t``, when given, is
    ``W^T`` already (a view of the same storage, kept by :class:`Linear`)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                weight_t: Optional[torch.Tensor] = None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        weight_t = weight.t() if weight_t is None else weight_t
        return x.mm(weight_t) if bias is None else torch.addmm(bias, x, weight_t)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad.mm(weight) if ctx.needs_input_grad[0] else None
        grad_weight = grad.t().mm(x) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias, None


class Linear(nn.Linear):
    """:class:`torch.nn.Linear` with a backward pass of fewer operations (module docstring);
    inputs of other than two dimensions, and ``torch.compile``'s tracing (it fuses the backward
    itself, and torch before 2.3 cannot trace the custom backward), take ``nn.Linear``'s own path.

    Example:
        >>> layer = Linear(4, 2)
        >>> x = torch.randn(3, 4)
        >>> torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
        True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or _is_compiling():
            return super().forward(x)
        return _LinearFunction.apply(x, self.weight, self.bias, self._transposed_weight())

    def _transposed_weight(self) -> torch.Tensor:
        """``W^T`` as a view of the weight's storage, made again only when the weight's storage,
        shape or type changes (``.to()``, ``load_state_dict(assign=True)``; optimizers update it
        in place): the transpose is then not an operation of every step."""
        weight = self.weight
        key = (weight.data_ptr(), weight.shape, weight.stride(), weight.dtype, weight.device)
        cached = self.__dict__.get("_weight_t")
        if cached is None or cached[0] != key:
            cached = (key, weight.detach().t())
            self.__dict__["_weight_t"] = cached
        return cached[1]


def stacked_linear(layers: Sequence[nn.Linear], x: torch.Tensor) -> torch.Tensor:
    """``torch.cat([layer(x) for layer in layers], -1)`` as one product: the layers' weights side
    by side (their parameters stay their own; gradients flow back to each).

    Example:
        >>> layers, x = [Linear(4, 3), Linear(4, 2)], torch.randn(5, 4)
        >>> torch.allclose(stacked_linear(layers, x), torch.cat([layer(x) for layer in layers], -1))
        True
    """
    biases = [layer.bias for layer in layers]
    if any(b is None for b in biases) and not all(b is None for b in biases):
        raise ValueError("stacked_linear needs layers that all have a bias or all have none")
    weight = side_by_side([layer.weight for layer in layers])
    bias = None if biases[0] is None else side_by_side(biases)
    if x.dim() != 2 or _is_compiling():
        return torch.nn.functional.linear(x, weight, bias)
    return _LinearFunction.apply(x, weight, bias)


def side_by_side(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(tensors)``; stacked and flattened when they have one shape, whose backward
    pass is one ``unbind`` rather than a slice per tensor.

    Example:
        >>> side_by_side([torch.ones(2, 3), torch.zeros(2, 3)]).shape
        torch.Size([4, 3])
    """
    if all(t.shape == tensors[0].shape for t in tensors):
        return torch.stack(list(tensors)).flatten(0, 1)
    return torch.cat(list(tensors))


#: Tensors of at least this many elements draw their dropout masks on the CPU from 64-bit random
#: words, four 16-bit lanes each (:class:`Dropout`); smaller ones with ``native_dropout``.
LANE_DROPOUT_MIN = 1 << 17


class _LaneDropout(torch.autograd.Function):
    """Dropout whose mask is drawn as 16-bit lanes of 64-bit random words: a quarter of the draws
    of ``native_dropout`` (one per element), whose random numbers are most of its time on a CPU."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, p: float) -> torch.Tensor:
        threshold = round(p * 65536) - 32768  # a lane below it is dropped: probability p to 1 / 65536
        words = torch.empty(-(-x.numel() // 4), dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
        keep = words.view(torch.int16)[: x.numel()].view(x.shape) >= threshold
        ctx.save_for_backward(keep)
        ctx.scale = 65536 / (32768 - threshold)  # 1 / (1 - p) for the p drawn
        return torch.mul(x, keep).mul_(ctx.scale)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[Optional[torch.Tensor], None]:
        (keep,) = ctx.saved_tensors
        return torch.mul(grad, keep).mul_(ctx.scale), None


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` as one ``native_dropout`` operation (module docstring); on the
    CPU, tensors of :data:`LANE_DROPOUT_MIN` elements or more draw a quarter of the random numbers
    (16-bit lanes of 64-bit words; ``p`` then counts in steps of ``1 / 65536``).

    Example:
        >>> drop = Dropout(0.5).train()
        >>> sorted(set(drop(torch.ones(1000)).tolist())), sorted(set(drop(torch.ones(LANE_DROPOUT_MIN)).tolist()))
        ([0.0, 2.0], [0.0, 2.0])
        >>> drop.eval()(torch.ones(3)).tolist()
        [1.0, 1.0, 1.0]
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return torch.zeros_like(x)
        if x.device.type == "cpu" and x.numel() >= LANE_DROPOUT_MIN and not _is_compiling():
            return _LaneDropout.apply(x, self.p)
        return torch.native_dropout(x, self.p, True)[0]


class BatchNorm1d(nn.BatchNorm1d):
    """:class:`torch.nn.BatchNorm1d` whose training step on ``[N, C]`` inputs is one
    ``native_batch_norm`` operation (module docstring); other cases take its own path. With a
    ``mask`` ``[N]`` (the real rows of a padded batch), the statistics and the running averages
    are those of the real rows only, as if the others were not there.

    Example:
        >>> bn, reference = BatchNorm1d(3), torch.nn.BatchNorm1d(3)
        >>> x = torch.randn(8, 3)
        >>> torch.allclose(bn(x), reference(x)), torch.allclose(bn.running_var, reference.running_var)
        (True, True)
        >>> padded = torch.cat([x, torch.randn(2, 3)])
        >>> mask = torch.arange(10) < 8
        >>> torch.allclose(bn(padded, mask)[:8], reference(x), atol=1e-6), torch.allclose(bn.running_mean, reference.running_mean)
        (True, True)
    """

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        fast = self.training and self.track_running_stats and self.momentum is not None and x.dim() == 2
        if mask is not None and self.training:
            if not fast:
                raise ValueError("a masked BatchNorm1d trains on [N, C] inputs with running statistics and a momentum")
            return self._masked(x, mask)
        if not fast:
            return super().forward(x)
        if x.shape[0] < 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(x.shape)}")
        return torch.native_batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, True,
                                       float(self.momentum or 0.0), self.eps)[0]

    def _masked(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Training step over the rows of ``mask`` (the others normalised alike, counting for nothing)."""
        assert self.running_mean is not None and self.running_var is not None and self.momentum is not None
        weight = mask.to(x.dtype)[:, None]
        count = weight.sum()
        mean = (x * weight).sum(0) / count
        centred = x - mean
        var = (centred.square() * weight).sum(0) / count
        with torch.no_grad():  # the running averages, as native_batch_norm keeps them (unbiased variance)
            self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
            unbiased = var.detach() * count / (count - 1).clamp_min(1)
            self.running_var.lerp_(unbiased.to(self.running_var.dtype), self.momentum)
        out = centred * torch.rsqrt(var + self.eps)
        return out * self.weight + self.bias if self.affine else out


def batch_norm(norm: nn.Module, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """``norm(x)``, over the real rows ``mask`` of a padded batch when it is a :class:`BatchNorm1d`
    (a normalisation per row, such as LayerNorm, needs no mask)."""
    return norm(x, mask) if mask is not None and isinstance(norm, BatchNorm1d) else norm(x)
