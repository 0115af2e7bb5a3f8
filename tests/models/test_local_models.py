"""GPS local models: GatedGCN (with the positional-encoding gate) against a dense reference written
from the equations of the authors' ``GateGCN.py``, against DGL's ``GatedGCNConv``, and inside the
Gradformer model."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from conftest_models import batch_of, dataset_for, seeded_model, tiny_preset

import dgl
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.models import GPSOptions, ModelConfig
from dgl_graphtx.models.local_models import GatedGCNLayer, GINELayer, build_local_model

# an isolated atom (the sodium ion) has no incoming bond: its aggregate must be 0, not NaN
SMILES = "CC(=O)Nc1ccc(O)cc1.[Na+]"


def dense_gated_gcn(layer: GatedGCNLayer, graph: dgl.DGLGraph, x, e, pe=None):
    """Train-mode forward written from the equations on dense ``[N, N]`` matrices, one
    destination node ``i`` and one neighbour ``j`` at a time (bond ``j -> i``)."""
    n, d = x.shape
    lin = {name: layer.projection(name) for name in "ABCDE"}

    def apply(name, v):
        w, b = lin[name]
        return v @ w.T + b

    src, dst = (t.tolist() for t in graph.edges())
    edge_of = {(j, i): k for k, (j, i) in enumerate(zip(src, dst))}
    h = torch.zeros(n, d, dtype=x.dtype)
    for i in range(n):
        num = torch.zeros(d, dtype=x.dtype)
        den = torch.zeros(d, dtype=x.dtype)
        for j in range(n):
            if (j, i) not in edge_of:
                continue
            e_ij = apply("D", x[i]) + apply("E", x[j]) + apply("C", e[edge_of[(j, i)]])
            s_ij = torch.sigmoid(e_ij)
            if pe is not None:
                w1, b1 = layer.pe_mlp[0].weight, layer.pe_mlp[0].bias
                w2, b2 = layer.pe_mlp[2].weight, layer.pe_mlp[2].bias
                r = ((pe[i] - pe[j]) ** 2).sum().reshape(1)
                s_ij = s_ij * torch.sigmoid(torch.relu(r @ w1.T + b1) @ w2.T + b2)
            num = num + s_ij * apply("B", x[j])
            den = den + s_ij
        h[i] = apply("A", x[i]) + num / (den + 1e-6)
    mean, var = h.mean(0), h.var(0, unbiased=False)
    h = (h - mean) / torch.sqrt(var + layer.norm.eps) * layer.norm.weight + layer.norm.bias
    return x + torch.relu(h)


def _inputs(dim: int, pe_steps: int = 5, seed: int = 0):
    graph, _ = smiles_to_graphs(SMILES)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(graph.num_nodes(), dim, generator=gen, dtype=torch.float64)
    e = torch.randn(graph.num_edges(), dim, generator=gen, dtype=torch.float64)
    pe = torch.rand(graph.num_nodes(), pe_steps, generator=gen, dtype=torch.float64) * 3
    return graph, x, e, pe


def _randomised(layer: torch.nn.Module, seed: int = 1) -> torch.nn.Module:
    """Non-default affine BatchNorm parameters too, so the reference checks them."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for prm in layer.parameters():
            prm.copy_(torch.randn_like(prm) * 0.5)
    return layer.double().train()


@pytest.mark.parametrize("pe_gate", [False, True])
def test_gated_gcn_matches_dense_reference(pe_gate):
    graph, x, e, pe = _inputs(6)
    layer = _randomised(GatedGCNLayer(6, pe_gate=pe_gate))
    out = layer(graph, x, e, pe if pe_gate else None)
    ref = dense_gated_gcn(layer, graph, x, e, pe if pe_gate else None)
    assert torch.allclose(out, ref, atol=1e-10), (out - ref).abs().max()
    isolated = graph.in_degrees() == 0
    assert isolated.any() and torch.isfinite(out).all()


def test_pe_gate_changes_output_only_through_pe_differences():
    graph, x, e, pe = _inputs(6)
    layer = _randomised(GatedGCNLayer(6, pe_gate=True))
    base = layer(graph, x, e, pe)
    # the gate sees ||pe_i - pe_j||^2 only: shifting every encoding by one vector changes nothing
    assert torch.allclose(layer(graph, x, e, pe + torch.tensor([0.3, -1.0, 2.0, 0.0, 0.5], dtype=pe.dtype)), base, atol=1e-12)
    assert not torch.allclose(layer(graph, x, e, pe * 2.0), base)
    with pytest.raises(ConfigError, match="positional encodings"):
        layer(graph, x, e)


def test_gated_gcn_without_gate_equals_dgl_gatedgcnconv():
    """DGL's layer applies D to the source and E to the destination: swapping them maps one onto
    the other (DGL's edge output, discarded by the authors, is ignored)."""
    graph, x, e, _ = _inputs(5)
    ours = _randomised(GatedGCNLayer(5))
    theirs = dgl.nn.GatedGCNConv(5, 5, 5, dropout=0.0, batch_norm=True, residual=True, activation=F.relu).double().train()
    mapping = {"A": "A", "B": "B", "C": "C", "D": "E", "E": "D"}
    with torch.no_grad():
        for mine, other in mapping.items():
            weight, bias = ours.projection(mine)
            getattr(theirs, other).weight.copy_(weight)
            getattr(theirs, other).bias.copy_(bias)
        theirs.bn_node.weight.copy_(ours.norm.weight)
        theirs.bn_node.bias.copy_(ours.norm.bias)
    expected, _ = theirs(graph, x, e)
    assert torch.allclose(ours(graph, x, e), expected, atol=1e-10)


