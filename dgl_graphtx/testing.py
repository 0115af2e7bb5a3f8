"""Checks for your own layers and models, the ones the package's tests run on every variant (as
e3nn's ``assert_equivariant`` and PyG's testing helpers):

* :func:`assert_carriers_agree`: the same outputs and gradients on DGL graphs and on the
  plain-tensor carriers (:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`);
* :func:`assert_permutation_equivariant`: renumbering the nodes and reordering the edges of a
  graph moves node and edge outputs along and leaves graph outputs unchanged;
* :func:`assert_rigid_motion_invariant`: outputs computed from 3-D coordinates do not change under
  a rotation and translation of the coordinates;
* :class:`OperationCounter` and :func:`assert_no_host_sync`: the ATen operations a step
  dispatches, and none that waits for the device to read a value back.

Each takes a function from graphs (or coordinates) and tensors to a tensor or a (nested) sequence
of tensors, so a layer, a whole model or any step around them can be checked. Compare in float64
(``module.double()``): the defaults tolerances are float64's.
"""
from __future__ import annotations

import os
import traceback
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import dgl

from .nn.graph_tensors import GraphTensors

#: What a checked function returns: a tensor, or a (nested) sequence of tensors.
Outputs = Union[torch.Tensor, Sequence["Outputs"]]


def flatten_outputs(outputs: Outputs) -> List[torch.Tensor]:
    """The tensors of ``outputs``, depth first.

    Example:
        >>> [t.item() for t in flatten_outputs((torch.tensor(1), [torch.tensor(2), torch.tensor(3)]))]
        [1, 2, 3]
    """
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for item in outputs for t in flatten_outputs(item)]


@dataclass
class CarrierRun:
    """What one carrier gave: the outputs (flattened) and the gradients of a fixed weighted sum of
    them with respect to the inputs, then the parameters (``None`` where one does not reach it)."""

    outputs: List[torch.Tensor]
    grads: Tuple[Optional[torch.Tensor], ...]


def run_with_gradients(fn: Callable[..., Outputs], graphs: Sequence[object], inputs: Sequence[torch.Tensor] = (),
                       parameters: Sequence[torch.Tensor] = (), seed: Optional[int] = None) -> CarrierRun:
    """``fn(*graphs, *inputs)``, and the gradients of ``sum_k (w_k * output_k).sum()`` (``w_k``
    evenly spaced in ``[-1, 1]``, so every output element counts differently) with respect to
    the floating-point ``inputs`` and ``parameters``. ``seed`` seeds torch's generator first
    (the same dropout masks on each run).

    Example:
        >>> w = torch.tensor([2.0], requires_grad=True)
        >>> run = run_with_gradients(lambda x: x * w, [], [torch.ones(3)], [w])
        >>> run.grads[1]  # d/dw of (x*w) . [-1, 0, 1]
        tensor([0.])
    """
    if seed is not None:
        torch.manual_seed(seed)
    inputs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    outputs = flatten_outputs(fn(*graphs, *inputs))
    targets = [x for x in inputs if x.requires_grad] + list(parameters)
    loss = sum(((out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype, device=out.device).view_as(out)).sum()
                for out in outputs if out.is_floating_point() and out.requires_grad), torch.zeros(()))
    if not targets or not loss.requires_grad:
        return CarrierRun([out.detach() for out in outputs], tuple(None for _ in targets))
    grads = torch.autograd.grad(loss, targets, allow_unused=True)
    return CarrierRun([out.detach() for out in outputs], grads)


def assert_same_runs(got: CarrierRun, expected: CarrierRun, atol: float = 1e-10, grad_atol: float = 1e-8) -> None:
    """Equal outputs (to ``atol``) and gradients (to ``grad_atol``), and gradients present at the
    same places.

    Example:
        >>> run = CarrierRun([torch.ones(2)], (None,))
        >>> assert_same_runs(run, CarrierRun([torch.ones(2) + 1e-12], (None,)))
    """
    assert len(got.outputs) == len(expected.outputs), f"{len(got.outputs)} outputs, expected {len(expected.outputs)}"
    for i, (out, ref) in enumerate(zip(got.outputs, expected.outputs)):
        torch.testing.assert_close(out, ref, atol=atol, rtol=0, msg=lambda m: f"output {i}: {m}")
    assert len(got.grads) == len(expected.grads)
    for i, (grad, ref_grad) in enumerate(zip(got.grads, expected.grads)):
        assert (grad is None) == (ref_grad is None), f"gradient {i} reaches only one of the two runs"
        if grad is not None:
            torch.testing.assert_close(grad, ref_grad, atol=grad_atol, rtol=0, msg=lambda m: f"gradient {i}: {m}")


