"""Integrated gradients on the atom embeddings: the quadrature rule, the contributions against a
finite-difference path integral computed molecule by molecule, completeness (the contributions sum
to the prediction minus the baseline prediction, each computed independently), and independence
of the batch."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from conftest_models import tiny_preset

from dgl_graphtx.datasets import PackedGraphs
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.insight import integrated_gradients, lobatto_rule, repeated_batch
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything

MOLECULES = ["CC(=O)Oc1ccccc1C(=O)O", "OCCN", "c1ccncc1Cl"]


def _model_and_graphs(variant, dtype=torch.float64):
    """A tiny model of ``variant`` and the packed graphs of MOLECULES, float64 by default (so that
    differences are the method's, not rounding)."""
    seed_everything(0)
    preset = tiny_preset(variant)
    model = build_model(preset.model).to(dtype).eval()
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    pairs = [featurizer(s) for s in MOLECULES]
    graphs, relations = (PackedGraphs.from_graphs(list(g)) for g in zip(*pairs))
    for packed in (graphs, relations):
        for data in (packed.ndata, packed.edata):
            data.update({k: v.to(dtype) for k, v in data.items() if v.is_floating_point()})
    return model, graphs, relations


@pytest.mark.parametrize("steps", [2, 3, 4, 5, 8])
def test_lobatto_rule_integrates_polynomials_up_to_degree_2n_minus_3_exactly(steps):
    nodes, weights = lobatto_rule(steps)
    assert nodes[0] == 0.0 and nodes[-1] == 1.0 and np.all(np.diff(nodes) > 0)
    for degree in range(2 * steps - 2):
        assert weights @ nodes**degree == pytest.approx(1.0 / (degree + 1), abs=1e-12)
    assert abs(weights @ nodes ** (2 * steps - 2) - 1.0 / (2 * steps - 1)) > 1e-10  # and no further


def test_lobatto_rule_matches_the_tabulated_four_point_rule():
    nodes, weights = lobatto_rule(4)
    root = 1.0 / np.sqrt(5.0)  # nodes -1, -1/sqrt(5), 1/sqrt(5), 1 on [-1, 1]; weights 1/6, 5/6, 5/6, 1/6
    np.testing.assert_allclose(nodes, [0.0, (1 - root) / 2, (1 + root) / 2, 1.0], atol=1e-15)
    np.testing.assert_allclose(weights, [1 / 12, 5 / 12, 5 / 12, 1 / 12], atol=1e-15)


def _finite_difference_contributions(model, graph, relation, alphas, weights, h=1e-7):
    """c_i = sum_s w_s (d/dt f(a_s e + t e_i 1_i) at t=0), the derivative by central differences,
    for one molecule run alone on DGL's message passing."""
    embedding = model.atom_encoder(graph.ndata["feat"]).detach()
    chosen = {}
    hook = model.atom_encoder.register_forward_hook(lambda module, inputs, output: chosen["value"])
    try:
        def f(value):
            chosen["value"] = value
            with torch.no_grad():
                return float(model(graph, relation)[0, 0])

        contributions = np.zeros(len(embedding))
        for alpha, weight in zip(alphas, weights):
            for atom in range(len(embedding)):
                step = torch.zeros_like(embedding)
                step[atom] = h * embedding[atom]
                contributions[atom] += weight * (f(alpha * embedding + step) - f(alpha * embedding - step)) / (2 * h)
        chosen["value"] = torch.zeros_like(embedding)
        baseline = f(torch.zeros_like(embedding))
    finally:
        hook.remove()
    return contributions, baseline


@pytest.mark.parametrize("variant", ["grpe", "gradformer"])
def test_contributions_equal_a_finite_difference_path_integral_molecule_by_molecule(variant):
    model, graphs, relations = _model_and_graphs(variant)
    steps = 5
    found = integrated_gradients(model, *repeated_batch(graphs, relations, [0, 1, 2], steps), steps=steps, baseline="zero")
    alphas, weights = lobatto_rule(steps)
    counts = graphs.num_nodes.tolist()
    for position, atoms in enumerate(torch.split(found.atoms, counts)):
        graph, relation = graphs.batch([position]), relations.batch([position])
        expected, baseline = _finite_difference_contributions(model, graph, relation, alphas, weights)
        np.testing.assert_allclose(atoms.numpy(), expected, atol=1e-7)
        assert float(found.baseline[position]) == pytest.approx(baseline, abs=1e-10)


def _sums(found, graphs):
    return torch.stack([part.sum() for part in torch.split(found.atoms, graphs.num_nodes.tolist())])


def _output_with_embeddings(model, graph, relation, embeddings):
    hook = model.atom_encoder.register_forward_hook(lambda module, inputs, output: embeddings)
    try:
        with torch.no_grad():
            return model(graph, relation)[:, 0]
    finally:
        hook.remove()


def test_contributions_sum_to_the_prediction_minus_the_baseline_prediction():
    model, graphs, relations = _model_and_graphs("grpe")  # GELU and softmax: a smooth path, the rule converges fast
    found = integrated_gradients(model, *repeated_batch(graphs, relations, [0, 1, 2], 12), steps=12)  # auto: mean
    prediction, baseline = [], []
    for position in range(3):  # computed apart, molecule by molecule: the output, and with every atom at the mean atom
        graph, relation = graphs.batch([position]), relations.batch([position])
        with torch.no_grad():
            prediction.append(model(graph, relation)[0, 0])
            embedding = model.atom_encoder(graph.ndata["feat"])
        baseline.append(_output_with_embeddings(model, graph, relation, embedding.mean(0).expand_as(embedding))[0])
    prediction, baseline = torch.stack(prediction), torch.stack(baseline)
    torch.testing.assert_close(found.prediction, prediction, rtol=0, atol=1e-12)
    torch.testing.assert_close(found.baseline, baseline, rtol=0, atol=1e-12)
    assert (prediction - baseline).abs().min() > 1e-3  # a gap worth explaining, 1000 times the tolerance
    torch.testing.assert_close(_sums(found, graphs), prediction - baseline, rtol=0, atol=1e-6)


def test_the_zero_baseline_is_the_prediction_with_blank_atoms_and_auto_avoids_it_under_layer_norm():
    model, graphs, relations = _model_and_graphs("grpe")
    found = integrated_gradients(model, *repeated_batch(graphs, relations, [0, 1, 2], 12), steps=12, baseline="zero")
    blank = copy.deepcopy(model)  # atom embeddings that are 0
    for table in blank.atom_encoder.embeddings:
        table.weight.data.zero_()
    with torch.no_grad():
        torch.testing.assert_close(found.baseline, blank(graphs.batch([0, 1, 2]), relations.batch([0, 1, 2]))[:, 0], rtol=0, atol=1e-12)
    # the pre-LN path from 0 crosses LayerNorm's singular point: 12 nodes miss by more than the whole difference
    delta = found.prediction - found.baseline
    assert ((_sums(found, graphs) - delta).abs() > delta.abs()).any()


def test_the_gap_of_a_relu_model_shrinks_with_the_steps():
    model, graphs, relations = _model_and_graphs("gradformer")  # ReLU kinks: the rule converges, more slowly
    gaps = []
    for steps in (4, 16, 64):
        found = integrated_gradients(model, *repeated_batch(graphs, relations, [0, 1, 2], steps), steps=steps)  # auto: zero
        gaps.append(float((_sums(found, graphs) - (found.prediction - found.baseline)).abs().max()))
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < gaps[0] / 10, gaps


@pytest.mark.parametrize("compute", ["dgl", "tensors"])
def test_a_molecule_gets_the_same_contributions_alone_and_in_any_batch(compute):
    model, graphs, relations = _model_and_graphs("gradformer", torch.float32)
    together = integrated_gradients(model, *repeated_batch(graphs, relations, [2, 0, 1], 4, compute=compute), steps=4)
    alone = integrated_gradients(model, *repeated_batch(graphs, relations, [0], 4, compute="dgl"), steps=4)
    n2, n0 = int(graphs.num_nodes[2]), int(graphs.num_nodes[0])
    torch.testing.assert_close(together.atoms[n2:n2 + n0], alone.atoms, rtol=0, atol=1e-5)
    torch.testing.assert_close(together.baseline[1:2], alone.baseline, rtol=0, atol=1e-5)



def test_an_explanation_computes_no_weight_gradient_and_leaves_the_parameters_as_they_were():
    """The pass runs with the parameters frozen (the lean layers' backward then skips the weight
    products ``grad^T x``, whose inner dimension is the batch's atoms) and gives them back as they
    were: asking for gradients, none accumulated; one frozen by the user stays frozen."""
    model, graphs, relations = _model_and_graphs("gradformer")
    first = next(model.parameters())
    first.requires_grad_(False)
    graph, relation = repeated_batch(graphs, relations, [0, 1], 4)
    weights = {tuple(p.shape) for p in model.parameters() if p.dim() == 2}
    products = []
    original = torch.Tensor.mm
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.Tensor, "mm", lambda self, other: products.append((tuple(self.shape), tuple(other.shape)))
                      or original(self, other))
        integrated_gradients(model, graph, relation, steps=4)
    assert not first.requires_grad and all(p.requires_grad for p in list(model.parameters())[1:])
    assert all(p.grad is None for p in model.parameters())
    assert products  # the lean layers' products were seen
    atoms = graph.num_nodes()
    assert not [(a, b) for a, b in products if a[1] == atoms and (a[0], b[1]) in weights]
