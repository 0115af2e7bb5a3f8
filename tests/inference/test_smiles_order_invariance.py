"""Same molecule, same prediction, however its SMILES is written.

Molecules: FreeSolv plus stereo-enumerated (chiral centres, E/Z bonds), charged and salt forms;
each written in several random atom orders by RDKit (``MolToRandomSmilesVect``, seeded). Models are
untrained but randomly initialised, so every input feature (chirality tags included) reaches the
output.
"""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Chem.EnumerateStereoisomers import EnumerateStereoisomers, StereoEnumerationOptions

from conftest_models import freesolv_frame, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, LoadedCheckpoint
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.inference import Predictor

WRITINGS = 5


def _stereo_variants(limit, kind):
    """Fully specified stereoisomers of FreeSolv molecules with a chiral centre (``kind="centre"``)
    or an acyclic double bond that can be E or Z (``kind="bond"``)."""
    options = StereoEnumerationOptions(onlyUnassigned=True, maxIsomers=2, unique=True)
    out = []
    for smiles in freesolv_frame()["smiles"]:
        mol = Chem.MolFromSmiles(smiles)
        if kind == "centre":
            wanted = bool(Chem.FindMolChiralCenters(mol, includeUnassigned=True, useLegacyImplementation=False))
        else:
            wanted = any(b.GetBondType() == Chem.BondType.DOUBLE and not b.IsInRing()
                         and all(a.GetDegree() > 1 for a in (b.GetBeginAtom(), b.GetEndAtom())) for b in mol.GetBonds())
        if wanted:
            out += [Chem.MolToSmiles(m) for m in EnumerateStereoisomers(mol, options=options)]
        if len(out) >= limit:
            break
    return out[:limit]


def _charged_and_salts(limit):
    """Carboxylates as sodium salts and amines as hydrochlorides, built from FreeSolv molecules."""
    acid = Chem.MolFromSmarts("[CX3](=O)[OX2H1]")
    amine = Chem.MolFromSmarts("[NX3;H2,H1;!$(NC=O);!$(N-a)]")
    out = []
    for smiles in freesolv_frame()["smiles"]:
        mol = Chem.MolFromSmiles(smiles)
        if mol.HasSubstructMatch(acid):
            out.append(smiles.replace("C(=O)O", "C(=O)[O-]", 1) + ".[Na+]" if "C(=O)O" in smiles else None)
        elif mol.HasSubstructMatch(amine):
            salt = Chem.RWMol(mol)
            nitrogen = salt.GetAtomWithIdx(mol.GetSubstructMatch(amine)[0])
            nitrogen.SetFormalCharge(1)
            nitrogen.SetNumExplicitHs(nitrogen.GetTotalNumHs() + 1)
            nitrogen.SetNoImplicit(True)
            out.append(f"[Cl-].{Chem.MolToSmiles(salt)}")
    return [s for s in out if s and Chem.MolFromSmiles(s) is not None][:limit]


MOLECULES = (
    _stereo_variants(60, "centre")
    + _stereo_variants(30, "bond")
    + _charged_and_salts(30)
    + [
        "N[C@@H](C)C(=O)O", "C[C@@H](N)C(=O)O", "F[C@H](Cl)Br", "C/C=C/C(=O)O", "C/C=C\\C(=O)O",
        "[NH4+].[Cl-]", "C[N+](C)(C)C.[Br-]", "c1ccc2[nH]ccc2c1", "O=S(=O)([O-])c1ccccc1.[K+]",
        "CC(C)(C)c1ccc(O)cc1", "[O-][n+]1ccccc1", "Cc1cc(C)[n+](C)c(C)c1.[I-]",
    ]
    + list(freesolv_frame()["smiles"][:150])
)


def _writings(smiles, count, seed):
    """``smiles`` and ``count`` random writings: atoms (and so fragments) shuffled, then RDKit's
    random SMILES (``doRandom``) of each."""
    mol = Chem.MolFromSmiles(smiles)
    rng = np.random.default_rng(seed)
    out = [smiles]
    for _ in range(count):
        shuffled = Chem.RenumberAtoms(mol, rng.permutation(mol.GetNumAtoms()).tolist())
        out.append(Chem.MolToSmiles(shuffled, canonical=False, doRandom=True))
    return out


