"""Training steps compiled or captured once per size bucket.

A step that never waits for the device (:class:`~dgl_graphtx.training.train_step.TrainStep`) on a
padded batch (:mod:`dgl_graphtx.datasets.padding`: the same tensor shapes for every batch of a
size bucket) can run as one unit:

* :class:`CompiledStep`: ``torch.compile(fullgraph=True, dynamic=False)`` of the forward pass and
  the loss, compiled on the first batch of each padded shape (the time it took is logged), its
  backward traced with it; the fused optimizer's step stays one operation;
* :class:`CapturedStep` (CUDA): the whole step - forward, loss, backward, gradient norm and the
  optimizer's step, with the learning rates as tensors - captured in a CUDA graph on the first
  batch of each padded shape, then replayed: one launch per step instead of thousands.

Anything else (an unpadded batch: larger than the largest bucket; a frozen-backbone epoch's step,
whose parameters change) runs as the plain step.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Dict, Optional, Sequence, Tuple

import torch

from ..datasets import MoleculeBatch
from ..datasets.collate import leaves
from ..errors import ConfigError
from ..nn.dense_blocks import LAYOUT_CACHE
from ..nn.graph_tensors import GraphTensors
from ..nn.pair_classes import PAIR_CODES_CACHE
from .train_step import StepResult, TrainStep

logger = logging.getLogger("dgl_graphtx")

#: How :class:`~dgl_graphtx.training.Trainer` runs its steps (``TrainConfig.step_mode``).
STEP_MODES = ("auto", "eager", "captured", "compiled")
#: Whether this torch compiles the whole step as one graph (verified on 2.13; torch 2.2's compiler
#: cannot trace it: custom autograd functions, attribute lookups in the batch's graph tensors).
COMPILES_THE_STEP = torch.__version__ >= "2.6"


def resolve_step_mode(mode: str, device: torch.device, processes: int = 1, batch_edges: Optional[int] = None) -> str:
    """``eager``, ``captured`` or ``compiled`` for ``TrainConfig.step_mode`` ``mode``: ``auto`` is
    ``captured`` on a CUDA device when one process trains without ``batch_edges``, else ``eager``.

    Example:
        >>> resolve_step_mode("auto", torch.device("cpu")), resolve_step_mode("eager", torch.device("cpu"))
        ('eager', 'eager')
    """
    if mode not in STEP_MODES:
        raise ConfigError(f"step_mode must be one of {STEP_MODES}, got {mode!r}")
    if mode == "auto":
        return "captured" if device.type == "cuda" and processes == 1 and batch_edges is None else "eager"
    if mode == "captured" and device.type != "cuda":
        raise ConfigError(f"step_mode 'captured' records CUDA graphs and needs a CUDA device, got {device}; "
                          "use step_mode 'eager' or 'compiled'")
    if mode == "compiled" and not COMPILES_THE_STEP:
        raise ConfigError(f"step_mode 'compiled' needs torch 2.6 or newer (torch.compile of the whole step); this is torch "
                          f"{torch.__version__}: use step_mode 'eager' or upgrade torch")
    if mode != "eager" and (processes > 1 or batch_edges is not None):
        raise ConfigError(f"step_mode {mode!r} trains on padded size buckets, for one process without batch_edges; "
                          "use step_mode 'eager'")
    return mode


def padded_shape(batch: MoleculeBatch) -> Optional[Tuple[Any, ...]]:
    """The shapes that decide a compiled or captured step (the same for every batch of a size
    bucket), or ``None`` for a batch that is not padded."""
    graph, relation = batch.graph, batch.relation_graph
    if not (isinstance(graph, GraphTensors) and graph.slot_size and isinstance(relation, GraphTensors)):
        return None
    return (graph.num_nodes(), graph.num_edges(), graph.batch_size, relation.num_nodes(), tuple(batch.labels.shape),
            None if relation.pair_codes is None else relation.pair_codes.spd.shape[0])


class CompiledStep:
    """A :class:`~dgl_graphtx.training.train_step.TrainStep` whose forward pass and loss run
    compiled (module docstring); ``backend``: torch.compile's (``inductor`` generates kernels;
    ``aot_eager`` traces the same graphs and runs them op by op, for checks).

    Example:
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.training.adamw import adamw
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2))
        >>> opt = adamw([{"params": list(model.parameters())}], 1e-3, 0.0, "cpu")
        >>> step = CompiledStep(TrainStep(model, lambda out, batch, rows: out.square().mean(), list(model.parameters()), opt))
        >>> step.shapes  # compiled when the first padded batch comes
        {}
    """

    def __init__(self, step: TrainStep, backend: str = "inductor") -> None:
        self.step = step
        self.forward_loss = torch.compile(step.forward_loss, fullgraph=True, dynamic=False, backend=backend)
        self.shapes: Dict[Tuple[Any, ...], float] = {}  # padded shape -> seconds its first step took

    def __call__(self, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None,
                 frozen: Sequence[torch.nn.Parameter] = ()) -> StepResult:
        shape = padded_shape(batch)
        if shape is None:
            return self.step(batch, rows, frozen)
        if shape in self.shapes:
            return self.step(batch, rows, frozen, forward_loss=self.forward_loss)
        start = time.perf_counter()
        result = self.step(batch, rows, frozen, forward_loss=self.forward_loss)
        self.shapes[shape] = time.perf_counter() - start
        logger.info("compiled the training step for padded shape %s in %.1f s (%d shapes)", shape,
                    self.shapes[shape], len(self.shapes))
        return result


class _Capture:
    """One captured step: the CUDA graph, the batch whose tensors it reads, and what it leaves."""

    def __init__(self, graph: Any, batch: MoleculeBatch, rows: Optional[torch.Tensor], result: StepResult) -> None:
        self.graph, self.batch, self.rows, self.result = graph, batch, rows, result


class CapturedStep:
    """A :class:`~dgl_graphtx.training.train_step.TrainStep` captured in a CUDA graph per padded
    shape and replayed (module docstring).

    Capturing needs a few warm-up steps on the first batch of a shape; they run with the
    optimizer's update skipped on the device and the BatchNorm statistics restored after, so they
    change nothing. The learning rates become tensors on the device (the schedule fills them in
    place). The graphs share one memory pool.
    """

    def __init__(self, step: TrainStep, warmup: int = 3) -> None:
        if not torch.cuda.is_available():
            raise ConfigError("captured steps record CUDA graphs and need a CUDA device")
        self.step = step
        self.warmup = warmup
        self.captures: Dict[Tuple[Any, ...], Optional[_Capture]] = {}  # None: could not be captured
        self.pool = torch.cuda.graph_pool_handle()

    def __call__(self, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None,
                 frozen: Sequence[torch.nn.Parameter] = ()) -> StepResult:
        shape = padded_shape(batch)
        if shape is None or frozen:
            return self.step(batch, rows, frozen)
        key = (shape, None if rows is None else tuple(rows.shape))
        if key not in self.captures:
            start = time.perf_counter()
            try:
                self.captures[key] = self._capture(batch, rows)
            except RuntimeError as err:  # an operation that cannot be captured: this shape runs eagerly
                self.captures[key] = None
                logger.warning("the training step for padded shape %s cannot be captured, it runs eagerly: %s",
                               shape, str(err).splitlines()[0] if str(err) else type(err).__name__)
            else:
                logger.info("captured the training step for padded shape %s in %.1f s (%d shapes)", shape,
                            time.perf_counter() - start, len(self.captures))
        capture = self.captures[key]
        if capture is None:
            return self.step(batch, rows, frozen)
        for static, new in zip(leaves(capture.batch), leaves(batch)):
            static.copy_(new, non_blocking=True)
        if rows is not None and capture.rows is not None:
            capture.rows.copy_(rows, non_blocking=True)
        capture.graph.replay()
        return capture.result

    def _capture(self, batch: MoleculeBatch, rows: Optional[torch.Tensor]) -> _Capture:
        optimizer = self.step.optimizer
        device = next(iter(self.step.parameters)).device
        for group in optimizer.param_groups:  # read by the captured update; the schedule fills them in place
            if not torch.is_tensor(group["lr"]):
                group["lr"] = torch.tensor(float(group["lr"]), device=device)
            group["capturable"] = True  # the fused kernel's state lives on the device already
        statistics = {name: b.detach().clone() for name, b in self.step.module.named_buffers()}
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):  # allocations and the optimizer's state, no update
                self.step(batch, rows, force_skip=True)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for name, buffer in self.step.module.named_buffers():
                buffer.copy_(statistics[name])
        for graph_like in (batch.graph, batch.relation_graph):  # laid out again inside the graph, from each batch's data
            graph_like.__dict__.pop(LAYOUT_CACHE, None)
            graph_like.__dict__.pop(PAIR_CODES_CACHE, None)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            result = self.step(batch, rows)
        return _Capture(graph, batch, rows, result)