def test_gated_gcn_weights_saved_as_five_layers_load_into_the_merged_product():
    """Checkpoints written before A, B, D and E became one product keep loading, to the same outputs."""
    graph, x, e, pe = _inputs(6)
    layer = _randomised(GatedGCNLayer(6, pe_gate=True))
    old = {k: v for k, v in layer.state_dict().items() if not k.startswith("node_proj.")}
    for name in "ABDE":
        weight, bias = layer.projection(name)
        old[f"{name}.weight"], old[f"{name}.bias"] = weight.clone(), bias.clone()
    assert not any(k.startswith("node_proj") for k in old)
    loaded = GatedGCNLayer(6, pe_gate=True).double().train()
    loaded.load_state_dict(old)  # strict: every key used, none missing
    assert torch.equal(loaded(graph, x, e, pe), layer(graph, x, e, pe))


@pytest.mark.parametrize("pe_gate", [False, True])
def test_gated_gcn_layers_computing_their_bond_terms_together_give_what_each_gives_alone(pe_gate):
    """A model computes every layer's C e_ij and PE gate in one product each (share_edge_inputs):
    the same outputs and gradients as each layer computing its own."""
    graph, x, e, pe = _inputs(6)
    layers = [_randomised(GatedGCNLayer(6, pe_gate=pe_gate), seed=s) for s in (1, 2, 3)]
    weights = torch.randn(3, *x.shape, dtype=torch.float64)

    def run(shared):
        for layer in layers:
            layer.zero_grad()
        if shared is not None:
            GatedGCNLayer.share_edge_inputs(layers, graph, e, pe if pe_gate else None, shared)
        outs = [layer(graph, x, e, pe if pe_gate else None, shared) for layer in layers]
        sum((o * w).sum() for o, w in zip(outs, weights)).backward()
        return outs, [p.grad.clone() for layer in layers for p in layer.parameters()]

    together, alone = run({}), run(None)
    for a, b in zip(together[0] + together[1], alone[0] + alone[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_gine_layer_ignores_pe_and_keeps_dgl_parameter_names():
    graph, x, e, pe = _inputs(4)
    layer = GINELayer(4).double()
    assert torch.equal(layer(graph, x, e, pe), layer(graph, x, e))
    assert sorted(n for n, _ in layer.named_parameters()) == ["apply_func.0.bias", "apply_func.0.weight", "apply_func.2.bias",
                                                              "apply_func.2.weight", "eps"]


def test_local_model_options_are_validated():
    with pytest.raises(ConfigError, match="local_model must be one of"):
        GPSOptions(local_model="gcn")
    with pytest.raises(ConfigError, match="pe_gate needs"):
        GPSOptions(pe_gate=True)
    with pytest.raises(ConfigError, match="rwse_steps > 0"):
        ModelConfig(variant="gradformer", readout="mean", virtual_node=False,
                    gps=GPSOptions(local_model="gatedgcn", pe_gate=True))
    with pytest.raises(ConfigError, match="rwse_norm needs"):
        ModelConfig(rwse_norm=True)
    with pytest.raises(ConfigError, match="GatedGCN local model only"):
        build_local_model("gine", 4, pe_gate=True)


def test_gradformer_with_gated_gcn_and_pe_gate_uses_the_random_walk_encodings():
    p = tiny_preset("gradformer", rwse_norm=True)
    cfg = dataclasses.replace(p.model, gps=GPSOptions(local_model="gatedgcn", pe_gate=True))
    ds = dataset_for(p.featurizer, p.relation, 0, 6)
    batch = batch_of(ds)
    net = seeded_model(dataclasses.replace(p, model=cfg)).train()
    assert all(isinstance(block.local, GatedGCNLayer) for block in net.blocks)
    out = net(batch.graph, batch.relation_graph)
    out.sum().backward()
    gate_grads = [block.local.pe_mlp[0].weight.grad for block in net.blocks]
    assert all(g is not None and g.abs().sum() > 0 for g in gate_grads)
    assert net.rwse_norm.weight.grad.abs().sum() > 0


def test_gated_gcn_model_config_round_trips_through_a_checkpoint(tmp_path):
    from dgl_graphtx.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint

    p = tiny_preset("gradformer", "molhiv")
    net = seeded_model(p).eval()
    meta = CheckpointMeta(p.featurizer, p.relation, ["y"])
    loaded = load_checkpoint(save_checkpoint(tmp_path / "m.pt", net, meta))
    assert loaded.model.config == p.model and loaded.model.config.gps.pe_gate
    batch = batch_of(dataset_for(p.featurizer, p.relation, 0, 4))
    assert torch.equal(loaded.model.eval()(batch.graph, batch.relation_graph), net(batch.graph, batch.relation_graph))
