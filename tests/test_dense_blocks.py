"""The dense-block path of RelationAttention (scores, softmax and value sums over per-graph blocks)
against the DGL message-passing path it replaces for batches of small graphs."""
from __future__ import annotations

import pytest
import torch

import dgl
from attention_variants import ASPIRIN, FEAT3D, SALT, SALT2, VARIANTS, build
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.nn import RelationAttention
from dgl_graphtx.nn.dense_blocks import BLOCK_FILL_LIMIT, BlockLayout
from dgl_graphtx.relation_graph import RelationConfig, build_relation_graph

SMILES = [ASPIRIN, SALT, SALT2, "C", "CCO", "c1ccc2ccccc2c1"]
RELATIONS = ["complete", "complete+vn", "hops=2", "radius=3.0+vn"]


def _batch(relation: str) -> dgl.DGLGraph:
    featurize = MoleculeFeaturizer(FEAT3D, RelationConfig.parse(relation))
    return dgl.batch([featurize(s)[1] for s in SMILES])


@pytest.fixture(scope="module")
def batches():
    return {relation: _batch(relation) for relation in RELATIONS}


def _run(layer, rel, x, aggregation):
    layer.aggregation = aggregation
    x = x.clone().requires_grad_(True)
    out, attn = layer(rel, x, get_attention=True)
    w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    grads = torch.autograd.grad((out * w).sum() + (attn ** 2).sum(), [x] + list(layer.parameters()), allow_unused=True)
    return out, attn, grads


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
    ref_out, ref_attn, ref_grads = _run(layer, rel, x, "message_passing")
    out, attn, grads = _run(layer, rel, x, "dense_blocks")
    assert torch.allclose(out, ref_out, atol=1e-12, rtol=0)
    assert torch.allclose(attn, ref_attn, atol=1e-12, rtol=0)
    for g, ref_g in zip(grads, ref_grads):
        assert (g is None) == (ref_g is None)
        if g is not None:
            assert torch.allclose(g, ref_g, atol=1e-10, rtol=0)


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.kind in ("vanilla", "grpe", "moire") and v.distance != "dist"][:4],
                         ids=lambda v: v.id)
def test_dropout_masks_the_same_weights_on_both_paths(batches, variant):
    """Training-mode attention dropout: the block path draws the same mask (same seed) and feeds
    the same dropped weights to the values and to GRPE's value term; outputs and gradients agree."""
    rel = batches["complete+vn"]
    layer = build(variant, attn_dropout=0.3).double().train()
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    results = []
    for aggregation in ("message_passing", "dense_blocks"):
        torch.manual_seed(5)
        results.append(_run(layer, rel, x, aggregation))
    (ref_out, ref_attn, ref_grads), (out, attn, grads) = results
    assert torch.allclose(out, ref_out, atol=1e-12, rtol=0) and torch.allclose(attn, ref_attn, atol=1e-12, rtol=0)
    for g, ref_g in zip(grads, ref_grads):
        if g is not None:
            assert torch.allclose(g, ref_g, atol=1e-10, rtol=0)
    torch.manual_seed(5)
    layer.aggregation = "dense_blocks"
    assert not torch.allclose(layer(rel, x), layer.eval()(rel, x))  # the dropout really dropped something


def test_auto_uses_blocks_for_molecule_batches_only(batches):
    featurize = MoleculeFeaturizer(relation=RelationConfig())
    similar = dgl.batch([featurize(s)[1] for s in ("CCO", "CCN", "c1ccccc1", "c1ccccc1O")])  # 3-7 atoms
    assert BlockLayout.of(similar, 4, BLOCK_FILL_LIMIT) is not None
    assert BlockLayout.of(batches["complete"], 4, BLOCK_FILL_LIMIT) is None  # 1-13 atoms: mostly padding
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
