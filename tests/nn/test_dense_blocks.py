"""The dense-block path of RelationAttention (scores, softmax and value sums over per-graph blocks)
against the DGL message-passing path it replaces for batches of small graphs."""
from __future__ import annotations

import pytest
import torch

import dgl
from attention_variants import (ASPIRIN, EXACT, FEAT3D, SALT, SALT2, VARIANTS, FixedDropout, block_dropout_mask, build,
                                run_attention)
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.nn import RelationAttention, ScoreTerms, StructureTerm
from dgl_graphtx.nn.dense_blocks import BLOCK_FILL_LIMIT, BlockLayout
from dgl_graphtx.relation_graph import RelationConfig, build_relation_graph
from dgl_graphtx.testing import assert_same_runs

SMILES = [ASPIRIN, SALT, SALT2, "C", "CCO", "c1ccc2ccccc2c1"]
RELATIONS = ["complete", "complete+vn", "hops=2", "radius=3.0+vn"]


def _batch(relation: str) -> dgl.DGLGraph:
    featurize = MoleculeFeaturizer(FEAT3D, RelationConfig.parse(relation))
    return dgl.batch([featurize(s)[1] for s in SMILES])


@pytest.fixture(scope="module")
def batches():
    return {relation: _batch(relation) for relation in RELATIONS}


@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_dense_blocks_equal_message_passing(batches, variant, relation):
    rel = batches[relation]
    if variant.distance == "dist" and "dist" not in rel.edata:
        pytest.skip("no coordinates")
    torch.manual_seed(0)
    layer = build(variant).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    reference = run_attention(layer, rel, x, "message_passing")
    assert_same_runs(run_attention(layer, rel, x, "dense_blocks"), reference, **EXACT)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.kind in ("vanilla", "grpe", "moire") and v.distance != "dist"][:4],
                         ids=lambda v: v.id)
def test_block_dropout_equals_message_passing_with_the_blocks_draw(batches, variant):
    """Training-mode attention dropout acts on the softmax blocks (one draw per slot): the same as
    message passing dropping each edge's weight by the blocks' draw at that edge, for the values
    and for GRPE's value term; outputs and gradients agree."""
    rel = batches["complete+vn"]
    layer = build(variant, attn_dropout=0.3).double().train()
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    got = run_attention(layer, rel, x, "dense_blocks", seed=5)
    mask = block_dropout_mask(rel, layer.num_heads, 0.3, seed=5)
    dropout, layer.attn_dropout = layer.attn_dropout, FixedDropout(mask)
    assert_same_runs(got, run_attention(layer, rel, x, "message_passing"), **EXACT)
    layer.attn_dropout = dropout
    assert (mask == 0).any() and (mask == 1 / 0.7).any()
    torch.manual_seed(5)
    layer.aggregation = "dense_blocks"
    assert not torch.allclose(layer(rel, x), layer.eval()(rel, x))  # the dropout really dropped something


def test_auto_uses_blocks_for_molecule_batches_only(batches):
    featurize = MoleculeFeaturizer(relation=RelationConfig())
    similar = dgl.batch([featurize(s)[1] for s in ("CCO", "CCN", "c1ccccc1", "c1ccccc1O")])  # 3-7 atoms
    assert BlockLayout.of(similar, 4, BLOCK_FILL_LIMIT) is not None
    padded = dgl.batch([featurize(s)[1] for s in (ASPIRIN, "C", "C", "C", "C", "C")])  # 6 x 13^2 slots, 174 edges
    assert BlockLayout.of(padded, 4, BLOCK_FILL_LIMIT) is None
    counts = batches["hops=2"].batch_num_nodes()
    sparse = len(counts) * int(counts.max()) ** 2 > BLOCK_FILL_LIMIT * batches["hops=2"].num_edges()
    assert (BlockLayout.of(batches["hops=2"], 4, BLOCK_FILL_LIMIT) is None) == sparse
    n = 2000  # one long chain with hops=2: blocks would hold n^2 / (5n) slots per edge
    chain = dgl.graph((torch.arange(n - 1), torch.arange(1, n)), num_nodes=n)
    rel = build_relation_graph(chain, RelationConfig("hops", hops=2))
    assert BlockLayout.of(rel, 4, BLOCK_FILL_LIMIT) is None
    assert BlockLayout.of(rel, 4) is not None  # forced: allowed (one 2000 x 2000 block)


