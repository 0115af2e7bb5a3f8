"""Sparse relation-graph construction (hops by bounded breadth-first search, radius by k-d tree) against
the dense builder it replaced (tests/relation_reference.py), the spd cap and its marker, the edge budget."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch

import dgl
from conftest import FRAGMENTED_SMILES, REFERENCE_SMILES
from relation_reference import dense_hops, dense_relation
from dgl_graphtx import relation_graph
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MOLECULE_BOND_VOCAB, FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.nn import DecayParameters, DecayTerm, MoireTerm, SpatialClasses
from dgl_graphtx.nn.focus import FOCUS_FUNCTIONS
from dgl_graphtx.relation_graph import (
    DEFAULT_SPD_CAP,
    SPD_BEYOND_CAP,
    SPD_UNREACHABLE,
    BondVocabulary,
    RelationConfig,
    build_relation_graph,
)

VOCAB = BondVocabulary((4, 6, 2))
SPARSE_MODES = ["hops=0", "hops=1", "hops=2", "hops=4", "radius=1.5", "radius=3.0", "radius=5.0"]


def _reference(graph, config: RelationConfig, vocab=VOCAB):
    src, dst = (t.numpy().astype(np.int64) for t in graph.edges())
    classes = graph.edata["bond_class"].numpy().astype(np.int64) if "bond_class" in graph.edata else None
    pos = graph.ndata["pos"].double().numpy() if "pos" in graph.ndata else None
    return dense_relation(graph.num_nodes(), src, dst, classes, pos, vocab, config.mode, config.hops,
                          config.radius, config.virtual_node)


def _assert_equal(rel, ref):
    src, dst = rel.edges()
    assert src.tolist() == ref["src"].tolist() and dst.tolist() == ref["dst"].tolist()
    assert rel.edata["spd"].tolist() == ref["spd"].tolist()
    assert rel.edata["bond"].tolist() == ref["bond"].tolist()
    if "dist" in ref:
        assert torch.equal(rel.edata["dist"], torch.from_numpy(ref["dist"]))
    else:
        assert "dist" not in rel.edata


@pytest.fixture(params=["dense_frontiers", "sparse_search"])
def hop_search(request, monkeypatch):
    """Run a test with the small-graph hop search (dense frontiers) and with the sparse one forced."""
    if request.param == "sparse_search":
        monkeypatch.setattr(relation_graph, "DENSE_SPD_MAX_NODES", 0)
    return request.param


@pytest.fixture(scope="module")
def molecules():
    featurize = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg"))
    return [featurize(smiles)[0] for smiles in REFERENCE_SMILES + FRAGMENTED_SMILES]


@pytest.mark.parametrize("virtual_node", [False, True])
@pytest.mark.parametrize("spec", SPARSE_MODES)
def test_molecules_sparse_modes_equal_dense_builder(molecules, spec, virtual_node, hop_search):
    config = RelationConfig.parse(spec, virtual_node=virtual_node)
    for graph in molecules:  # every molecule has fewer than DEFAULT_SPD_CAP atoms: hop counts exact
        rel = build_relation_graph(graph, config, vocab=MOLECULE_BOND_VOCAB)
        _assert_equal(rel, _reference(graph, config, MOLECULE_BOND_VOCAB))


def _random_graph(n: int, seed: int, box: float) -> dgl.DGLGraph:
    """Random edges, some one-way, some repeated, some self loops; several components; random positions."""
    rng = np.random.default_rng(seed)
    m = int(1.2 * n)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    both = rng.random(m) < 0.8
    src, dst = np.concatenate([src, dst[both], src[:3]]), np.concatenate([dst, src[both], dst[:3]])
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    g.edata["bond_class"] = torch.from_numpy(rng.integers(0, VOCAB.num_bond_types, len(src)))
    g.ndata["pos"] = torch.from_numpy(rng.random((n, 3)) * box).float()
    return g


@pytest.mark.parametrize("n,seed", [(1, 0), (2, 1), (9, 2), (40, 3), (300, 4)])
@pytest.mark.parametrize("spec", ["complete", "hops=1", "hops=3", "radius=2.0"])
def test_random_graphs_equal_dense_builder(n, seed, spec, hop_search):
    graph = _random_graph(n, seed, box=n ** (1 / 3) * 2.0)
    config = RelationConfig.parse(spec, virtual_node=seed % 2 == 1)
    if config.mode == "radius":
        config = RelationConfig("radius", radius=config.radius, virtual_node=config.virtual_node, spd_cap=n + 1)
    _assert_equal(build_relation_graph(graph, config, vocab=VOCAB), _reference(graph, config))


def test_default_cap_is_exact_below_its_size():
    n = DEFAULT_SPD_CAP + 1  # a path of cap + 1 nodes, all within the radius: hop counts up to the cap
    g = dgl.graph((torch.arange(n - 1), torch.arange(1, n)), num_nodes=n)
    g.ndata["pos"] = torch.zeros(n, 3)
    config = RelationConfig("radius", radius=1.0)
    _assert_equal(build_relation_graph(g, config, vocab=VOCAB), _reference(g, config))


def _hairpin(length: int, gap: float = 1.0) -> dgl.DGLGraph:
    """A path folded back on itself (node i faces node 2L-1-i at distance ``gap``), plus a separate
    2-node molecule lying across the fold: close in space, far or unreachable in hops."""
    n = 2 * length
    src, dst = torch.arange(n - 1), torch.arange(1, n)
    src, dst = torch.cat([src, dst, torch.tensor([n])]), torch.cat([dst, src, torch.tensor([n + 1])])
    g = dgl.graph((src, dst), num_nodes=n + 2)
    x = torch.cat([torch.arange(length), torch.arange(length - 1, -1, -1), torch.tensor([3, 4])]).float()
    y = torch.cat([torch.zeros(length), torch.full((length,), gap), torch.full((2,), gap / 2)])
    g.ndata["pos"] = torch.stack([x, y, torch.zeros(n + 2)], 1)
    return g


@pytest.mark.parametrize("cap", [1, 5, 21])  # hop counts across the fold are odd
def test_spd_cap_rule_against_breadth_first_search(cap):
    g = _hairpin(30)
    rel = build_relation_graph(g, RelationConfig("radius", radius=1.2, spd_cap=cap), vocab=VOCAB)
    src, dst = (t.numpy() for t in rel.edges())
    exact = dense_hops(g.num_nodes(), *(t.numpy() for t in g.edges()))[dst, src]
    want = np.where(exact > cap, SPD_BEYOND_CAP, exact)
    assert rel.edata["spd"].tolist() == want.tolist()
    spd = rel.edata["spd"]
    assert (spd == SPD_BEYOND_CAP).any() and (spd == SPD_UNREACHABLE).any() and (spd == cap).any()


def test_spd_cap_config():
    assert RelationConfig("radius", radius=5.0).hop_search_depth == DEFAULT_SPD_CAP
    config = RelationConfig.parse("radius=5,spd_cap=16+vn")
    assert (config.spd_cap, config.virtual_node, str(config)) == (16, True, "radius=5.0,spd_cap=16+vn")
    assert RelationConfig.parse(str(config)) == config
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ConfigError, match="spd_cap"):
            RelationConfig("radius", radius=5.0, spd_cap=bad)
    with pytest.raises(ConfigError, match="radius"):
        RelationConfig("hops", hops=2, spd_cap=8)
    with pytest.raises(ConfigError, match="spd_cap"):
        RelationConfig.parse("hops=2,spd_cap=8")


def test_variants_read_the_marker_as_far():
    rel = build_relation_graph(_hairpin(30), RelationConfig("radius", radius=1.2, spd_cap=5), vocab=VOCAB)
    spd = rel.edata["spd"]
    beyond, unreachable = spd == SPD_BEYOND_CAP, spd == SPD_UNREACHABLE
    # GRPE / Graphormer: spatial class FAR, in both GRPE modes
    for classes in (SpatialClasses(5), SpatialClasses(5, far_includes_max=True)):
        assert (classes(spd[beyond]) == classes.far).all()
    # Gradformer: decay mask 0 in every mode
    for mode in ("paper", "decay", "reference"):
        log_m = DecayTerm(DecayParameters(4, init_start=3.0), mode).log_mask(rel)
        assert torch.exp(log_m[beyond]).max() == 0, mode
    # MoireGT on hop distances: the same focus as an unreachable pair (distance 10^6)
    for focus in FOCUS_FUNCTIONS:
        term = MoireTerm(4, focus=focus, distance="spd")
        log_f = term.log_focus(rel)
        assert torch.isfinite(log_f).all()
        assert torch.equal(log_f[beyond], log_f[unreachable][:1].expand(int(beyond.sum()), 4)), focus


def test_complete_mode_edge_budget_error_is_early_and_names_the_fix():
    huge = dgl.graph(([], []), num_nodes=1_000_000)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"1,000,000 nodes .*hops.*radius"):
        build_relation_graph(huge, RelationConfig())
    assert time.perf_counter() - start < 1.0  # refused before any N x N work
    small = dgl.graph(([0], [1]), num_nodes=10)
    with pytest.raises(ConfigError, match="max_edges=120"):
        build_relation_graph(small, RelationConfig(virtual_node=True), max_edges=120)  # 100 + 21 edges
    assert build_relation_graph(small, RelationConfig(virtual_node=True), max_edges=121).num_edges() == 121
    assert build_relation_graph(huge, RelationConfig("hops", hops=1)).num_edges() == 1_000_000  # sparse modes: no budget


def test_large_radius_graph_builds_in_proportion_to_its_edges():
    # a 3-D random walk of 5,000 points (a 100,000-point one builds in seconds: benchmarks/checks/large_graphs.py)
    n = 5_000
    rng = np.random.default_rng(0)
    steps = rng.normal(size=(n, 3))
    pos = np.cumsum(1.5 * steps / np.linalg.norm(steps, axis=1, keepdims=True), axis=0)
    g = dgl.graph((torch.arange(n - 1), torch.arange(1, n)), num_nodes=n)
    g.ndata["pos"] = torch.from_numpy(pos).float()
    rel = build_relation_graph(g, RelationConfig("radius", radius=4.0, spd_cap=8))
    src, dst = (t.numpy() for t in rel.edges())
    p = g.ndata["pos"].double().numpy()
    assert (np.linalg.norm(p[src] - p[dst], axis=1) <= 4.0).all()
    # brute-force count of the pairs within 4 A, block by block
    count = sum(int((np.linalg.norm(p[i:i + 500, None] - p[None], axis=-1) <= 4.0).sum()) for i in range(0, n, 500))
    assert rel.num_edges() == count
    spd = rel.edata["spd"].numpy()
    near = spd <= 8
    assert (np.abs(src - dst)[near] == spd[near]).all()  # on a path, hops = |i - j|
    assert ((np.abs(src - dst) > 8) == (spd == SPD_BEYOND_CAP)).all()
    assert math.isclose(float(rel.edata["dist"][0]), 0.0)