def assert_carriers_agree(fn: Callable[..., Outputs], graphs: Sequence[dgl.DGLGraph], inputs: Sequence[torch.Tensor] = (),
                          parameters: Sequence[torch.Tensor] = (), seed: Optional[int] = None,
                          atol: float = 1e-10, grad_atol: float = 1e-8) -> CarrierRun:
    """Check that ``fn(*graphs, *inputs)`` gives the same outputs, and the same gradients with
    respect to ``inputs`` and ``parameters``, on DGL graphs and on their
    :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` (with the dense-block geometry, as the
    tensor path's batches carry it). Returns the DGL graphs' run. With dropout, pass ``seed``.
    ``fn`` runs twice, DGL graphs first: what it changes (BatchNorm's running statistics in train
    mode) must not feed its own outputs.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.nn import GRPEAttention
        >>> _, rel = smiles_to_graphs("CC(=O)O")
        >>> layer = GRPEAttention(8, 2).double()
        >>> x = torch.randn(rel.num_nodes(), 8, dtype=torch.float64)
        >>> run = assert_carriers_agree(lambda g, x: layer(g, x, get_attention=True), [rel], [x],
        ...                             list(layer.parameters()))
        >>> [tuple(t.shape) for t in run.outputs]
        [(4, 8), (16, 2)]
    """
    parameters = list(parameters)
    expected = run_with_gradients(fn, graphs, inputs, parameters, seed)
    carriers = [GraphTensors.from_graph(graph, blocks=True) for graph in graphs]
    assert_same_runs(run_with_gradients(fn, carriers, inputs, parameters, seed), expected, atol, grad_atol)
    return expected


def permute_graph(graph: dgl.DGLGraph, perm: torch.Tensor, edge_order: Optional[torch.Tensor] = None) -> dgl.DGLGraph:
    """``graph`` renumbered: new node ``a`` is old node ``perm[a]``, and the edges are listed in
    ``edge_order`` (default: as they are); all node and edge data are carried along. One graph,
    not a batch.

    Example:
        >>> g = dgl.graph(([0, 1], [1, 2]))
        >>> g.ndata["x"] = torch.tensor([10, 11, 12])
        >>> p = permute_graph(g, torch.tensor([2, 0, 1]))
        >>> p.ndata["x"].tolist(), [t.tolist() for t in p.edges()]
        ([12, 10, 11], [[1, 2], [2, 0]])
    """
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(len(perm))
    edge_order = torch.arange(graph.num_edges()) if edge_order is None else edge_order
    src, dst = (t.long() for t in graph.edges())
    new = dgl.graph((inverse[src[edge_order]], inverse[dst[edge_order]]), num_nodes=graph.num_nodes(), idtype=torch.int64)
    for key, value in graph.edata.items():
        new.edata[key] = value[edge_order]
    for key, value in graph.ndata.items():
        new.ndata[key] = value[perm]
    return new


def assert_permutation_equivariant(fn: Callable[..., Outputs], graph: dgl.DGLGraph, node_inputs: Sequence[torch.Tensor],
                                   kinds: Sequence[str], seed: int = 0, atol: float = 1e-9) -> None:
    """Check that ``fn(graph, *node_inputs)`` follows a random renumbering of the nodes and
    reordering of the edges of ``graph`` (:func:`permute_graph`, drawn from ``seed``), the rows of
    ``node_inputs`` moved with their nodes. ``kinds`` says for each output (flattened) what its
    rows are: ``"node"`` (they move with the nodes), ``"edge"`` (with the edges) or ``"graph"``
    (they stay).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.nn import GRPEAttention
        >>> _, rel = smiles_to_graphs("CC(=O)O")
        >>> layer = GRPEAttention(8, 2).double().eval()
        >>> x = torch.randn(rel.num_nodes(), 8, dtype=torch.float64)
        >>> assert_permutation_equivariant(lambda g, x: layer(g, x, get_attention=True), rel, [x], ["node", "edge"])
    """
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(graph.num_nodes(), generator=gen)
    edge_order = torch.randperm(graph.num_edges(), generator=gen)
    with torch.no_grad():
        outputs = flatten_outputs(fn(graph, *node_inputs))
        permuted = flatten_outputs(fn(permute_graph(graph, perm, edge_order), *(x[perm] for x in node_inputs)))
    assert len(outputs) == len(permuted) == len(kinds), f"{len(outputs)} outputs, {len(kinds)} kinds"
    for i, (out, out_p, kind) in enumerate(zip(outputs, permuted, kinds)):
        moved = {"node": lambda t: t[perm], "edge": lambda t: t[edge_order], "graph": lambda t: t}[kind](out)
        torch.testing.assert_close(out_p, moved, atol=atol, rtol=0, msg=lambda m: f"output {i} ({kind}): {m}")


def random_rigid_motion(seed: int = 0, dtype: torch.dtype = torch.float64) -> Tuple[torch.Tensor, torch.Tensor]:
    """A random rotation matrix ``[3, 3]`` (determinant 1) and translation ``[3]`` drawn from ``seed``.

    Example:
        >>> rotation, shift = random_rigid_motion(1)
        >>> torch.allclose(rotation @ rotation.T, torch.eye(3, dtype=torch.float64)), round(torch.det(rotation).item(), 6)
        (True, 1.0)
    """
    gen = torch.Generator().manual_seed(seed)
    q, r = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r))  # unique QR: a uniformly random orthogonal matrix
    if torch.det(q) < 0:
        q = q[:, [1, 0, 2]]
    return q.to(dtype), (5 * torch.randn(3, generator=gen, dtype=torch.float64)).to(dtype)


