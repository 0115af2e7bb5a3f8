"""Per-atom contributions to a prediction by integrated gradients (Sundararajan, Taly & Yan, ICML
2017) on the atom embeddings, batched over molecules and integration steps.

The embedding ``e_i`` of each atom (the atom encoder's output, ``model.atom_encoder``) moves on the
straight line from a baseline ``e'_i`` to its value, and atom ``i`` contributes

    c_i = (e_i - e'_i) . integral_0^1 df/de_i (e' + a (e - e')) da

to the output ``f``. The contributions are *complete*: they sum to ``f(e) - f(e')``, the prediction
minus the baseline prediction. Everything else the model reads (bonds, random-walk encodings, extra
features, the relation graph) stays as it is. Baselines:

* ``zero``: ``e' = 0``, the same molecule with atoms that carry no identity;
* ``mean``: every atom at the mean embedding of its molecule's atoms (an atom's contribution is
  what its difference from the molecule's average atom does);
* ``auto`` (the default): ``mean`` for the pre-LN transformers (GRPE, MoireGT, the baselines),
  whose first step normalises the atom inputs: on the path from 0 that LayerNorm turns within
  ``|a e| ~ sqrt(eps)`` from its value at 0 to nearly its value at ``e``, a spike that no few-node
  rule integrates (the sums miss by several times the prediction); ``zero`` for the GPS models
  (Gradformer, the default model), where it is smooth and ranks atoms better (docs/insight.md).

The integral is a Gauss-Lobatto rule of ``steps`` nodes on ``[0, 1]``: both ends are nodes, so the
one batched pass that evaluates the gradients also gives ``f(e')`` and ``f(e)``, and the rule is exact
for integrands that are polynomials of degree ``2 steps - 3``. Every molecule of a batch appears
``steps`` times, once per node, and one forward and one backward pass cover them all; molecules do
not interact (the model is in eval mode), so each gets its own gradients.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, NamedTuple, Optional, Tuple

import numpy as np
import torch
from numpy.polynomial import legendre

from ..datasets import PackedGraphs
from ..models import MoleculeModel
from ..nn.graph_tensors import Device, GraphLike, on_device

#: Gauss-Lobatto nodes of ``explain``'s integral by default; docs/insight.md has the completeness
#: gaps and speed measured for 2-16 steps.
DEFAULT_STEPS = 4
#: Where the path starts (see the module's notes).
BASELINES = ("auto", "zero", "mean")


def chosen_baseline(model: MoleculeModel, baseline: str = "auto") -> str:
    """``baseline``, with ``auto`` resolved for ``model``: ``mean`` for a pre-LN transformer,
    ``zero`` for a GPS model.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> grpe, gradformer = (build_model(get_preset(name, num_layers=1).model) for name in ("grpe", "gradformer"))
        >>> chosen_baseline(grpe), chosen_baseline(gradformer)
        ('mean', 'zero')
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    if baseline != "auto":
        return baseline
    return "mean" if model.config.model_architecture == "transformer" else "zero"


