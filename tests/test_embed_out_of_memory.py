"""Embedding under memory pressure: a batch that runs out of memory is split in halves, and only a
molecule that still does not fit gets an error row."""
from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem

from conftest_models import freesolv_rows, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.predict import Predictor

MOLECULES = list(freesolv_rows(0, 60)["smiles"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    preset = tiny_preset("grpe", "tiny", num_layers=1)
    path = tmp_path_factory.mktemp("embed") / "m.pt"
    return save_checkpoint(path, seeded_model(preset, seed=5), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))


def test_out_of_memory_batch_is_split_and_only_the_culprit_fails(checkpoint, monkeypatch):
    reference = Predictor(checkpoint, device="cpu", batch_size=1).embed(MOLECULES, atoms=True)
    predictor = Predictor(checkpoint, device="cpu", batch_size=64)
    real = predictor.model.embed
    limit = 10  # "memory" enough for batches whose largest molecule has at most 10 atoms

    def tight_memory(graph, relation):
        if int(graph.batch_num_nodes().max()) > limit:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(graph, relation)

    monkeypatch.setattr(predictor.model, "embed", tight_memory)
    result = predictor.embed(MOLECULES, atoms=True)
    sizes = np.array([Chem.MolFromSmiles(s).GetNumAtoms() for s in MOLECULES])
    culprits = sizes > limit
    assert culprits.any() and not culprits.all()
    assert result.table.loc[culprits, "error"].str.contains("out of memory").all()
    assert result.table.loc[~culprits, "error"].isna().all()
    assert np.isnan(result.molecules[culprits]).all()
    np.testing.assert_allclose(result.molecules[~culprits], reference.molecules[~culprits], rtol=0, atol=1e-5)
    for row in np.flatnonzero(culprits):
        assert result.atoms[row] is None
    for row in np.flatnonzero(~culprits):
        np.testing.assert_allclose(result.atoms[row], reference.atoms[row], rtol=0, atol=1e-5)


def test_other_runtime_errors_are_not_swallowed(checkpoint, monkeypatch):
    predictor = Predictor(checkpoint, device="cpu")

    def broken(graph, relation):
        raise RuntimeError("shape mismatch: a bug, not a memory problem")

    monkeypatch.setattr(predictor.model, "embed", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        predictor.embed(["CCO"])
