"""The shared featurize-and-pack path: packed graphs equal the molecules featurized one by one,
failed rows keep their reasons, in input order."""
from __future__ import annotations

import pytest
import torch

import dgl_graphtx  # noqa: F401  (before dgl)
import dgl

from dgl_graphtx.datasets import featurize_and_pack
from dgl_graphtx.featurize import MoleculeFeaturizer

INPUTS = ["CCO", "C1CC", "c1ccccc1O", "", "[Na+].[Cl-]", "not smiles"]


def test_packed_graphs_equal_the_molecules_featurized_one_by_one():
    featurizer = MoleculeFeaturizer()
    done = featurize_and_pack(featurizer, INPUTS)
    assert done.rows == [0, 2, 4]
    assert [e is None for e in done.errors] == [True, False, True, False, True, False]
    assert done.errors[3] == "empty SMILES"
    for packed, part in ((done.graphs, 0), (done.relations, 1)):
        expected = dgl.batch([featurizer(INPUTS[r])[part] for r in done.rows])
        got = packed.batch(list(range(len(done.rows))))
        assert got.batch_num_nodes().tolist() == expected.batch_num_nodes().tolist()
        assert [t.tolist() for t in got.edges()] == [t.tolist() for t in expected.edges()]
        for key, value in expected.ndata.items():
            assert torch.equal(got.ndata[key], value), key
        for key, value in expected.edata.items():
            assert torch.equal(got.edata[key], value), key


def test_no_valid_molecule_gives_no_graphs_and_every_reason():
    done = featurize_and_pack(MoleculeFeaturizer(), ["", "C1C"])
    assert done.rows == [] and done.graphs is None and done.relations is None
    assert done.errors == ["empty SMILES", "SMILES syntax error (RDKit could not parse it)"]


def test_an_error_handler_hears_each_failure_and_can_stop_at_the_first():
    heard = []
    featurize_and_pack(MoleculeFeaturizer(), INPUTS, on_error=lambda row, why: heard.append(row))
    assert heard == [1, 3, 5]

    def stop(row, why):
        raise ValueError(f"row {row}: {why}")

    with pytest.raises(ValueError, match="row 1: SMILES syntax error"):
        featurize_and_pack(MoleculeFeaturizer(), INPUTS, on_error=stop)
