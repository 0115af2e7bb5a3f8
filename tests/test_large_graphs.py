"""Large relation graphs: every attention variant forward + backward on a >= 100k-edge radius graph,
and node-level outputs of the models on a user's own DGLGraph."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import dgl
from dgl_graphtx.models import GraphTransformer, Gradformer, ModelConfig
from dgl_graphtx.nn import GradformerAttention, GraphormerAttention, GRPEAttention, MoireAttention, RelationAttention
from dgl_graphtx.relation_graph import SPD_BEYOND_CAP, SPD_UNREACHABLE, RelationConfig, build_relation_graph

LAYERS = {
    "vanilla": lambda: RelationAttention(16, 2),
    "graphormer": lambda: GraphormerAttention(16, 2),
    "grpe": lambda: GRPEAttention(16, 2),
    "moire-spd": lambda: MoireAttention(16, 2, distance="spd"),
    "moire-dist": lambda: MoireAttention(16, 2, distance="dist"),
    "gradformer": lambda: GradformerAttention(16, 2),
    "gradformer-decay": lambda: GradformerAttention(16, 2, mode="decay"),
}


def random_walk(n: int, seed: int = 0, chains: int = 2) -> dgl.DGLGraph:
    """``chains`` 3-D random-walk chains (1.5 A steps) interleaved in one box, bonded along each chain."""
    rng = np.random.default_rng(seed)
    steps = rng.normal(size=(n, 3))
    pos = np.cumsum(1.5 * steps / np.linalg.norm(steps, axis=1, keepdims=True), axis=0)
    per = n // chains
    pos[per:] += pos[per - 1] - pos[per]  # the second chain starts where the first ends: close in space
    src = np.array([i for i in range(n - 1) if (i + 1) % per != 0])
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(src + 1)), num_nodes=n)
    g.ndata["pos"] = torch.from_numpy(pos).float()
    return g


@pytest.fixture(scope="module")
def big_relation():
    rel = build_relation_graph(random_walk(2400), RelationConfig("radius", radius=4.5, spd_cap=6, virtual_node=True))
    assert rel.num_edges() >= 100_000
    spd = rel.edata["spd"]
    assert (spd == SPD_BEYOND_CAP).any() and (spd == SPD_UNREACHABLE).any()
    return rel


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_every_variant_trains_on_a_100k_edge_relation_graph(big_relation, name):
    torch.manual_seed(0)
    layer = LAYERS[name]()
    x = torch.randn(big_relation.num_nodes(), 16, requires_grad=True)
    out, attn = layer(big_relation, x, get_attention=True)
    out.square().mean().backward()
    assert out.shape == x.shape and torch.isfinite(out).all()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for p in layer.parameters():
        assert p.grad is None or torch.isfinite(p.grad).all()
    # each query's weights sum to 1 over its own edges
    sums = torch.zeros(big_relation.num_nodes(), 2).index_add_(0, big_relation.edges()[1], attn.detach())
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-4)


def test_message_passing_equals_dense_blocks_on_a_large_graph(big_relation):
    rel = dgl.node_subgraph(big_relation, torch.arange(1200))  # one 1,200 x 1,200 block stays small
    torch.manual_seed(1)
    layer = GRPEAttention(16, 2).double()
    x = torch.randn(rel.num_nodes(), 16, dtype=torch.float64)
    assert layer(rel, x).shape == x.shape  # auto: message passing (blocks would be mostly empty)
    outs = []
    for aggregation in ("message_passing", "dense_blocks"):
        layer.aggregation = aggregation
        outs.append(layer(rel, x))
    assert torch.allclose(outs[0], outs[1], atol=1e-12, rtol=0)


def _config(variant: str, **kw) -> ModelConfig:
    base = dict(variant=variant, num_layers=2, hidden_dim=16, num_heads=4, num_tasks=2, atom_features="canonical",
                atom_feature_dims=(5,), bond_feature_dims=(3,), virtual_node=False, readout="mean", dropout=0.0,
                attn_dropout=0.0)
    base.update(kw)
    return ModelConfig(**base)


def _user_graph(n: int = 300, seed: int = 0) -> dgl.DGLGraph:
    g = random_walk(n, seed)
    g = dgl.to_bidirected(g, copy_ndata=True)
    gen = torch.Generator().manual_seed(seed)
    g.ndata["feat"] = torch.randn(n, 5, generator=gen)
    g.edata["feat"] = torch.randn(g.num_edges(), 3, generator=gen)
    return g


@pytest.mark.parametrize("variant,kw", [
    ("vanilla", {}), ("moire", {}), ("graphormer", {}), ("gradformer", {}),
    ("grpe", {"virtual_node": True, "readout": "virtual"}),
])
def test_node_outputs_are_per_node_and_consistent_with_mean_readout(variant, kw):
    cfg = _config(variant, **kw)
    g = _user_graph()
    rel = build_relation_graph(g, RelationConfig("radius", radius=4.0, virtual_node=cfg.virtual_node), vocab=cfg.bond_vocab)
    torch.manual_seed(0)
    model = (Gradformer if variant == "gradformer" else GraphTransformer)(cfg).eval()
    nodes = model.node_outputs(g, rel)
    assert nodes.shape == (g.num_nodes(), 2)  # the virtual node, if any, is not a node of the graph
    if cfg.readout == "mean":  # a linear head commutes with the mean: pooled output = mean of node outputs
        assert torch.allclose(model(g, rel), nodes.mean(0, keepdim=True), atol=1e-5)
    model.set_target_normalization(torch.tensor([1.0, -2.0]), torch.tensor([3.0, 0.5]))
    assert torch.allclose(model.predict_nodes(g, rel), nodes * torch.tensor([3.0, 0.5]) + torch.tensor([1.0, -2.0]), atol=1e-5)


def test_node_regression_learns_a_neighbourhood_target():
    # target of each node: the mean first feature of the nodes within 4 A (itself included)
    g = _user_graph(150, seed=3)
    rel = build_relation_graph(g, RelationConfig("radius", radius=4.0))
    src, dst = rel.edges()
    deg = torch.bincount(dst, minlength=g.num_nodes()).float()
    target = torch.zeros(g.num_nodes()).index_add_(0, dst, g.ndata["feat"][src, 0]) / deg
    torch.manual_seed(0)
    model = GraphTransformer(_config("vanilla", num_tasks=1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        loss = torch.nn.functional.mse_loss(model.node_outputs(g, rel)[:, 0], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.3 * losses[0]
