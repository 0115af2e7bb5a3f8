"""Featurization: OGB / canonical features, hydrogens, charges, invalid input, 3-D coordinates, RWSE."""
from __future__ import annotations


import numpy as np
import pytest
import torch
from ogb.utils.features import atom_to_feature_vector, bond_to_feature_vector
from rdkit import Chem

import dgl
from conftest import FRAGMENTED_SMILES, REFERENCE_SMILES, in_graph_order
from dgl_graphtx.errors import ConfigError, GraphTxError, InvalidMoleculeError
from dgl_graphtx.featurize import (
    MOLECULE_BOND_VOCAB,
    FeaturizerConfig,
    MoleculeFeaturizer,
    OGBAtomFeaturizer,
    OGBBondFeaturizer,
    parse_smiles,
    smiles_to_graphs,
    to_mol,
)
from dgl_graphtx.relation_graph import BondVocabulary, RelationConfig, build_relation_graph

ALL_SMILES = REFERENCE_SMILES + FRAGMENTED_SMILES

# dgllife CanonicalAtomFeaturizer layout (hand-read from dgllife's documentation):
# 43 atom-type one-hot, 11 degree, 7 implicit valence, then the formal charge as a scalar.
CANONICAL_SYMBOL_COLUMN = {"C": 0, "N": 1, "O": 2, "S": 3, "F": 4, "Cl": 7, "Na": 10, "H": 29}
CANONICAL_CHARGE_COLUMN = 43 + 11 + 7


def _ogb():
    return MoleculeFeaturizer(FeaturizerConfig(atom_features="ogb"))


def _canonical():
    return MoleculeFeaturizer(FeaturizerConfig(atom_features="canonical"))


# --------------------------------------------------------------------------------------------
# OGB features
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles", ALL_SMILES)
def test_ogb_atom_features_match_ogb_reference(smiles):
    graph, _ = _ogb()(smiles)
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    feat = graph.ndata["feat"]
    assert feat.dtype == torch.int64
    assert tuple(feat.shape) == (mol.GetNumAtoms(), 9)
    expected = torch.tensor([atom_to_feature_vector(a) for a in mol.GetAtoms()], dtype=torch.int64)
    # column 1 is RDKit's local CW/CCW tag, defined relative to bond order, which the canonical
    # order also fixes: compare it as chiral / not chiral (test_stereo_invariance checks R vs S)
    assert torch.equal(feat[:, [0, *range(2, 9)]], expected[:, [0, *range(2, 9)]])
    assert ((feat[:, 1] > 0) == (expected[:, 1] > 0)).all()
    # node i is input atom input_atom[i]: OGB column 0 is atomic number - 1
    assert (feat[:, 0] + 1).tolist() == [a.GetAtomicNum() for a in mol.GetAtoms()]


@pytest.mark.parametrize("smiles", ALL_SMILES)
def test_ogb_bond_features_and_dgllife_edge_order(smiles):
    graph, _ = _ogb()(smiles)
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    src, dst = (t.tolist() for t in graph.edges())
    feat = graph.edata["feat"]
    assert feat.dtype == torch.int64
    assert graph.num_edges() == 2 * mol.GetNumBonds()
    assert tuple(feat.shape) == (2 * mol.GetNumBonds(), 3)
    bonds = set()
    for i in range(mol.GetNumBonds()):
        u, v = src[2 * i], dst[2 * i]
        assert (src[2 * i + 1], dst[2 * i + 1]) == (v, u)  # dgllife: each bond in both directions
        rd_bond = mol.GetBondBetweenAtoms(u, v)
        assert rd_bond is not None
        bonds.add(rd_bond.GetIdx())
        vec = bond_to_feature_vector(rd_bond)
        assert feat[2 * i].tolist() == vec
        assert feat[2 * i + 1].tolist() == vec
        # the bond class stored with the graph decodes to the same OGB features
        decoded = MOLECULE_BOND_VOCAB.decode(graph.edata["bond_class"][2 * i : 2 * i + 2])
        assert decoded.tolist() == [vec, vec]
    assert len(bonds) == mol.GetNumBonds()


@pytest.mark.parametrize(
    "smiles, bond_idx, expected",
    [
        # OGB bond columns: type (SINGLE, DOUBLE, TRIPLE, AROMATIC), stereo
        # (NONE, Z, E, CIS, TRANS, ANY), conjugated.  Hand-derived values.
        ("CC", 0, [0, 0, 0]),
        ("C=O", 0, [1, 0, 0]),
        ("CC#N", 1, [2, 0, 0]),
        ("c1ccccc1", 0, [3, 0, 1]),
        ("C/C=C/C", 1, [1, 2, 0]),  # E double bond
        ("C/C=C\\C", 1, [1, 1, 0]),  # Z double bond
    ],
)
def test_ogb_bond_features_hand_computed(smiles, bond_idx, expected):
    graph, _ = _ogb()(smiles)
    assert graph.edata["feat"][2 * bond_idx].tolist() == expected
    assert graph.edata["feat"][2 * bond_idx + 1].tolist() == expected


