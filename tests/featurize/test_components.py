"""A row of several molecules (a tuple) featurizes into its molecules' graphs side by side: each
part equal to the molecule featurized alone, marked with its place in the row; errors name the
molecule of the row; RDKit's view of the row (to_mol, describe) keeps the row's order."""
from __future__ import annotations

import pytest
import torch
from rdkit import Chem

from dgl_graphtx.errors import InvalidMoleculeError
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer, describe_molecule, to_mol
from dgl_graphtx.featurize.molecule import prepare_input
from dgl_graphtx.relation_graph import RelationConfig


@pytest.mark.parametrize("relation", [RelationConfig(), RelationConfig(virtual_node=True), RelationConfig("hops", hops=2)])
def test_a_row_is_its_molecules_featurized_alone_side_by_side(relation):
    featurizer = MoleculeFeaturizer(relation=relation)
    row = ("CC(=O)O", "O", "c1ccccc1")
    graph, rel = featurizer(row)
    assert graph.batch_size == rel.batch_size == 1
    node, rel_node, edge, rel_edge = 0, 0, 0, 0
    for index, smiles in enumerate(row):
        alone, alone_rel = featurizer(smiles)
        n, rn = alone.num_nodes(), alone_rel.num_nodes()
        assert graph.ndata["row_molecule"][node:node + n].tolist() == [index] * n
        assert rel.ndata["row_molecule"][rel_node:rel_node + rn].tolist() == [index] * rn
        assert torch.equal(graph.ndata["feat"][node:node + n], alone.ndata["feat"])
        src, dst = graph.edges()
        e = alone.num_edges()
        assert torch.equal(src[edge:edge + e] - node, alone.edges()[0]) and torch.equal(dst[edge:edge + e] - node, alone.edges()[1])
        rsrc, _ = rel.edges()
        re = alone_rel.num_edges()
        assert torch.equal(rsrc[rel_edge:rel_edge + re] - rel_node, alone_rel.edges()[0])
        assert torch.equal(rel.edata["spd"][rel_edge:rel_edge + re], alone_rel.edata["spd"])
        node, rel_node, edge, rel_edge = node + n, rel_node + rn, edge + e, rel_edge + re
    assert (node, rel_node, edge, rel_edge) == (graph.num_nodes(), rel.num_nodes(), graph.num_edges(), rel.num_edges())


def test_an_invalid_molecule_of_a_row_is_named_by_its_place():
    with pytest.raises(InvalidMoleculeError, match="molecule 2 of the row: SMILES syntax error"):
        MoleculeFeaturizer()(("CCO", "C1CC"))
    with pytest.raises(InvalidMoleculeError, match="molecule 1 of the row: empty SMILES"):
        to_mol(("", "O"))


def test_rdkit_views_of_a_row_keep_its_order():
    assert Chem.MolToSmiles(to_mol(("O", "CCO"))) == "CCO.O"  # one molecule of both fragments
    assert describe_molecule(("O", "OCC")) == "O.OCC"  # as given, in the row's order
    with_h = Chem.AddHs(Chem.MolFromSmiles("CO"))
    prepared = prepare_input((with_h, "O"), FeaturizerConfig())
    assert prepared[0].GetNumAtoms() == 2 and prepared[1] == "O"
