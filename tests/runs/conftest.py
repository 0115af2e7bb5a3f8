"""Fixtures shared by the tests of training runs."""
from __future__ import annotations

import pytest

from dgl_graphtx.datasets import freesolv


@pytest.fixture(scope="module")
def search_csv(tmp_path_factory):
    """30 FreeSolv molecules (``smiles``, ``expt``): enough for a hyperparameter search's trials."""
    path = tmp_path_factory.mktemp("hp") / "tiny.csv"
    freesolv()[:30][["smiles", "expt"]].to_csv(path, index=False)
    return path