def test_ogb_featurizer_objects_follow_dgllife_protocol():
    mol = Chem.MolFromSmiles("CC(=O)O")
    atoms, bonds = OGBAtomFeaturizer(), OGBBondFeaturizer(field="e")
    assert atoms.feat_size() == 9 and bonds.feat_size() == 3
    assert atoms(mol)["feat"].shape == (4, 9)
    assert bonds(mol)["e"].shape == (6, 3)
    empty = bonds(Chem.MolFromSmiles("C"))["e"]
    assert empty.shape == (0, 3) and empty.dtype == torch.int64


def test_ogb_features_within_declared_category_counts():
    f = _ogb()
    for smiles in ALL_SMILES:
        graph, _ = f(smiles)
        assert ((graph.ndata["feat"] >= 0) & (graph.ndata["feat"] < torch.tensor(f.atom_feature_dims))).all()
        if graph.num_edges():
            assert ((graph.edata["feat"] >= 0) & (graph.edata["feat"] < torch.tensor(f.bond_feature_dims))).all()


# --------------------------------------------------------------------------------------------
# canonical features
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles", ["CCO", "c1ccccc1Cl", "C[N+](C)(C)C", "[O-]C=O", "CC(=O)[O-].[Na+]"])
def test_canonical_features_shapes_order_and_charge(smiles):
    f = _canonical()
    graph, _ = f(smiles)
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    feat, efeat = graph.ndata["feat"], graph.edata["feat"]
    assert feat.is_floating_point() and efeat.is_floating_point()
    assert tuple(feat.shape) == (mol.GetNumAtoms(), 74)
    assert tuple(efeat.shape) == (2 * mol.GetNumBonds(), 12)
    assert f.atom_feature_dims == (74,) and f.bond_feature_dims == (12,)
    for i, atom in enumerate(mol.GetAtoms()):
        assert int(feat[i, :43].argmax()) == CANONICAL_SYMBOL_COLUMN[atom.GetSymbol()]
        assert float(feat[i, :43].sum()) == 1.0
        assert float(feat[i, CANONICAL_CHARGE_COLUMN]) == atom.GetFormalCharge()
    # bond classes are OGB-based whatever the atom features
    src, dst = (t.tolist() for t in graph.edges())
    for e in range(graph.num_edges()):
        assert MOLECULE_BOND_VOCAB.decode(graph.edata["bond_class"][e : e + 1]).tolist() == [
            bond_to_feature_vector(mol.GetBondBetweenAtoms(src[e], dst[e]))
        ]


def test_canonical_bond_type_column_hand_computed():
    graph, _ = _canonical()("C=O")
    # columns 0..3: SINGLE, DOUBLE, TRIPLE, AROMATIC one-hot
    assert graph.edata["feat"][:, :4].tolist() == [[0, 1, 0, 0], [0, 1, 0, 0]]


# --------------------------------------------------------------------------------------------
# hydrogens and charges
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles", ["CCO", "C[N+](C)(C)C", "c1ccccc1", "[O-]C=O", "[Na+].[Cl-]"])
@pytest.mark.parametrize("atom_features", ["ogb", "canonical"])
def test_explicit_hydrogens_on_and_off(smiles, atom_features):
    off, _ = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features))(smiles)
    on, rel = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features, explicit_hydrogens=True))(smiles)
    heavy = in_graph_order(Chem.MolFromSmiles(smiles), off)
    with_h = Chem.AddHs(heavy)
    assert on.ndata["input_atom"].tolist() == off.ndata["input_atom"].tolist() + [-1] * (with_h.GetNumAtoms() - heavy.GetNumAtoms())
    assert off.num_nodes() == heavy.GetNumAtoms()
    assert off.num_edges() == 2 * heavy.GetNumBonds()
    assert on.num_nodes() == with_h.GetNumAtoms()
    assert on.num_edges() == 2 * with_h.GetNumBonds()
    assert rel.num_nodes() == with_h.GetNumAtoms()
    if atom_features == "ogb":
        assert (on.ndata["feat"][:, 0] + 1).tolist() == [a.GetAtomicNum() for a in with_h.GetAtoms()]
        assert (off.ndata["feat"][:, 0] + 1).tolist() == [a.GetAtomicNum() for a in heavy.GetAtoms()]
        assert torch.equal(
            on.ndata["feat"], torch.tensor([atom_to_feature_vector(a) for a in with_h.GetAtoms()])
        )


