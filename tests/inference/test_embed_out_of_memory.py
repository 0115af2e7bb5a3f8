"""Embedding under memory pressure: a batch that runs out of memory is split in halves, and only a
molecule that still does not fit gets an error row."""
from __future__ import annotations

import numpy as np
import pytest

from conftest_models import freesolv_rows, tiny_checkpoint
from memory_pressure import broken, larger_than, out_of_memory_above

from dgl_graphtx.inference import Predictor

MOLECULES = list(freesolv_rows(0, 60)["smiles"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("embed"), "grpe", seed=5, num_layers=1)


def test_out_of_memory_batch_is_split_and_only_the_culprit_fails(checkpoint, monkeypatch):
    reference = Predictor(checkpoint, device="cpu", batch_size=1).embed(MOLECULES, atoms=True)
    predictor = Predictor(checkpoint, device="cpu", batch_size=64)
    limit = 10  # "memory" enough for batches whose largest molecule has at most 10 atoms
    monkeypatch.setattr(predictor.model, "embed", out_of_memory_above(predictor.model.embed, limit,
                                                                      "CUDA out of memory. Tried to allocate 2.00 GiB"))
    result = predictor.embed(MOLECULES, atoms=True)
    culprits = larger_than(MOLECULES, limit)
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
    monkeypatch.setattr(predictor.model, "embed", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        predictor.embed(["CCO"])
