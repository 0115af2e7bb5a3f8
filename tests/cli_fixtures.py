"""Module-scoped fixtures of the command-line tests: a work folder, a 30-molecule FreeSolv CSV and
a tiny untrained checkpoint. Import them into a test module to use them there."""
from __future__ import annotations

import pytest

from conftest_models import freesolv_rows, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def data_csv(workdir):
    path = workdir / "data.csv"
    freesolv_rows(0, 30)[["smiles", "expt"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def checkpoint(workdir):
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    return save_checkpoint(workdir / "m.pt", seeded_model(preset), CheckpointMeta(preset.featurizer, preset.relation, ["expt"]))