def test_explicit_h_atoms_in_smiles_are_not_nodes_without_explicit_hydrogens():
    # "[H]OC" is methanol: without explicit_hydrogens the graph must equal the one of "OC"
    f = _ogb()
    g1, _ = f("[H]OC")
    g2, _ = f("OC")
    assert g1.num_nodes() == 2
    assert torch.equal(g1.ndata["feat"], g2.ndata["feat"])
    gh, _ = MoleculeFeaturizer(FeaturizerConfig(explicit_hydrogens=True))("[H]OC")
    assert gh.num_nodes() == Chem.AddHs(Chem.MolFromSmiles("CO")).GetNumAtoms() == 6


@pytest.mark.parametrize(
    "smiles, atom_idx, charge, num_h",
    [("C[N+](C)(C)C", 1, 1, 0), ("[O-]C=O", 0, -1, 0), ("[NH4+]", 0, 1, 4), ("[Na+]", 0, 1, 0)],
)
def test_formal_charge_features(smiles, atom_idx, charge, num_h):
    graph, _ = _ogb()(smiles)
    atom_idx = graph.ndata["input_atom"].tolist().index(atom_idx)  # the charged input atom's node
    row = graph.ndata["feat"][atom_idx].tolist()
    # OGB formal-charge categories are -5..5: the index of charge c is c + 5
    assert row[3] == charge + 5
    assert row[4] == num_h  # OGB total H count category is the count itself
    # neutral atoms sit at category 5
    for i in range(graph.num_nodes()):
        if i != atom_idx:
            assert graph.ndata["feat"][i, 3] == 5
    cgraph, _ = _canonical()(smiles)
    assert float(cgraph.ndata["feat"][atom_idx, CANONICAL_CHARGE_COLUMN]) == charge


# --------------------------------------------------------------------------------------------
# single-atom molecules
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("smiles, atomic_num", [("C", 6), ("[Na+]", 11)])
@pytest.mark.parametrize("atom_features, edge_width", [("ogb", 3), ("canonical", 12)])
def test_single_heavy_atom(smiles, atomic_num, atom_features, edge_width):
    f = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features))
    graph, rel = f(smiles)
    assert graph.num_nodes() == 1 and graph.num_edges() == 0
    assert tuple(graph.edata["feat"].shape) == (0, edge_width)
    assert tuple(graph.edata["bond_class"].shape) == (0,)
    if atom_features == "ogb":
        assert int(graph.ndata["feat"][0, 0]) + 1 == atomic_num
    assert rel.num_nodes() == 1 and rel.num_edges() == 1
    assert relation_self_only(rel)
    assert rel.edata["spd"].tolist() == [0]
    assert rel.edata["bond"].tolist() == [MOLECULE_BOND_VOCAB.self_pair]
    # batches with an ordinary molecule (edge feature schemes agree)
    other, other_rel = f("CCO")
    batched = dgl.batch([graph, other])
    assert batched.num_edges() == other.num_edges()
    assert batched.edata["feat"].shape[1] == edge_width
    assert dgl.batch([rel, other_rel]).num_edges() == 1 + 9


def relation_self_only(rel):
    src, dst = rel.edges()
    return src.tolist() == dst.tolist() == [0]


# --------------------------------------------------------------------------------------------
# invalid input
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "bad, pattern",
    [
        ("C1CC", r"syntax"),
        ("CC(C", r"syntax"),
        ("Xy", r"syntax"),
        ("CN(C)(C)(C)C", r"(?i)valence"),
        ("C(C)(C)(C)(C)C", r"(?i)valence"),
        ("c1cccc1", r"(?i)kekul"),
        ("", r"(?i)empty"),
        ("   ", r"(?i)empty"),
        (3, r"SMILES string.*int"),
        (None, r"SMILES string.*NoneType"),
        (b"CCO", r"SMILES string.*bytes"),
    ],
)
def test_parse_smiles_invalid(bad, pattern):
    with pytest.raises(InvalidMoleculeError, match=pattern) as info:
        parse_smiles(bad)
    assert isinstance(info.value, GraphTxError) and isinstance(info.value, ValueError)
    if isinstance(bad, str):
        with pytest.raises(InvalidMoleculeError, match=pattern):
            _ogb()(bad)


