"""Relation graphs (SPEC section 1): pairs kept per mode, spd / bond / dist edge data, bond classes."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from ogb.utils.features import bond_to_feature_vector
from rdkit import Chem

import dgl
from conftest import FRAGMENTED_SMILES, REFERENCE_SMILES, edge_index, in_graph_order, rdkit_spd, relation_pairs
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MOLECULE_BOND_VOCAB, FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.relation_graph import (
    SPD_UNREACHABLE,
    SPD_VIRTUAL,
    BondVocabulary,
    RelationConfig,
    build_relation_graph,
    shortest_path_lengths,
)

ALL_SMILES = REFERENCE_SMILES + FRAGMENTED_SMILES
VOCAB = MOLECULE_BOND_VOCAB


def _graphs(smiles, relation=RelationConfig(), config=FeaturizerConfig()):
    return MoleculeFeaturizer(config, relation)(smiles)


# --------------------------------------------------------------------------------------------
# complete mode: spd, bond classes, edge counts
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles", ALL_SMILES)
def test_complete_spd_equals_rdkit_distance_matrix(smiles):
    graph, rel = _graphs(smiles)
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    n = mol.GetNumAtoms()
    assert rel.num_nodes() == n
    assert rel.num_edges() == n * n
    index = edge_index(rel)
    assert set(index) == set(itertools.product(range(n), range(n)))
    ref = rdkit_spd(mol)
    spd = rel.edata["spd"]
    assert spd.dtype == torch.int64
    for (i, j), e in index.items():
        assert int(spd[e]) == ref[i, j], (i, j)
    if "." in smiles:
        assert (spd == SPD_UNREACHABLE).any()
    else:
        assert (spd >= 0).all()


def test_spd_minus_one_across_fragments_hand_checked():
    # acetate (atoms 0..3) and sodium (atom 4): every acetate-sodium pair is unreachable
    _, rel = _graphs("CC(=O)[O-].[Na+]")
    index = edge_index(rel)
    for a in range(4):
        assert int(rel.edata["spd"][index[(a, 4)]]) == -1
        assert int(rel.edata["spd"][index[(4, a)]]) == -1
    assert int(rel.edata["spd"][index[(0, 2)]]) == 2  # C-C(=O): methyl to carbonyl O
    assert int(rel.edata["spd"][index[(4, 4)]]) == 0


@pytest.mark.parametrize("smiles", ALL_SMILES + ["C/C=C/C#N", "c1ccc(cc1)C(=O)N"])
def test_bond_classes_decode_to_actual_bond_features(smiles):
    graph, rel = _graphs(smiles)
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    bond = rel.edata["bond"]
    assert bond.dtype == torch.int64
    for (i, j), e in edge_index(rel).items():
        cls = int(bond[e])
        if i == j:
            assert cls == VOCAB.self_pair
            continue
        rd_bond = mol.GetBondBetweenAtoms(i, j)
        if rd_bond is None:
            assert cls == VOCAB.no_edge, (i, j)
        else:
            assert cls < VOCAB.num_bond_types
            assert VOCAB.decode(torch.tensor([cls]))[0].tolist() == bond_to_feature_vector(rd_bond)


def test_bond_classes_of_different_bond_types_differ():
    # single, double, triple and aromatic bonds get four different classes
    classes = set()
    for smiles, (i, j) in [("CC", (0, 1)), ("C=C", (0, 1)), ("C#C", (0, 1)), ("c1ccccc1", (0, 1))]:
        _, rel = _graphs(smiles)
        classes.add(int(rel.edata["bond"][edge_index(rel)[(i, j)]]))
    assert len(classes) == 4


@pytest.mark.parametrize("smiles", ["CCO", "c1ccccc1O", "[Na+].[Cl-]", "C"])
def test_virtual_node_pairs(smiles):
    n = Chem.MolFromSmiles(smiles).GetNumAtoms()
    _, rel = _graphs(smiles, RelationConfig(virtual_node=True))
    vn = n
    assert rel.num_nodes() == n + 1
    assert rel.num_edges() == n * n + 2 * n + 1
    assert rel.ndata["is_virtual"].dtype == torch.bool
    assert rel.ndata["is_virtual"].tolist() == [False] * n + [True]
    index = edge_index(rel)
    vn_pairs = {(a, vn) for a in range(n)} | {(vn, a) for a in range(n)} | {(vn, vn)}
    assert {p for p in index if vn in p} == vn_pairs
    spd, bond = rel.edata["spd"], rel.edata["bond"]
    for pair, e in index.items():
        touches_vn = vn in pair
        assert (int(spd[e]) == SPD_VIRTUAL) == touches_vn
        assert (int(bond[e]) == VOCAB.virtual) == touches_vn
    # atom pairs are those of the graph without virtual node
    _, plain = _graphs(smiles)
    assert set(relation_pairs(plain)) == set(index) - vn_pairs
    assert not plain.ndata["is_virtual"].any()


# --------------------------------------------------------------------------------------------
# hops mode
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles", ["CC(=O)Nc1ccc(O)cc1", "C1CC2CCC1C2", "CC(=O)[O-].[Na+]", "c1ccccc1.O"])
@pytest.mark.parametrize("k", [0, 1, 2, 3])
@pytest.mark.parametrize("virtual_node", [False, True])
def test_hops_keeps_exactly_pairs_within_k(smiles, k, virtual_node):
    graph, rel = _graphs(smiles, RelationConfig("hops", hops=k, virtual_node=virtual_node))
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    n = mol.GetNumAtoms()
    ref = rdkit_spd(mol)
    expected = {(i, j) for i in range(n) for j in range(n) if 0 <= ref[i, j] <= k}
    expected |= {(i, i) for i in range(n)}
    if virtual_node:
        expected |= {(a, n) for a in range(n)} | {(n, a) for a in range(n)} | {(n, n)}
    index = edge_index(rel)
    assert set(index) == expected
    for (i, j), e in index.items():
        want = SPD_VIRTUAL if n in (i, j) else ref[i, j]
        assert int(rel.edata["spd"][e]) == want


def test_hops_edges_ordered_by_query_then_key():
    _, rel = _graphs("CC(=O)O", RelationConfig("hops", hops=1))
    pairs = relation_pairs(rel)
    assert pairs == sorted(pairs)
    # hand-computed: acetic acid C0-C1(=O2)-O3
    assert pairs == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1), (3, 3)]


# --------------------------------------------------------------------------------------------
# radius mode and distances
# --------------------------------------------------------------------------------------------
def _conformer_distances(mol):
    pos = np.asarray(mol.GetConformer().GetPositions(), dtype=np.float64)
    return np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)


def test_dist_equals_conformer_distances(sdf_mols):
    f = MoleculeFeaturizer(FeaturizerConfig(coordinates="conformer"), RelationConfig(virtual_node=True))
    for mol in sdf_mols[:4]:
        graph, rel = f(mol)
        ref = _conformer_distances(in_graph_order(mol, graph))
        n = mol.GetNumAtoms()
        dist = rel.edata["dist"]
        assert dist.dtype == torch.float32
        for (i, j), e in edge_index(rel).items():
            if n in (i, j):
                continue
            assert abs(float(dist[e]) - ref[i, j]) < 1e-4


def test_no_dist_without_coordinates():
    _, rel = _graphs("CCO")
    assert "dist" not in rel.edata


@pytest.mark.parametrize("radius", [1.2, 2.0, 3.3, 4.5])
@pytest.mark.parametrize("virtual_node", [False, True])
def test_radius_keeps_exactly_pairs_within_r(sdf_mols, radius, virtual_node):
    f = MoleculeFeaturizer(
        FeaturizerConfig(coordinates="conformer"), RelationConfig("radius", radius=radius, virtual_node=virtual_node)
    )
    for mol in sdf_mols[:3]:
        graph, rel = f(mol)
        mol = in_graph_order(mol, graph)
        ref = _conformer_distances(mol)
        n = mol.GetNumAtoms()
        # the reference is only well defined away from float32 rounding at the boundary
        assert np.abs(ref - radius).min() > 1e-4
        expected = {(i, j) for i in range(n) for j in range(n) if ref[i, j] <= radius}
        expected |= {(i, i) for i in range(n)}
        if virtual_node:
            expected |= {(a, n) for a in range(n)} | {(n, a) for a in range(n)} | {(n, n)}
        index = edge_index(rel)
        assert set(index) == expected
        spd_ref = rdkit_spd(mol)
        for (i, j), e in index.items():
            if n in (i, j):
                assert int(rel.edata["spd"][e]) == SPD_VIRTUAL
                assert int(rel.edata["bond"][e]) == VOCAB.virtual
            else:
                assert int(rel.edata["spd"][e]) == spd_ref[i, j]


def test_radius_keeps_close_pairs_across_fragments():
    # sodium acetate embedded in 3-D: pairs across fragments are kept by distance, spd stays -1
    f = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg"), RelationConfig("radius", radius=100.0))
    graph, rel = f("CC(=O)[O-].[Na+]")
    n = graph.num_nodes()
    assert rel.num_edges() == n * n
    index = edge_index(rel)
    assert int(rel.edata["spd"][index[(0, 4)]]) == -1
    pos = graph.ndata["pos"].double().numpy()
    for (i, j), e in index.items():
        assert abs(float(rel.edata["dist"][e]) - np.linalg.norm(pos[i] - pos[j])) < 1e-4


# --------------------------------------------------------------------------------------------
# build_relation_graph on hand-built graphs
# --------------------------------------------------------------------------------------------
def test_shortest_path_lengths_hand_computed():
    # path 0-1-2, node 3 isolated
    src = np.array([0, 1, 1, 2])
    dst = np.array([1, 0, 2, 1])
    expected = np.array([[0, 1, 2, -1], [1, 0, 1, -1], [2, 1, 0, -1], [-1, -1, -1, 0]])
    np.testing.assert_array_equal(shortest_path_lengths(4, src, dst), expected)
    assert shortest_path_lengths(0, np.array([], dtype=np.int64), np.array([], dtype=np.int64)).shape == (0, 0)


def test_build_relation_graph_without_bond_classes_and_with_positions():
    g = dgl.graph(([0, 1, 1, 2], [1, 0, 2, 1]), num_nodes=4)
    g.ndata["pos"] = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [1.0, 2.0, 0], [0.0, 0, 3.0]])
    vocab = BondVocabulary((2, 3))
    rel = build_relation_graph(g, RelationConfig("hops", hops=1, virtual_node=True), vocab=vocab)
    index = edge_index(rel)
    atom_pairs = {(0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (2, 1), (2, 2), (3, 3)}
    vn_pairs = {(a, 4) for a in range(4)} | {(4, a) for a in range(4)} | {(4, 4)}
    assert set(index) == atom_pairs | vn_pairs
    bond = rel.edata["bond"]
    assert int(bond[index[(0, 1)]]) == 0  # no bond_class field: every bond is class 0
    assert int(bond[index[(3, 3)]]) == vocab.self_pair == 7
    assert int(bond[index[(4, 0)]]) == vocab.virtual == 8
    assert abs(float(rel.edata["dist"][index[(1, 2)]]) - 2.0) < 1e-6
    rel_r = build_relation_graph(g, RelationConfig("radius", radius=1.5), vocab=vocab)
    index_r = edge_index(rel_r)
    # distances: d01=1, d02=sqrt5, d03=3, d12=2, d13=sqrt10, d23=sqrt14
    assert set(index_r) == {(0, 0), (1, 1), (2, 2), (3, 3), (0, 1), (1, 0)}
    assert int(rel_r.edata["bond"][index_r[(0, 1)]]) == 0
    rel_r2 = build_relation_graph(g, RelationConfig("radius", radius=2.5), vocab=vocab)
    index_r2 = edge_index(rel_r2)
    assert set(index_r2) - {(i, i) for i in range(4)} == {(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)}
    assert int(rel_r2.edata["bond"][index_r2[(0, 2)]]) == vocab.no_edge == 6
    assert int(rel_r2.edata["spd"][index_r2[(0, 2)]]) == 2


def test_build_relation_graph_refuses_input_it_would_misread():
    pair = dgl.graph(([0, 1], [1, 0]), num_nodes=2)
    # a batch: one relation graph over both would pair nodes of different graphs (attention across molecules)
    with pytest.raises(ConfigError, match=r"takes one graph, got a batch of 2.*dgl.unbatch"):
        build_relation_graph(dgl.batch([pair, pair]))
    hetero = dgl.heterograph({("atom", "single", "atom"): ([0], [1]), ("atom", "double", "atom"): ([1], [0])})
    with pytest.raises(ConfigError, match=r"homogeneous graph.*dgl.to_homogeneous"):
        build_relation_graph(hetero)
    # classes 60..62 of the default vocabulary are NO_EDGE / SELF / VIRTUAL, and 500 indexes no table row
    for bad in (60, 500, -1):
        g = dgl.graph(([0, 1], [1, 0]), num_nodes=2)
        g.edata["bond_class"] = torch.tensor([bad, 0])
        with pytest.raises(ConfigError, match=rf"bond class {bad}, outside 0..59"):
            build_relation_graph(g)
    for mode in (RelationConfig(), RelationConfig("radius", radius=2.0)):
        g = dgl.graph(([0, 1], [1, 0]), num_nodes=3)
        g.ndata["pos"] = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [float("nan"), 0, 0]])
        with pytest.raises(ConfigError, match=r"ndata\['pos'\] of node 2 is not finite"):
            build_relation_graph(g, mode)
    single = build_relation_graph(dgl.batch([pair]))  # a batch of one is one graph
    assert single.edata["spd"].tolist() == [0, 1, 1, 0]


def test_docstring_style_two_node_example():
    g = dgl.graph(([0, 1], [1, 0]), num_nodes=2)
    r = build_relation_graph(g, RelationConfig(virtual_node=True))
    assert r.num_edges() == 4 + 2 * 2 + 1
    assert sorted(r.edata["spd"].tolist()) == [-2] * 5 + [0, 0, 1, 1]


# --------------------------------------------------------------------------------------------
# bond vocabulary
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("radices", [VOCAB.radices, (3, 4, 2, 5), (7,), (1, 4)])
def test_mixed_radix_round_trip_without_collisions(radices):
    vocab = BondVocabulary(tuple(radices))
    tuples = list(itertools.product(*[range(r) for r in radices]))
    feats = torch.tensor(tuples, dtype=torch.int64)
    classes = vocab.encode(feats)
    assert vocab.num_bond_types == len(tuples)
    assert sorted(classes.tolist()) == list(range(len(tuples)))  # a bijection onto 0..prod-1
    assert torch.equal(vocab.decode(classes), feats)
    specials = [vocab.no_edge, vocab.self_pair, vocab.virtual]
    assert len(set(specials)) == 3 and min(specials) >= vocab.num_bond_types
    assert vocab.num_classes == max(specials) + 1


def test_mixed_radix_hand_computed():
    vocab = BondVocabulary((5, 6, 2))
    # f0 + 5 * (f1 + 6 * f2)
    assert vocab.encode(torch.tensor([[1, 0, 1], [4, 5, 1], [0, 1, 0]])).tolist() == [31, 59, 5]
    assert VOCAB.radices == (5, 6, 2)  # OGB bond feature category counts


def test_bond_vocabulary_errors():
    vocab = BondVocabulary((5, 6, 2))
    with pytest.raises(ValueError):
        vocab.encode(torch.tensor([[5, 0, 0]]))
    with pytest.raises(ValueError):
        vocab.encode(torch.tensor([[-1, 0, 0]]))
    with pytest.raises(ValueError):
        vocab.encode(torch.tensor([[1, 0]]))
    with pytest.raises(ValueError):
        vocab.decode(torch.tensor([vocab.no_edge]))
    with pytest.raises(ValueError):
        BondVocabulary((3, 0))
    with pytest.raises(ValueError):
        BondVocabulary(())
    assert vocab.encode(torch.zeros(0, 3, dtype=torch.int64)).shape == (0,)


# --------------------------------------------------------------------------------------------
# RelationConfig
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("complete", RelationConfig("complete")),
        ("  Complete ", RelationConfig("complete")),
        ("hops=3", RelationConfig("hops", hops=3)),
        ("hops = 0", RelationConfig("hops", hops=0)),
        ("radius=4.5", RelationConfig("radius", radius=4.5)),
        ("radius=5", RelationConfig("radius", radius=5.0)),
        ("complete+vn", RelationConfig("complete", virtual_node=True)),
        ("hops=2+vn", RelationConfig("hops", hops=2, virtual_node=True)),
        ("radius=4.5+vn", RelationConfig("radius", radius=4.5, virtual_node=True)),
    ],
)
def test_relation_config_parse(spec, expected):
    cfg = RelationConfig.parse(spec)
    assert cfg == expected
    assert RelationConfig.parse(str(cfg)) == cfg
    assert cfg.needs_coordinates == (expected.mode == "radius")


def test_relation_config_parse_virtual_node_override():
    assert RelationConfig.parse("hops=2+vn", virtual_node=False).virtual_node is False
    assert RelationConfig.parse("complete", virtual_node=True).virtual_node is True
    assert str(RelationConfig("hops", hops=3, virtual_node=True)) == "hops=3+vn"


@pytest.mark.parametrize(
    "spec",
    ["", "full", "hop=3", "hops=", "hops=-1", "hops=2.5", "radius=0", "radius=-1", "radius=abc",
     "knn=3", "complete+vn+vn", "hops=3,radius=2", "radius"],
)
def test_relation_config_parse_rejects_bad_specs(spec):
    with pytest.raises(ConfigError):
        RelationConfig.parse(spec)


def test_relation_config_constructor_validation():
    with pytest.raises(ConfigError):
        RelationConfig("bogus")
    with pytest.raises(ConfigError):
        RelationConfig("hops")
    with pytest.raises(ConfigError):
        RelationConfig("hops", hops=-2)
    with pytest.raises(ConfigError):
        RelationConfig("radius")
    with pytest.raises(ConfigError):
        RelationConfig("radius", radius=0.0)
    with pytest.raises(ConfigError):
        RelationConfig("complete", hops=3)
    with pytest.raises(ConfigError):
        RelationConfig("hops", hops=2, radius=3.0)


@pytest.mark.parametrize("num_nodes", [1, 2, 9, 40, 256, 300])
def test_shortest_path_lengths_match_networkx_on_random_graphs(num_nodes):
    """Both the dense (<= 256 nodes) and the sparse (> 256) search agree with networkx BFS."""
    import networkx as nx

    from dgl_graphtx.relation_graph import shortest_path_lengths

    rng = np.random.default_rng(num_nodes)
    num_edges = int(rng.integers(0, 2 * num_nodes + 1))
    src, dst = rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)
    graph = nx.Graph()
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from(zip(src.tolist(), dst.tolist()))
    expected = np.full((num_nodes, num_nodes), -1)
    for i, lengths in nx.all_pairs_shortest_path_length(graph):
        for j, hops in lengths.items():
            expected[i, j] = hops
    np.testing.assert_array_equal(shortest_path_lengths(num_nodes, src, dst), expected)