def lobatto_rule(steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """The ``steps`` nodes (0 and 1 included, ascending) and weights of the Gauss-Lobatto rule on
    ``[0, 1]``; the weights sum to 1.

    Example:
        >>> nodes, weights = lobatto_rule(3)  # Simpson's rule
        >>> nodes.tolist(), [round(w, 6) for w in weights.tolist()]
        ([0.0, 0.5, 1.0], [0.166667, 0.666667, 0.166667])
    """
    if steps < 2:
        raise ValueError(f"a Gauss-Lobatto rule needs at least 2 nodes (both ends), got {steps}")
    last = np.zeros(steps)
    last[-1] = 1.0  # P_{steps-1} in the Legendre basis
    inner = np.sort(legendre.legroots(legendre.legder(last))) if steps > 2 else np.zeros(0)
    nodes = np.concatenate([[-1.0], inner, [1.0]])
    weights = 2.0 / (steps * (steps - 1) * legendre.legval(nodes, last) ** 2)
    return (nodes + 1.0) / 2.0, weights / 2.0


class BatchAttribution(NamedTuple):
    """What :func:`integrated_gradients` returns for a batch of ``B`` molecules with ``N`` atoms.

    Attributes:
        atoms: ``[N]`` the contribution of each atom (graph node order; no virtual node).
        prediction: ``[B]`` the explained output ``f(e)``.
        baseline: ``[B]`` the output with every atom embedding at the baseline ``f(e')``.
    """

    atoms: torch.Tensor
    prediction: torch.Tensor
    baseline: torch.Tensor


class _PathInputs:
    """A forward hook on the atom encoder that puts copy ``s`` of the batch at path position
    ``alphas[s]`` between the baseline and the embeddings, and keeps the path (the leaf the
    gradients are taken for) and the step ``e - e'``."""

    def __init__(self, alphas: torch.Tensor, baseline: str, molecule_of_atom: torch.Tensor) -> None:
        self.alphas = alphas
        self.baseline = baseline
        self.molecule_of_atom = molecule_of_atom  # [N]: molecule of each atom of one copy
        self.leaf: Optional[torch.Tensor] = None
        self.step: Optional[torch.Tensor] = None

    def __call__(self, module: torch.nn.Module, inputs: object, output: torch.Tensor) -> torch.Tensor:
        embedding = output.view(len(self.alphas), -1, output.shape[-1])[-1].detach()  # every copy holds the same molecules
        start = torch.zeros_like(embedding) if self.baseline == "zero" else self._molecule_means(embedding)
        self.step = embedding - start
        path = start + self.alphas.to(output.dtype)[:, None, None] * self.step
        self.leaf = path.reshape(output.shape).detach().requires_grad_(True)
        return self.leaf

    def _molecule_means(self, embedding: torch.Tensor) -> torch.Tensor:
        """Each atom's row replaced by the mean embedding of its molecule's atoms."""
        index = self.molecule_of_atom.to(embedding.device)
        count = int(index.max()) + 1 if len(index) else 0
        sums = embedding.new_zeros(count, embedding.shape[-1]).index_add_(0, index, embedding)
        sizes = torch.bincount(index, minlength=count).clamp_min(1).to(embedding.dtype)
        return (sums / sizes[:, None]).index_select(0, index)


def integrated_gradients(model: MoleculeModel, graph: GraphLike, relation_graph: GraphLike, steps: int = DEFAULT_STEPS,
                         output: int = 0, baseline: str = "auto") -> BatchAttribution:
    """Integrated gradients of column ``output`` of ``model``'s forward (training space: the
    standardised target or the logit), from ``baseline`` (:data:`BASELINES`), for every atom of a
    batch that holds its ``B`` molecules ``steps`` times, copy by copy (molecule ``b`` of copy
    ``s`` at position ``s B + b``, as :func:`repeated_batch` builds it); the model runs in eval mode.

    Example:
        >>> from dgl_graphtx.datasets import PackedGraphs
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> _ = torch.manual_seed(0)
        >>> p = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2)
        >>> pairs = [MoleculeFeaturizer(p.featurizer, p.relation)(s) for s in ["CCO", "c1ccccc1N"]]
        >>> graphs, relations = (PackedGraphs.from_graphs(list(g)) for g in zip(*pairs))
        >>> found = integrated_gradients(build_model(p.model), *repeated_batch(graphs, relations, [0, 1], copies=32), steps=32)
        >>> found.atoms.shape  # the 3 atoms of ethanol, then the 7 of aniline
        torch.Size([10])
        >>> round(float(found.atoms[:3].sum()), 2), round(float(found.prediction[0] - found.baseline[0]), 2)  # complete
        (-1.43, -1.43)
    """
    start = chosen_baseline(model, baseline)
    if graph.batch_size % steps:
        raise ValueError(f"the batch holds {graph.batch_size} graphs, not {steps} copies of its molecules (see repeated_batch)")
    counts = graph.batch_num_nodes()[:graph.batch_size // steps].long().cpu()
    nodes, weights = (torch.from_numpy(a) for a in lobatto_rule(steps))
    path = _PathInputs(nodes, start, torch.repeat_interleave(torch.arange(len(counts)), counts))
    hook = model.atom_encoder.register_forward_hook(path)
    try:
        with model.eval_mode(), _parameters_frozen(model), torch.enable_grad():
            out = model(graph, relation_graph)[:, output]
            assert path.leaf is not None and path.step is not None  # the forward ran the atom encoder
            gradient, = torch.autograd.grad(out.sum(), path.leaf)
    finally:
        hook.remove()
    per_step = gradient.view(steps, -1, gradient.shape[-1])
    mean_gradient = (per_step * weights.to(per_step.dtype)[:, None, None]).sum(0)
    atoms = (mean_gradient * path.step).sum(-1)  # (e - e') . mean gradient
    by_copy = out.detach().view(steps, -1)
    return BatchAttribution(atoms.detach(), by_copy[-1], by_copy[0])


@contextlib.contextmanager
def _parameters_frozen(model: torch.nn.Module) -> Iterator[None]:
    """``model``'s parameters without gradients for the pass (restored after): the backward pass
    then computes no weight gradients, which custom backward functions (``nn.lean``) would compute
    for any parameter that asks for one (about a tenth of an explanation's CPU time)."""
    asked = [parameter.requires_grad for parameter in model.parameters()]
    model.requires_grad_(False)
    try:
        yield
    finally:
        for parameter, flag in zip(model.parameters(), asked):
            parameter.requires_grad_(flag)


def repeated_batch(graphs: PackedGraphs, relations: PackedGraphs, positions: List[int], copies: int = 1,
                   device: Device = "cpu", compute: str = "dgl") -> Tuple[GraphLike, GraphLike]:
    """The molecules at ``positions`` of packed graphs and relation graphs, batched ``copies`` times
    (copy by copy; one copy per integration step for :func:`integrated_gradients`) and made ready
    for a model on ``device`` along ``compute`` (see
    :func:`~dgl_graphtx.nn.graph_tensors.on_device`).

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> g, r = MoleculeFeaturizer()("CO")
        >>> graph, _ = repeated_batch(PackedGraphs.from_graphs([g]), PackedGraphs.from_graphs([r]), [0], copies=3)
        >>> graph.batch_size
        3
    """
    index = torch.tensor(positions, dtype=torch.int64).repeat(copies)
    return on_device(graphs.batch(index), device, compute), on_device(relations.batch(index), device, compute, blocks=True)