def test_to_mol_rejects_missing_and_empty_molecules():
    with pytest.raises(InvalidMoleculeError, match="None"):
        to_mol(None)
    with pytest.raises(InvalidMoleculeError, match="no atoms"):
        to_mol(Chem.Mol())
    mol = Chem.MolFromSmiles("CCN")
    assert to_mol(mol) is mol


@pytest.mark.parametrize("smiles", REFERENCE_SMILES + FRAGMENTED_SMILES + ["C/C=C\\Cl", "F[C@H](Cl)Br"])
def test_parse_smiles_equals_rdkit_parse(smiles):
    mol = parse_smiles(smiles)
    ref = Chem.MolFromSmiles(smiles)
    assert Chem.MolToSmiles(mol) == Chem.MolToSmiles(ref)
    assert [a.GetAtomicNum() for a in mol.GetAtoms()] == [a.GetAtomicNum() for a in ref.GetAtoms()]
    assert [str(b.GetStereo()) for b in mol.GetBonds()] == [str(b.GetStereo()) for b in ref.GetBonds()]
    assert [str(a.GetChiralTag()) for a in mol.GetAtoms()] == [str(a.GetChiralTag()) for a in ref.GetAtoms()]


# --------------------------------------------------------------------------------------------
# configuration errors
# --------------------------------------------------------------------------------------------
def test_featurizer_config_validation():
    with pytest.raises(ConfigError):
        FeaturizerConfig(atom_features="morgan")
    with pytest.raises(ConfigError):
        FeaturizerConfig(coordinates="2d")
    with pytest.raises(ConfigError):
        FeaturizerConfig(rwse_steps=-1)
    assert not FeaturizerConfig().needs_coordinates
    for mode in ("auto", "conformer", "etkdg"):
        assert FeaturizerConfig(coordinates=mode).needs_coordinates
    d = FeaturizerConfig(rwse_steps=3).to_dict()
    assert d["rwse_steps"] == 3 and FeaturizerConfig(**d) == FeaturizerConfig(rwse_steps=3)


def test_radius_relation_without_coordinates_is_config_error():
    with pytest.raises(ConfigError, match="coordinates"):
        MoleculeFeaturizer(FeaturizerConfig(), RelationConfig.parse("radius=4.0"))
    graph, _ = _ogb()("CCO")  # no pos
    with pytest.raises(ConfigError, match="coordinates"):
        build_relation_graph(graph, RelationConfig.parse("radius=4.0"))
    # with coordinates it is accepted
    g, rel = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg"), RelationConfig.parse("radius=4.0"))("CCO")
    assert "dist" in rel.edata


# --------------------------------------------------------------------------------------------
# 3-D coordinates
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["conformer", "auto"])
def test_sdf_conformer_coordinates_equal_file_coordinates_heavy_atoms(sdf_mols, sdf_records, mode):
    f = MoleculeFeaturizer(FeaturizerConfig(coordinates=mode))
    for mol, record in zip(sdf_mols, sdf_records):
        graph, _ = f(mol)
        heavy = [i for i, s in enumerate(record["symbols"]) if s != "H"]
        assert graph.num_nodes() == len(heavy)
        assert [a.GetSymbol() for a in mol.GetAtoms()] == [record["symbols"][i] for i in heavy]
        heavy = [heavy[i] for i in graph.ndata["input_atom"].tolist()]  # file records in node order
        assert (graph.ndata["feat"][:, 0] + 1).tolist() == [Chem.GetPeriodicTable().GetAtomicNumber(record["symbols"][i]) for i in heavy]
        pos = graph.ndata["pos"]
        assert pos.dtype == torch.float32 and tuple(pos.shape) == (len(heavy), 3)
        np.testing.assert_allclose(pos.numpy(), record["coords"][heavy], atol=1e-4)


def test_sdf_conformer_coordinates_with_hydrogens(sdf_mols_with_h, sdf_records):
    f = MoleculeFeaturizer(FeaturizerConfig(coordinates="conformer", explicit_hydrogens=True))
    for mol, record in zip(sdf_mols_with_h, sdf_records):
        graph, _ = f(mol)
        order = graph.ndata["input_atom"].tolist()  # the file's hydrogens are input atoms too
        assert sorted(order) == list(range(len(record["symbols"])))
        assert (graph.ndata["feat"][:, 0] + 1).tolist() == [
            Chem.GetPeriodicTable().GetAtomicNumber(record["symbols"][i]) for i in order
        ]
        np.testing.assert_allclose(graph.ndata["pos"].numpy(), record["coords"][order], atol=1e-4)


def test_conformer_mode_without_conformer_raises():
    f = MoleculeFeaturizer(FeaturizerConfig(coordinates="conformer"))
    with pytest.raises(InvalidMoleculeError, match="conformer"):
        f("CCO")