def test_blocks_refuse_repeated_pairs_and_cross_graph_edges():
    repeated = dgl.graph(([0, 0, 1], [1, 1, 0]), num_nodes=2)
    assert BlockLayout.of(repeated, 2) is None
    layer = RelationAttention(8, 2, aggregation="dense_blocks")
    with pytest.raises(ValueError, match="dense_blocks"):
        layer(repeated, torch.randn(2, 8))
    crossing = dgl.batch([dgl.graph(([0], [0])), dgl.graph(([0], [0]))])
    crossing = dgl.add_edges(crossing, [0], [1])  # keeps batch_num_nodes [1, 1]
    crossing.set_batch_num_nodes(torch.tensor([1, 1]))
    crossing.set_batch_num_edges(torch.tensor([2, 1]))
    assert BlockLayout.of(crossing, 2) is None
    # auto falls back to message passing and matches it
    auto = RelationAttention(8, 2)
    x = torch.randn(2, 8)
    mp = RelationAttention(8, 2, aggregation="message_passing")
    mp.load_state_dict(auto.state_dict())
    assert torch.allclose(auto(repeated, x), mp(repeated, x))
    with pytest.raises(ValueError, match="aggregation"):
        RelationAttention(8, 2, aggregation="fast")


def test_layout_is_cached_per_graph_and_renewed_after_an_in_place_edit():
    g = dgl.batch([dgl.graph(([0, 1, 0, 1], [0, 0, 1, 1])), dgl.graph(([0], [0]))])
    first = BlockLayout.cached(g, 2)
    assert BlockLayout.cached(g, 2) is first and BlockLayout.cached(g, 4) is not first
    g.add_edges([2], [2])  # a second self loop on node 2: a repeated pair, so no block layout at all
    assert BlockLayout.cached(g, 2) is None
    layer = RelationAttention(8, 2, aggregation="auto")
    rel = _batch("complete")
    x = torch.randn(rel.num_nodes(), 8)
    assert torch.allclose(layer(rel, x), layer(rel, x))  # the second call reads the cached layout


def _without_incoming_edges(rel: dgl.DGLGraph, nodes) -> dgl.DGLGraph:
    """``rel`` minus every edge into ``nodes`` (they attend to nothing), batch sizes kept."""
    graphs = dgl.unbatch(rel)
    first, offset = [], 0
    for g in graphs:
        local = [n - offset for n in nodes if offset <= n < offset + g.num_nodes()]
        if local:
            g = dgl.remove_edges(g, torch.cat([g.in_edges(n, form="eid") for n in local]))
        first.append(g)
        offset += g.num_nodes()
    return dgl.batch(first)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.distance != "dist"], ids=lambda v: v.id)
def test_nodes_without_incoming_edges_get_zero_on_both_paths(batches, variant):
    """A query with no relation edge sums nothing: message passing gives z = 0 (GRPE: 0 plus no
    value term); the block path, whose row then holds no edge at all, must give the same."""
    rel = _without_incoming_edges(batches["hops=2"], [0, 14, 20])
    assert (rel.in_degrees()[[0, 14, 20]] == 0).all()
    torch.manual_seed(1)
    layer = build(variant).double()
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    reference = run_attention(layer, rel, x, "message_passing")
    run = run_attention(layer, rel, x, "dense_blocks")
    out = run.outputs[0]
    assert torch.isfinite(out).all()
    bias = layer.out_proj.bias
    assert torch.allclose(out[[0, 14, 20]], bias.expand(3, -1).to(out.dtype), atol=1e-12)  # z = 0
    assert_same_runs(run, reference, **EXACT)


