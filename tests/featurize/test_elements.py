"""Element classes read back from the atom features, against RDKit's atoms of the same nodes."""
from __future__ import annotations

import pytest
from rdkit import Chem

from conftest import FRAGMENTED_SMILES, REFERENCE_SMILES
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.featurize.elements import attached_hydrogens, element_classes, element_index, element_symbol, hydrogen_class

#: Elements of both vocabularies, one outside the canonical one (Xe), and hydrogens as nodes.
SMILES = REFERENCE_SMILES + FRAGMENTED_SMILES + ["FC(Cl)(Br)I", "[SiH4]", "OP(=O)(O)O", "[Xe]", "F[Xe]F", "B(O)O", "[Se]", "[NH4+]"]


@pytest.mark.parametrize("atom_features", ["ogb", "canonical"])
@pytest.mark.parametrize("hydrogens", [False, True])
def test_element_of_every_node_is_rdkits(atom_features, hydrogens):
    featurizer = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features, explicit_hydrogens=hydrogens))
    for smiles in SMILES:
        mol, _ = featurizer.prepare(smiles)  # the molecule whose atoms are the nodes, in node order
        graph = featurizer.molecular_graph(smiles)
        index = element_index(graph.ndata["feat"], atom_features)
        assert index.max() < element_classes(atom_features)
        expected = [a.GetSymbol() for a in mol.GetAtoms()]
        if atom_features == "canonical":
            expected = ["other" if s == "Xe" else s for s in expected]
        assert [element_symbol(int(i), atom_features) for i in index] == expected, smiles


def test_ogb_classes_are_atomic_numbers_minus_one():
    table = Chem.GetPeriodicTable()
    assert [element_symbol(z - 1, "ogb") for z in (1, 6, 8, 54, 118)] == [table.GetElementSymbol(z) for z in (1, 6, 8, 54, 118)]
    assert element_symbol(118, "ogb") == "other"


@pytest.mark.parametrize("atom_features", ["ogb", "canonical"])
@pytest.mark.parametrize("hydrogens", [False, True])
def test_attached_hydrogens_complete_the_formula(atom_features, hydrogens):
    featurizer = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features, explicit_hydrogens=hydrogens))
    for smiles in SMILES:
        mol, _ = featurizer.prepare(smiles)
        feat = featurizer.molecular_graph(smiles).ndata["feat"]
        attached = attached_hydrogens(feat, atom_features)
        assert attached.tolist() == [a.GetTotalNumHs() for a in mol.GetAtoms()], smiles
        nodes = int((element_index(feat, atom_features) == hydrogen_class(atom_features)).sum())
        formula = sum(a.GetSymbol() == "H" for a in Chem.AddHs(Chem.MolFromSmiles(smiles)).GetAtoms())
        assert nodes + int(attached.sum()) == formula, smiles