def _bond_lengths(mol, pos):
    return np.array(
        [np.linalg.norm(pos[b.GetBeginAtomIdx()] - pos[b.GetEndAtomIdx()]) for b in mol.GetBonds()]
    )


@pytest.mark.parametrize("smiles", ["CC(=O)Nc1ccc(O)cc1", "C1CC2CCC1C2", "OC(=O)C(F)(F)F"])
def test_etkdg_coordinates_reproducible_and_sane(smiles):
    graph = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg", embed_seed=7))(smiles)[0]
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    seed1a = graph.ndata["pos"]
    seed1b = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg", embed_seed=7))(smiles)[0].ndata["pos"]
    seed2 = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg", embed_seed=8))(smiles)[0].ndata["pos"]
    auto = MoleculeFeaturizer(FeaturizerConfig(coordinates="auto", embed_seed=7))(smiles)[0].ndata["pos"]
    assert tuple(seed1a.shape) == (mol.GetNumAtoms(), 3) and seed1a.dtype == torch.float32
    assert torch.equal(seed1a, seed1b)
    assert torch.equal(seed1a, auto)  # a SMILES has no conformer: auto embeds with the same seed
    assert float((seed1a - seed2).abs().max()) > 1e-2
    for pos in (seed1a.double().numpy(), seed2.double().numpy()):
        lengths = _bond_lengths(mol, pos)
        assert lengths.min() > 1.0 and lengths.max() < 1.9, lengths
        d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
        off_diag = d[~np.eye(len(pos), dtype=bool)]
        assert off_diag.min() > 1.0  # no two heavy atoms collapse


def test_etkdg_with_explicit_hydrogens_and_mmff():
    smiles = "CCO"
    graph, _ = MoleculeFeaturizer(FeaturizerConfig(coordinates="etkdg", explicit_hydrogens=True, mmff=True))(smiles)
    mol_h = Chem.AddHs(in_graph_order(Chem.MolFromSmiles(smiles), graph))
    pos = graph.ndata["pos"].double().numpy()
    assert pos.shape == (mol_h.GetNumAtoms(), 3)
    for bond in mol_h.GetBonds():
        length = np.linalg.norm(pos[bond.GetBeginAtomIdx()] - pos[bond.GetEndAtomIdx()])
        is_h = 1 in (bond.GetBeginAtom().GetAtomicNum(), bond.GetEndAtom().GetAtomicNum())
        low, high = (0.9, 1.2) if is_h else (1.3, 1.6)
        assert low < length < high


# --------------------------------------------------------------------------------------------
# random-walk structural encoding
# --------------------------------------------------------------------------------------------
def _rwse_numpy(mol, k):
    adj = Chem.GetAdjacencyMatrix(mol).astype(np.float64)
    deg = adj.sum(1, keepdims=True)
    trans = np.divide(adj, deg, out=np.zeros_like(adj), where=deg > 0)
    out, power = [], np.eye(len(adj))
    for _ in range(k):
        power = power @ trans
        out.append(np.diag(power).copy())
    return np.stack(out, axis=1)


@pytest.mark.parametrize("smiles", ["CCO", "c1ccccc1O", "C1CC2CCC1C2", "CC(=O)[O-].[Na+]", "C"])
def test_rwse_matches_dgl_and_numpy(smiles):
    k = 5
    graph, _ = MoleculeFeaturizer(FeaturizerConfig(rwse_steps=k))(smiles)
    rwse = graph.ndata["rwse"]
    mol = in_graph_order(Chem.MolFromSmiles(smiles), graph)
    assert tuple(rwse.shape) == (mol.GetNumAtoms(), k)
    assert torch.allclose(rwse, dgl.random_walk_pe(graph, k))
    np.testing.assert_allclose(rwse.numpy(), _rwse_numpy(mol, k), atol=1e-6)


def test_rwse_triangle_hand_computed():
    # K3: closed walks of length t number (2^t + 2(-1)^t) / 3 out of 2^t walks
    graph, _ = MoleculeFeaturizer(FeaturizerConfig(rwse_steps=4))("C1CC1")
    expected = torch.tensor([[0.0, 0.5, 0.25, 0.375]] * 3)
    assert torch.allclose(graph.ndata["rwse"], expected)
    assert "rwse" not in _ogb()("C1CC1")[0].ndata


def test_smiles_to_graphs_one_shot_helper():
    g, r = smiles_to_graphs("[Na+].[Cl-]")
    assert g.num_nodes() == 2 and g.num_edges() == 0
    assert r.num_edges() == 4
    assert isinstance(MOLECULE_BOND_VOCAB, BondVocabulary)