@pytest.mark.parametrize("variant", VARIANTS[:: max(1, len(VARIANTS) // 6)], ids=lambda v: v.id)
def test_outputs_do_not_depend_on_asking_for_the_weights(batches, variant):
    """Without ``get_attention`` the block path skips gathering per-edge weights (unless GRPE's
    value term needs them); outputs and gradients are the same either way."""
    rel = batches["complete+vn"]
    layer = build(variant).double()
    layer.aggregation = "dense_blocks"
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64, requires_grad=True)
    with_weights, _ = layer(rel, x, get_attention=True)
    without = layer(rel, x)
    assert torch.equal(with_weights, without)
    (g1,) = torch.autograd.grad(with_weights.sum(), [x])
    (g2,) = torch.autograd.grad(without.sum(), [x])
    assert torch.equal(g1, g2)


def test_block_logits_equal_a_hand_computed_gain_and_bias():
    """``gain * scale * q.k + bias`` on edges, -inf off them, 0 on the row of a node without edges."""
    g = dgl.batch([dgl.graph(([0, 1, 1], [0, 0, 1]), num_nodes=3), dgl.graph(([0], [0]))])  # node 2: no in-edges
    layout = BlockLayout.of(g, num_heads=1)
    q = torch.tensor([[[1.0, 2.0]], [[0.0, 1.0]], [[3.0, 0.0]], [[2.0, 2.0]]])
    k = torch.tensor([[[1.0, 0.0]], [[1.0, 1.0]], [[0.0, 5.0]], [[1.0, -1.0]]])
    gain = torch.tensor([[2.0], [1.0], [0.5], [3.0]])  # edges (0->0), (1->0), (1->1), graph 2: (0->0)
    bias = torch.tensor([[0.1], [0.2], [0.3], [0.4]])
    logits = layout.logits(layout.heads(q), layout.heads(k), gain, bias, scale=0.5)[:, 0]
    inf = float("inf")
    expected_first = torch.tensor([
        [2.0 * 0.5 * 1.0 + 0.1, 1.0 * 0.5 * 3.0 + 0.2, -inf],  # query 0: keys 0, 1
        [-inf, 0.5 * 0.5 * 1.0 + 0.3, -inf],  # query 1: key 1
        [0.0, 0.0, 0.0],  # query 2: no edges -> 0 (finite softmax, zeroed sum)
    ])
    assert torch.equal(logits[0], expected_first)
    assert logits[1, 0, 0] == 3.0 * 0.5 * 0.0 + 0.4 and torch.isinf(logits[1, 0, 1:]).all() and (logits[1, 1:] == 0).all()
    z = layout.aggregate_blocks(torch.softmax(layout.logits(layout.heads(q), layout.heads(k)), -1), layout.heads(k))
    assert torch.equal(z[2], torch.zeros(1, 2))  # node 2 sums nothing


class _PerHopBias(StructureTerm):
    """The custom term of docs/attention.md: a learned bias per hop count, plus a gain."""

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.per_hop = torch.nn.Parameter(torch.randn(8, num_heads, dtype=torch.float64))
        self.gain = torch.nn.Parameter(torch.rand(8, num_heads, dtype=torch.float64) + 0.5)

    def prepare(self, graph):
        return graph.edata["spd"].clamp(0, 7)

    def score_terms(self, graph, q, k, scale, hops):
        return ScoreTerms(gain=self.gain[hops], bias=self.per_hop[hops])


@pytest.mark.parametrize("aggregation", ["message_passing", "dense_blocks"])
def test_a_custom_structure_term_equals_a_naive_per_pair_loop(batches, aggregation):
    """softmax_j(gain * q_i.k_j / sqrt(dh) + bias) v_j, written as a loop over each query's
    relation edges, against the layer with a user's own StructureTerm on both paths."""
    rel = batches["hops=2"]
    torch.manual_seed(3)
    layer = RelationAttention(8, 2, structure=_PerHopBias(2), aggregation=aggregation).double()
    x = torch.randn(rel.num_nodes(), 8, dtype=torch.float64)
    out = layer(rel, x)
    q, k, v = layer.qkv(x).view(-1, 3, 2, 4).unbind(1)
    src, dst = rel.edges()
    hops = rel.edata["spd"].clamp(0, 7)
    z = torch.zeros(rel.num_nodes(), 2, 4, dtype=torch.float64)
    for i in range(rel.num_nodes()):
        e = (dst == i).nonzero().squeeze(1)
        s = layer.structure.gain[hops[e]] * (q[i] * k[src[e]]).sum(-1) / 2.0 + layer.structure.per_hop[hops[e]]
        z[i] = (torch.softmax(s, 0)[:, :, None] * v[src[e]]).sum(0)
    assert torch.allclose(out, layer.out_proj(z.reshape(-1, 8)), atol=1e-12)