def _predictor(model, preset):
    loaded = LoadedCheckpoint(seeded_model(preset, seed=11), CheckpointMeta(preset.featurizer, preset.relation, ["y"]), "test")
    return Predictor(loaded, device="cpu")


def test_the_molecule_set_covers_the_required_kinds():
    mols = [Chem.MolFromSmiles(s) for s in MOLECULES]
    assert len(set(Chem.MolToSmiles(m) for m in mols)) >= 200
    chiral = sum(any(a.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED for a in m.GetAtoms()) for m in mols)
    ez = sum(any(b.GetStereo() in (Chem.BondStereo.STEREOE, Chem.BondStereo.STEREOZ) for b in m.GetBonds()) for m in mols)
    charged = sum(any(a.GetFormalCharge() for a in m.GetAtoms()) for m in mols)
    salts = sum(len(Chem.GetMolFrags(m)) > 1 for m in mols)
    aromatic = sum(any(a.GetIsAromatic() for a in m.GetAtoms()) for m in mols)
    assert min(chiral, ez, charged, salts, aromatic) >= 10, (chiral, ez, charged, salts, aromatic)


@pytest.mark.parametrize("model, preset, count", [("grpe", "tiny", len(MOLECULES)), ("moire", "3d", 40)])
def test_every_writing_gives_the_same_graph_and_prediction(model, preset, count):
    p = tiny_preset(model, preset, num_layers=1)
    featurizer = MoleculeFeaturizer(p.featurizer, p.relation)
    predictor = _predictor(model, p)
    inputs, groups, distinct = [], [], 0
    for k, smiles in enumerate(MOLECULES[:count]):
        writings = _writings(smiles, WRITINGS, seed=k)
        distinct += len(set(writings))
        groups.append(range(len(inputs), len(inputs) + len(writings)))
        inputs += writings
    assert distinct >= 4 * count  # really different writings (small symmetric molecules have few)
    table = predictor.predict(inputs)
    assert table["error"].isna().all(), table[table["error"].notna()]
    values = table["y_pred"].to_numpy()
    spread = max(float(np.ptp(values[list(g)])) for g in groups)
    assert spread <= 1e-5, spread
    # stronger: the graphs themselves are identical, up to which input atom each node came from
    for g in groups[:: max(1, count // 25)]:
        first, _ = featurizer(inputs[g[0]])
        for i in g[1:]:
            other, _ = featurizer(inputs[i])
            for key in first.ndata:
                if key != "input_atom":
                    assert torch.equal(first.ndata[key], other.ndata[key]), (inputs[g[0]], inputs[i], key)
            assert torch.equal(torch.stack(first.edges()), torch.stack(other.edges()))
            assert torch.equal(first.edata["feat"], other.edata["feat"])


def test_input_atom_maps_every_node_back_to_its_input_atom():
    featurizer = MoleculeFeaturizer()
    for smiles in MOLECULES[:60]:
        for writing in _writings(smiles, 3, seed=1):
            graph, _ = featurizer(writing)
            mol = Chem.MolFromSmiles(writing)
            order = graph.ndata["input_atom"]
            assert order.dtype == torch.int64 and sorted(order.tolist()) == list(range(mol.GetNumAtoms()))
            assert (graph.ndata["feat"][:, 0] + 1).tolist() == [mol.GetAtomWithIdx(i).GetAtomicNum() for i in order.tolist()]
            assert [mol.GetAtomWithIdx(i).GetFormalCharge() + 5 for i in order.tolist()] == graph.ndata["feat"][:, 3].tolist()


def _mirror(smiles):
    mol = Chem.MolFromSmiles(smiles)
    for atom in mol.GetAtoms():
        if atom.GetChiralTag() == Chem.ChiralType.CHI_TETRAHEDRAL_CW:
            atom.SetChiralTag(Chem.ChiralType.CHI_TETRAHEDRAL_CCW)
        elif atom.GetChiralTag() == Chem.ChiralType.CHI_TETRAHEDRAL_CCW:
            atom.SetChiralTag(Chem.ChiralType.CHI_TETRAHEDRAL_CW)
    return Chem.MolToSmiles(mol)


def test_enantiomers_are_distinguished_and_each_is_invariant():
    # three layers: with one, the virtual node sees only the multiset of atom features, and
    # enantiomers whose two centres have equal features but swapped R/S labels look alike; with
    # two, the two centres of a dihydrocarveol pair, far apart, move the output by a few float32
    # steps only, the size of the rounding that batching the writings differently gives
    p = tiny_preset("grpe", "tiny", num_layers=3)
    predictor = _predictor("grpe", p)
    pairs = [(s, _mirror(s)) for s in MOLECULES if "@" in s]
    pairs = [(a, b) for a, b in pairs if Chem.CanonSmiles(a) != Chem.CanonSmiles(b)]  # not meso
    assert len(pairs) >= 20
    inputs = []
    for k, (a, b) in enumerate(pairs):
        inputs += _writings(a, 2, seed=k) + _writings(b, 2, seed=k + 1000)
    values = predictor.predict(inputs)["y_pred"].to_numpy().reshape(len(pairs), 2, 3)
    spread = np.ptp(values, axis=2).max()
    assert spread <= 1e-5  # each enantiomer: one prediction for all its writings
    gaps = np.abs(values[:, 0, 0] - values[:, 1, 0])
    assert gaps.min() > 10 * spread and gaps.min() > 0, [pairs[i] for i in np.flatnonzero(gaps <= 10 * spread)]
    assert np.median(gaps) > 1e-3
    # the featurized enantiomers are not isomorphic as labelled graphs (Weisfeiler-Lehman hashes
    # differ), so any model expressive enough can tell them apart
    featurizer = MoleculeFeaturizer(p.featurizer, p.relation)
    for a, b in pairs:
        assert _wl_hash(featurizer(a)[0]) != _wl_hash(featurizer(b)[0]), (a, b)


def _wl_hash(graph):
    nx_graph = nx.Graph()
    for node, row in enumerate(graph.ndata["feat"].tolist()):
        nx_graph.add_node(node, label=str(row))
    for (u, v), row in zip(zip(*(t.tolist() for t in graph.edges())), graph.edata["feat"].tolist()):
        nx_graph.add_edge(u, v, label=str(row))
    return nx.weisfeiler_lehman_graph_hash(nx_graph, node_attr="label", edge_attr="label", iterations=4)


def test_l_and_d_alanine_from_the_issue():
    p = tiny_preset("grpe", "tiny", num_layers=1)
    values = _predictor("grpe", p).predict(["N[C@@H](C)C(=O)O", "C[C@H](N)C(=O)O", "OC(=O)[C@@H](N)C",
                                            "N[C@H](C)C(=O)O"])["y_pred"].to_numpy()
    assert np.ptp(values[:3]) <= 1e-6  # three writings of L-alanine
    assert abs(values[3] - values[0]) > 1e-6  # D-alanine differs


def test_canonical_featurization_changes_the_dataset_cache_key(tmp_path):
    """Datasets cached before canonical atom order hold input-ordered graphs: their key no longer
    matches, so they are rebuilt rather than mixed with new ones."""
    import hashlib
    import json

    from dgl_graphtx.datasets import MoleculeDataset
    from dgl_graphtx.datasets.cache import cache_path

    ds = MoleculeDataset(["CCO", "N[C@@H](C)C(=O)O"], [[1.0], [2.0]], cache_dir=tmp_path, progress=False)
    settings = {**ds.settings, "fingerprint": ds.cache_file.name}  # any settings: only the format differs
    old_key = hashlib.sha256(json.dumps({"cache_format": 1, **settings}, sort_keys=True, default=str).encode()).hexdigest()[:24]
    assert cache_path(tmp_path, settings).name != f"molecules-{old_key}.pt"
    reloaded = MoleculeDataset(["CCO", "N[C@@H](C)C(=O)O"], [[1.0], [2.0]], cache_dir=tmp_path, progress=False)
    assert reloaded.cache_file == ds.cache_file  # the new cache is reused, with its input_atom maps
    assert sorted(reloaded.graphs[1].ndata["input_atom"].tolist()) == list(range(6))