def assert_rigid_motion_invariant(fn: Callable[[torch.Tensor], Outputs], positions: torch.Tensor, seed: int = 0,
                                  atol: float = 1e-9) -> None:
    """Check that ``fn(positions)`` (``positions``: ``[N, 3]`` coordinates) gives the same outputs
    for the coordinates rotated and translated (:func:`random_rigid_motion`, drawn from ``seed``).
    Let ``fn`` build whatever it reads from the coordinates (relation graphs, distances), so that
    the whole path from coordinates to outputs is checked.

    Example:
        >>> pos = torch.randn(5, 3, dtype=torch.float64)
        >>> assert_rigid_motion_invariant(lambda p: torch.cdist(p, p), pos)
    """
    rotation, shift = random_rigid_motion(seed, positions.dtype)
    with torch.no_grad():
        outputs = flatten_outputs(fn(positions))
        moved = flatten_outputs(fn(positions @ rotation.T + shift))
    assert len(outputs) == len(moved)
    for i, (out, out_m) in enumerate(zip(outputs, moved)):
        torch.testing.assert_close(out_m, out, atol=atol, rtol=0, msg=lambda m: f"output {i}: {m}")


#: ATen operations that make the host wait for the device to read values back: the one behind
#: ``.item()``, ``bool()``, ``int()``, ``float()``, and those whose output size depends on the data.
HOST_SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "masked_select", "_unique2", "unique_dim",
                           "unique_consecutive", "bincount"})
#: Where the package's files are (sites of host reads are named relative to it).
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: Tensor methods that copy values to the host without an ATen operation on the CPU.
HOST_READ_METHODS = frozenset({"tolist", "numpy", "__array__"})


class HostSyncError(AssertionError):
    """An operation read a value back from the device inside :func:`assert_no_host_sync`."""


class OperationCounter:
    """Counts the ATen operations dispatched inside ``with``, and those that read values back to the
    host (:data:`HOST_SYNC_OPS`, boolean-mask indexing, :data:`HOST_READ_METHODS`), each with where
    in the package it came from; ``forbid=True`` raises :class:`HostSyncError` at the first read.
    On the CPU nothing waits, but the same operations on a GPU would: this is how the tests check,
    without a GPU, that a step never waits for one.

    Example:
        >>> x = torch.randn(4)
        >>> with OperationCounter() as counter:
        ...     y = (x * 2).sum()
        ...     _ = bool(y > 0)
        >>> counter.operations, dict(counter.syncs)
        (4, {'_local_scalar_dense': 1})
    """

    def __init__(self, forbid: bool = False) -> None:
        self.forbid = forbid
        self.operations = 0
        self.syncs: Counter = Counter()
        self.sites: List[str] = []
        counter = self

        class Dispatch(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                counter.operations += 1
                name = func.__name__.split(".")[0]
                if name in HOST_SYNC_OPS or (name in ("index", "index_put", "index_put_") and _bool_indices(args)):
                    counter._sync(name)
                return func(*args, **(kwargs or {}))

        class Function(TorchFunctionMode):
            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                if getattr(func, "__name__", "") in HOST_READ_METHODS:
                    counter._sync(func.__name__)
                return func(*args, **(kwargs or {}))

        self._modes = (Function(), Dispatch())

    def _sync(self, name: str) -> None:
        frames = [f for f in traceback.extract_stack()[:-2] if f.filename.startswith(_PACKAGE) and f.filename != __file__]
        site = f"{frames[-1].filename[len(_PACKAGE):]}:{frames[-1].lineno}" if frames else "outside the package"
        self.syncs[name] += 1
        self.sites.append(f"{name} at {site}")
        if self.forbid:
            raise HostSyncError(f"{name} reads a value back from the device at {site}")

    def __enter__(self) -> "OperationCounter":
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)


def _bool_indices(args: Sequence[Any]) -> bool:
    indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else []
    return any(getattr(i, "dtype", None) == torch.bool for i in indices)


def assert_no_host_sync(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, failing with :class:`HostSyncError` (naming the operation and
    the place) if it reads any value back from the device (see :class:`OperationCounter`).

    Example:
        >>> assert_no_host_sync(lambda x: x.relu().sum(), torch.randn(3)).shape
        torch.Size([])
        >>> assert_no_host_sync(lambda x: float(x.sum()), torch.randn(3))
        Traceback (most recent call last):
        ...
        dgl_graphtx.testing.HostSyncError: _local_scalar_dense reads a value back from the device at outside the package
    """
    with OperationCounter(forbid=True):
        return fn(*args, **kwargs)


def operation_counts(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Tuple[int, Dict[str, int]]:
    """``(operations, host syncs by operation)`` of one call of ``fn``.

    Example:
        >>> operation_counts(lambda x: x.nonzero(), torch.tensor([0, 1]))
        (1, {'nonzero': 1})
    """
    with OperationCounter() as counter:
        fn(*args, **kwargs)
    return counter.operations, dict(counter.syncs)

