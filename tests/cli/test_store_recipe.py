"""train STORE takes the model the store was featurized for, and a store featurized for another
model is refused with the CLI flags that fix it."""
from __future__ import annotations

import json

import pytest
import yaml
from rdkit import Chem

from conftest_models import freesolv_rows
from cli_runner import assert_one_error_line, run_cli


@pytest.fixture(scope="module")
def moire_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    data = root / "d.csv"
    freesolv_rows(0, 24)[["smiles", "expt"]].to_csv(data, index=False)
    code, _, err = run_cli(["featurize", data, "--out", root / "store", "--targets", "expt", "--model", "moire", "--no-progress"])
    assert code == 0, err
    return root / "store"


def test_featurize_records_the_model(moire_store):
    assert json.loads((moire_store / "featurized_for.json").read_text()) == {"model": "moire", "preset": "2d", "atom_features": "ogb"}


def test_train_store_without_a_model_trains_the_stores_model(moire_store, tmp_path):
    code, _, err = run_cli(["train", moire_store, "--targets", "expt", "--out", tmp_path / "o", "--epochs", "1", "--no-progress",
                            "--device", "cpu", "--set", "model.num_layers=1", "model.hidden_dim=16"])
    assert code == 0, err
    config = yaml.safe_load((tmp_path / "o" / "config.yaml").read_text())
    assert config["preset"] == {"model": "moire", "name": "2d"}


def test_a_store_of_another_model_is_refused_in_cli_terms(moire_store, tmp_path):
    line = assert_one_error_line(run_cli(["train", moire_store, "--targets", "expt", "--out", tmp_path / "o", "--model", "grpe"]),
                                 "--model moire --preset 2d", "relation 'complete'")
    assert "preset.featurizer" not in line and not (tmp_path / "o" / "best.pt").exists()


def test_a_store_featurized_within_another_atom_budget_is_refused(tmp_path):
    """``train STORE --set data.max_atoms=N`` trained on every molecule of the store, whatever its
    budget, and config.yaml recorded N: a run its own config could not repeat on the input file.
    Without a ``data.max_atoms``, the run takes the store's budget, as it takes its model."""
    data = tmp_path / "d.csv"
    rows = freesolv_rows(0, 24)[["smiles", "expt"]]
    rows.to_csv(data, index=False)
    code, _, err = run_cli(["featurize", data, "--out", tmp_path / "store", "--targets", "expt", "--model", "vanilla",
                            "--max-atoms", "8", "--no-progress"])
    assert code == 0, err
    train = ["train", tmp_path / "store", "--targets", "expt", "--epochs", "1", "--no-progress", "--device", "cpu",
             "--set", "model.num_layers=1", "model.hidden_dim=16"]
    assert_one_error_line(run_cli([*train, "data.max_atoms=5", "--out", tmp_path / "b"]), "atom budget of 8", "asks for 5",
                          "--set data.max_atoms=8")
    assert not (tmp_path / "b" / "best.pt").exists()
    kept = sum(Chem.MolFromSmiles(smiles).GetNumAtoms() <= 8 for smiles in rows["smiles"])
    assert 0 < kept < len(rows)
    for given, out in ((["data.max_atoms=8"], "c"), ([], "a")):
        code, _, err = run_cli([*train, *given, "--out", tmp_path / out])
        assert code == 0, err
        assert sum(json.loads((tmp_path / out / "metrics.json").read_text())["sizes"].values()) == kept
        assert yaml.safe_load((tmp_path / out / "config.yaml").read_text())["data"]["max_atoms"] == 8
