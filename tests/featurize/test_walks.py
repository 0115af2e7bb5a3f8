"""Random-walk encodings and the bond graph, against DGL's and dgllife's own functions."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from dgllife.utils.mol_to_graph import construct_bigraph_from_mol
from rdkit import Chem

import dgl
from conftest import FRAGMENTED_SMILES, REFERENCE_SMILES
from dgl_graphtx.featurize.molecule import bond_graph
from dgl_graphtx.featurize.walks import random_walk_landing


@pytest.mark.parametrize("smiles", REFERENCE_SMILES + FRAGMENTED_SMILES)
def test_bond_graph_is_dgllifes_bigraph(smiles):
    mol = Chem.MolFromSmiles(smiles)
    ours, theirs = bond_graph(mol), construct_bigraph_from_mol(mol)
    assert ours.idtype == torch.int64 and ours.num_nodes() == theirs.num_nodes() == mol.GetNumAtoms()
    for mine, reference in zip(ours.edges(), theirs.edges()):
        assert mine.tolist() == reference.tolist()


@pytest.mark.parametrize("smiles", REFERENCE_SMILES + FRAGMENTED_SMILES + ["C", "[Na+].[Cl-]"])
def test_random_walk_landing_is_dgls_random_walk_pe(smiles):
    graph = bond_graph(Chem.MolFromSmiles(smiles))
    src, dst = (t.numpy() for t in graph.edges())
    expected = dgl.random_walk_pe(graph, 12)
    found = random_walk_landing(graph.num_nodes(), src, dst, 12)
    assert found.dtype == torch.float32 and found.shape == expected.shape
    torch.testing.assert_close(found, expected, rtol=0, atol=1e-7)


def test_an_edge_given_twice_counts_twice():
    # 0 -> 1 twice, 0 -> 2 once: the walk from 0 goes to 1 with probability 2/3, and every walk returns
    src, dst = np.array([0, 0, 0, 1, 2]), np.array([1, 1, 2, 0, 0])
    graph = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)))
    found = random_walk_landing(3, src, dst, 4)
    torch.testing.assert_close(found, dgl.random_walk_pe(graph, 4), rtol=0, atol=1e-7)
    torch.testing.assert_close(found[:, 1], torch.tensor([1.0, 2 / 3, 1 / 3]))


def test_no_steps_gives_an_empty_encoding():
    assert random_walk_landing(3, np.array([0]), np.array([1]), 0).shape == (3, 0)
