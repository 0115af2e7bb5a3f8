"""Prediction passes captured in CUDA graphs, one per padded batch shape, and replayed.

On a GPU a prediction batch of small molecules costs what the host spends launching its kernels
(docs/scaling.md, "Operations per step"). :class:`CapturedForward` pads each batch to a shape of
a few fixed sizes (:func:`prediction_shape`: molecule slots a power of two, atoms and bonds per
slot rounded up), records the model's pass for that shape once in a CUDA graph, and from then on
copies each batch into the recorded inputs and replays it: one launch per batch. Padding changes
no real molecule's output (:mod:`dgl_graphtx.datasets.padding`); the output rows of the empty
slots are dropped. A batch that does not fit a padded shape, or a shape beyond
:data:`MAX_SHAPES`, runs eagerly.

:class:`~dgl_graphtx.inference.Predictor` uses it on a CUDA device for point predictions and a
model's own uncertainty head (``capture=False`` turns it off; MC dropout, explanations,
embeddings and atom-level targets run eagerly).
"""
from __future__ import annotations

import logging
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

from ..datasets import MoleculeBatch
from ..datasets.collate import leaves
from ..datasets.packed import PackedGraphs
from ..datasets.padding import PaddedShape
from ..nn.dense_blocks import LAYOUT_CACHE
from ..nn.graph_tensors import GraphLike
from ..nn.pair_classes import PAIR_CODES_CACHE

logger = logging.getLogger("dgl_graphtx")

#: Atom slots per molecule are a multiple of this; directed bond slots a multiple of :data:`BOND_STEP`.
ATOM_STEP = 8
BOND_STEP = 16
#: Padded shapes recorded at most; batches of other shapes then run eagerly.
MAX_SHAPES = 24

#: ``record(run)`` -> ``(replay, output)``: ``run()`` computes the output from the recorded inputs;
#: ``replay()`` computes it again into ``output`` from whatever the inputs hold then.
Recorder = Callable[[Callable[[], torch.Tensor]], Tuple[Callable[[], None], torch.Tensor]]


def prediction_shape(graphs: PackedGraphs, positions: Sequence[int]) -> PaddedShape:
    """The padded shape of a prediction batch of the molecules at ``positions`` of ``graphs``:
    molecule slots the next power of two, atom slots (one more than the largest molecule's
    atoms, for the padding node) and directed bond slots rounded up to :data:`ATOM_STEP` and
    :data:`BOND_STEP`.

    Example:
        >>> import dgl
        >>> packed = PackedGraphs.from_graphs([dgl.graph(([0, 1], [1, 0]), num_nodes=2)] * 3)
        >>> prediction_shape(packed, [0, 1, 2])
        PaddedShape(molecules=4, atoms=8, bonds=16, pair_codes=64)
    """
    index = torch.as_tensor(list(positions), dtype=torch.int64)
    atoms, bonds = int(graphs.num_nodes[index].max()), int(graphs.num_edges[index].max())
    return PaddedShape(molecules=1 << (len(positions) - 1).bit_length(), atoms=-(-(atoms + 1) // ATOM_STEP) * ATOM_STEP,
                       bonds=max(1, -(-bonds // BOND_STEP)) * BOND_STEP)


def cuda_graph_recorder(warmup: int = 2) -> Recorder:
    """A :data:`Recorder` that records ``run`` in a CUDA graph after ``warmup`` passes on a side
    stream (allocations, lazy initialisation); every graph it records shares one memory pool."""
    pool = torch.cuda.graph_pool_handle()

    def record(run: Callable[[], torch.Tensor]) -> Tuple[Callable[[], None], torch.Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            output = run()
        return graph.replay, output

    return record


class _Recorded:
    """One recorded shape: the batch whose tensors the pass reads, its replay and its output."""

    def __init__(self, batch: MoleculeBatch, replay: Callable[[], None], output: torch.Tensor) -> None:
        self.batch, self.replay, self.output = batch, replay, output


class CapturedForward:
    """``forward(graph, relation_graph)`` (a tensor per molecule slot) recorded once per padded
    batch shape and replayed (module docstring); called with a padded batch on the host, it
    returns the output of every slot as a new tensor on ``device``, or ``None`` when the shape
    is not (and will not be) recorded: the caller then runs the batch eagerly.

    Args:
        forward: the pass, run under ``torch.inference_mode``.
        device: where the pass runs.
        recorder: how a pass is recorded (default: :func:`cuda_graph_recorder`, which needs a
            CUDA device).
        max_shapes: shapes recorded at most.

    Example (on a GPU)::

        captured = CapturedForward(model.predict, torch.device("cuda"))
        out = captured(pad_batch(batch, prediction_shape(graphs, positions)))  # [slots, outputs]
    """

    def __init__(self, forward: Callable[[GraphLike, GraphLike], torch.Tensor], device: torch.device,
                 recorder: Optional[Recorder] = None, max_shapes: int = MAX_SHAPES) -> None:
        self.forward = forward
        self.device = device
        self.record = recorder if recorder is not None else cuda_graph_recorder()
        self.max_shapes = max_shapes
        self.recorded: Dict[Tuple[int, ...], Optional[_Recorded]] = {}  # None: runs eagerly
        self._said_full = False

    def __call__(self, padded: MoleculeBatch) -> Optional[torch.Tensor]:
        key = tuple(int(t.numel()) for t in leaves(padded))  # a padded shape fixes every tensor's size
        with torch.inference_mode():
            if key not in self.recorded:
                self.recorded[key] = self._record(padded, key)
            recorded = self.recorded[key]
            if recorded is None:
                return None
            for static, new in zip(leaves(recorded.batch), leaves(padded)):
                static.copy_(new, non_blocking=True)
            recorded.replay()
            return recorded.output.clone()

    def _record(self, padded: MoleculeBatch, key: Tuple[int, ...]) -> Optional[_Recorded]:
        if sum(r is not None for r in self.recorded.values()) >= self.max_shapes:
            if not self._said_full:
                logger.info("%d batch shapes recorded for prediction; batches of other shapes run eagerly", self.max_shapes)
                self._said_full = True
            return None
        batch = padded.to(self.device)

        def run() -> torch.Tensor:
            for graph_like in (batch.graph, batch.relation_graph):  # laid out in each pass, from the batch it holds
                graph_like.__dict__.pop(LAYOUT_CACHE, None)
                graph_like.__dict__.pop(PAIR_CODES_CACHE, None)
            return self.forward(batch.graph, batch.relation_graph)

        try:
            replay, output = self.record(run)
        except RuntimeError as err:  # an operation that cannot be recorded: this shape runs eagerly
            logger.warning("the prediction pass for a batch of %d tensors cannot be recorded, it runs eagerly: %s", len(key),
                           str(err).splitlines()[0] if str(err) else type(err).__name__)
            return None
        return _Recorded(batch, replay, output)
