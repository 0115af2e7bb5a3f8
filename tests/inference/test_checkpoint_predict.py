"""Checkpoints and prediction: train -> save -> load -> predict end to end, invalid inputs,
safe loading, corrupt files and atomic writes."""
from __future__ import annotations

import math
import pickle
import re

import numpy as np
import pandas as pd
import pytest
import torch

from conftest_models import freesolv_rows, seeded_model, tiny_preset

import dgl
from dgl_graphtx.checkpoint import CHECKPOINT_KIND, CheckpointMeta, content_checksum, load_checkpoint, save_checkpoint
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import CheckpointError, ConfigError
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.inference import Predictor, predict_smiles
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig

TARGETS = ["dG_hyd", "dG_calc"]
#: Their prediction columns.
PREDICTED = [f"{t}_pred" for t in TARGETS]
QUERY = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "ClC(Cl)(Cl)Cl", "CCCCCCCC", "OC(=O)c1ccccc1"]
INVALID = {"syntax": "C1CC(", "valence": "C(C)(C)(C)(C)C", "empty": "", "kekulize": "c1cccc1"}


class NotAWeight:
    """A custom class: pickling it into a checkpoint must not be loadable with weights_only."""

    def __init__(self):
        self.payload = "arbitrary code could live here"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A GRPE (1 layer, width 16) trained for 2 epochs on 40 FreeSolv molecules, two targets."""
    out = tmp_path_factory.mktemp("run")
    frame = freesolv_rows(0, 40).rename(columns={"expt": TARGETS[0], "calc": TARGETS[1]})
    preset = tiny_preset("grpe", "tiny", num_layers=1, num_tasks=2)
    ds = MoleculeDataset.from_dataframe(frame, target_cols=TARGETS, featurizer=preset.featurizer,
                                        relation=preset.relation, progress=False)
    result = train_and_evaluate(ds, preset, TrainConfig(epochs=2, batch_size=16, progress=False, device="cpu"), out_dir=out)
    return preset, result, out


def _reference_predictions(model, preset, smiles):
    """In-memory predictions, featurized one molecule at a time and batched with dgl.batch."""
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    graphs, relations = zip(*(featurizer(s) for s in smiles))
    return model.predict(dgl.batch(graphs), dgl.batch(relations)).double().numpy()


# --------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------
def test_experiment_writes_its_outputs(trained):
    _, result, out = trained
    for name in ("best.pt", "log.csv", "learning_curve.png", "metrics.json", "test_predictions.csv", "input_report.csv"):
        assert (out / name).is_file(), name
    assert len(pd.read_csv(out / "log.csv")) == 2
    assert sorted(result.test_metrics) == ["mae", "r2", "rmse"]


def test_loaded_checkpoint_predicts_like_the_trained_model(trained):
    preset, result, out = trained
    predictor = Predictor(out / "best.pt", device="cpu")
    table = predictor.predict(QUERY)
    assert list(table.columns) == ["smiles", "canonical_smiles", *PREDICTED, "error", "warning"]
    expected = _reference_predictions(result.model, preset, QUERY)
    np.testing.assert_allclose(table[PREDICTED].to_numpy(), expected, atol=1e-6, rtol=0)
    assert table["error"].isna().all()
    # the loaded model is in eval mode and has the trained target statistics
    assert not predictor.model.training
    assert torch.equal(predictor.model.target_mean, result.model.target_mean.cpu())
    # and it reproduces the experiment's own test predictions
    test_table = pd.read_csv(out / "test_predictions.csv")
    again = predictor.predict(list(test_table["smiles"]))
    for name in TARGETS:
        np.testing.assert_allclose(again[f"{name}_pred"].to_numpy(), test_table[f"{name}_pred"].to_numpy(), atol=1e-5)


def test_target_names_come_from_the_checkpoint(trained):
    _, _, out = trained
    predictor = Predictor(out / "best.pt", device="cpu")
    assert predictor.target_names == TARGETS
    assert load_checkpoint(out / "best.pt").meta.target_names == TARGETS


def test_predict_smiles_one_row_per_input_in_order(trained):
    preset, result, out = trained
    inputs = [QUERY[0], INVALID["syntax"], QUERY[1], INVALID["valence"], INVALID["empty"], QUERY[2], INVALID["kekulize"]]
    table = predict_smiles(inputs, out / "best.pt", device="cpu")
    assert len(table) == len(inputs)
    assert list(table["smiles"]) == inputs
    invalid_rows = [1, 3, 4, 6]
    for row in range(len(inputs)):
        values = table.loc[row, PREDICTED].to_numpy(dtype=float)
        if row in invalid_rows:
            assert np.isnan(values).all(), row
            assert isinstance(table.loc[row, "error"], str) and table.loc[row, "error"].strip(), row
        else:
            assert np.isfinite(values).all(), row
            assert pd.isna(table.loc[row, "error"]), row
    # valid rows equal the reference in-memory predictions
    valid = [QUERY[0], QUERY[1], QUERY[2]]
    np.testing.assert_allclose(table.loc[[0, 2, 5], PREDICTED].to_numpy(dtype=float),
                               _reference_predictions(result.model, preset, valid), atol=1e-6)
    assert "valence" in table.loc[3, "error"].lower()
    assert "empty" in table.loc[4, "error"].lower()


def test_predict_with_all_inputs_invalid_never_raises(trained):
    _, _, out = trained
    inputs = [INVALID["syntax"], INVALID["empty"], INVALID["valence"]]
    table = predict_smiles(inputs, out / "best.pt", device="cpu")
    assert list(table.columns) == ["smiles", "canonical_smiles", *PREDICTED, "error", "warning"]
    assert len(table) == 3 and list(table["smiles"]) == inputs
    assert table[PREDICTED].isna().all().all()
    assert table["error"].map(lambda e: isinstance(e, str) and bool(e.strip())).all()
    empty = predict_smiles([], out / "best.pt", device="cpu")
    assert len(empty) == 0 and list(empty.columns) == ["smiles", "canonical_smiles", *PREDICTED, "error", "warning"]


def test_single_smiles_string(trained):
    preset, result, out = trained
    table = predict_smiles("CCO", out / "best.pt", device="cpu")
    assert len(table) == 1 and table.loc[0, "smiles"] == "CCO"
    np.testing.assert_allclose(table.loc[[0], PREDICTED].to_numpy(dtype=float),
                               _reference_predictions(result.model, preset, ["CCO"]), atol=1e-6)


def test_predictions_do_not_depend_on_batch_size(trained):
    _, _, out = trained
    inputs = QUERY + [INVALID["syntax"]] + QUERY[::-1]
    big = Predictor(out / "best.pt", device="cpu", batch_size=256).predict(inputs)
    small = Predictor(out / "best.pt", device="cpu", batch_size=2).predict(inputs)
    np.testing.assert_allclose(big[PREDICTED].to_numpy(dtype=float), small[PREDICTED].to_numpy(dtype=float), atol=1e-6)
    # the same SMILES gives the same prediction wherever it sits in the list
    np.testing.assert_allclose(big.loc[0, PREDICTED].to_numpy(dtype=float), big.loc[len(inputs) - 1, PREDICTED].to_numpy(dtype=float),
                               atol=1e-6)


def test_predictions_do_not_depend_on_featurizing_workers(trained):
    _, _, out = trained
    inputs = (QUERY + [INVALID["syntax"]]) * 40  # parts of at least 64 molecules go to the two processes
    one = Predictor(out / "best.pt", device="cpu").predict(inputs)
    two = Predictor(out / "best.pt", device="cpu", workers=2, chunk_size=150).predict(inputs)
    pd.testing.assert_frame_equal(two, one)
    assert one["error"].notna().sum() == 40


@pytest.mark.parametrize("container", [pd.Series, np.array], ids=["series", "ndarray"])
def test_predict_accepts_series_and_arrays(trained, container):
    _, _, out = trained
    table = Predictor(out / "best.pt", device="cpu").predict(container(QUERY[:3]))
    assert len(table) == 3 and table["error"].isna().all()


def test_a_series_keeps_its_index_so_predictions_assigned_back_line_up(trained):
    """The probe: a Series left by a filter (index 10, 20, ...) came back numbered from 0, so
    ``df["y_pred"] = predict(df["smiles"])["y_pred"]`` aligned nothing (NaN) or the wrong rows."""
    _, _, out = trained
    predictor = Predictor(out / "best.pt", device="cpu")
    frame = pd.DataFrame({"smiles": QUERY[:6]}, index=[50, 40, 30, 20, 10, 0]).iloc[1::2]  # after a filter: 40, 20, 0
    frame["dG_hyd_pred"] = predictor.predict(frame["smiles"])["dG_hyd_pred"]
    alone = [predictor.predict([s])["dG_hyd_pred"][0] for s in frame["smiles"]]
    np.testing.assert_allclose(frame["dG_hyd_pred"].to_numpy(), alone, rtol=0, atol=1e-6)
    assert predictor.predict(list(frame["smiles"])).index.tolist() == [0, 1, 2]  # other inputs: numbered from 0
    embedded = predictor.embed(frame["smiles"])  # the table keeps the index; the vectors are in input order
    assert embedded.table.index.tolist() == [40, 20, 0] and embedded.table["smiles"].tolist() == frame["smiles"].tolist()


@pytest.mark.parametrize("given, said", [(pd.DataFrame({"id": [1], "SMILES": ["CCO"]}), "got a DataFrame (columns 'id', 'SMILES'): "
                                          "pass its column of SMILES, e.g. table['SMILES']"),
                                         ({"a": "CCO"}, "got a dict, whose iteration gives its keys")])
def test_a_table_or_mapping_is_refused_instead_of_predicting_its_column_names(trained, given, said):
    """The probe: predict(df) predicted the column name "smiles" as a molecule (one row, NaN, a
    syntax error) and a dict its keys, with no word that the input was not molecules."""
    _, _, out = trained
    with pytest.raises(ConfigError, match=re.escape(said)):
        Predictor(out / "best.pt", device="cpu").predict(given)


# --------------------------------------------------------------------------------------------
# safe loading
# --------------------------------------------------------------------------------------------
def test_checkpoint_loads_with_weights_only(trained):
    preset, result, out = trained
    payload = torch.load(out / "best.pt", weights_only=True)
    assert payload["kind"] == CHECKPOINT_KIND
    assert payload["target_names"] == TARGETS
    assert payload["model_config"]["variant"] == "grpe" and payload["model_config"]["num_tasks"] == 2
    state = result.model.state_dict()
    assert set(payload["state_dict"]) == set(state)
    assert all(torch.equal(payload["state_dict"][k], state[k].cpu()) for k in state)
    assert payload["featurizer"] == preset.featurizer.to_dict()
    assert payload["extra"]["epoch"] == result.train.best_epoch


def sealed(payload):
    """``payload`` with a checksum matching its (edited) content, so only the edit is tested."""
    return {**payload, "checksum": content_checksum(payload)}


@pytest.fixture()
def good_payload(trained):
    _, _, out = trained
    return torch.load(out / "best.pt", weights_only=True)


def test_corrupt_files_raise_checkpoint_error(trained, tmp_path):
    _, _, out = trained
    raw = (out / "best.pt").read_bytes()
    cases = {
        "truncated.pt": lambda p: p.write_bytes(raw[: len(raw) // 2]),
        "random.pt": lambda p: p.write_bytes(np.random.default_rng(0).bytes(4096)),
        "empty.pt": lambda p: p.write_bytes(b""),
        "object.pt": lambda p: torch.save({"kind": CHECKPOINT_KIND, "evil": NotAWeight()}, p),
        "pickle.pt": lambda p: p.write_bytes(pickle.dumps(NotAWeight())),
    }
    for name, write in cases.items():
        path = tmp_path / name
        write(path)
        with pytest.raises(CheckpointError, match="cannot read checkpoint") as info:
            load_checkpoint(path)
        assert str(path) in str(info.value), name
        assert "\n" not in str(info.value)
        with pytest.raises(CheckpointError):
            Predictor(path, device="cpu")


def test_missing_file_and_folder_raise_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError):
        predict_smiles(["CCO"], tmp_path / "nope.pt")


def test_wrong_kind_and_newer_format_raise_checkpoint_error(good_payload, tmp_path):
    torch.save({"kind": "some-other-tool", "state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a dgl_graphtx checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    torch.save({"weights": torch.ones(3)}, tmp_path / "plain.pt")
    with pytest.raises(CheckpointError, match="not a dgl_graphtx checkpoint"):
        load_checkpoint(tmp_path / "plain.pt")
    torch.save([torch.ones(3)], tmp_path / "list.pt")
    with pytest.raises(CheckpointError, match="not a dgl_graphtx checkpoint"):
        load_checkpoint(tmp_path / "list.pt")
    torch.save({**good_payload, "version": 99}, tmp_path / "future.pt")
    with pytest.raises(CheckpointError, match="upgrade"):
        load_checkpoint(tmp_path / "future.pt")


def test_state_dict_not_fitting_its_config_raises_checkpoint_error(good_payload, tmp_path):
    state = good_payload["state_dict"]
    missing = dict(state)
    missing.pop(next(k for k in state if k.startswith("blocks.0.attention.qkv")))
    extra = {**state, "blocks.7.attention.qkv.weight": torch.zeros(3, 3)}
    resized = {k: (torch.zeros(v.shape[0] + 1, *v.shape[1:]) if k == "head.bias" else v) for k, v in state.items()}
    wider_config = {**good_payload["model_config"], "hidden_dim": 32}
    cases = {
        "missing.pt": {**good_payload, "state_dict": missing},
        "extra.pt": {**good_payload, "state_dict": extra},
        "resized.pt": {**good_payload, "state_dict": resized},
        "config.pt": {**good_payload, "model_config": wider_config},
        "nokey.pt": {k: v for k, v in good_payload.items() if k != "model_config"},
        "badkey.pt": {**good_payload, "model_config": {**good_payload["model_config"], "hiden_dim": 3}},
        "badfeat.pt": {**good_payload, "featurizer": {**good_payload["featurizer"], "atom_features": "morgan"}},
    }
    for name, payload in cases.items():
        torch.save(sealed(payload), tmp_path / name)
        with pytest.raises(CheckpointError, match="inconsistent") as info:
            load_checkpoint(tmp_path / name)
        assert str(tmp_path / name) in str(info.value), name
    # the untouched payload still loads (the cases above fail for their change only)
    torch.save(good_payload, tmp_path / "ok.pt")
    assert load_checkpoint(tmp_path / "ok.pt").meta.target_names == TARGETS


def test_invalid_nested_option_in_checkpoint_raises_checkpoint_error(good_payload, tmp_path):
    config = {**good_payload["model_config"], "grpe": {**good_payload["model_config"]["grpe"], "mode": "papr"}}
    torch.save(sealed({**good_payload, "model_config": config}), tmp_path / "mode.pt")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "mode.pt")


# --------------------------------------------------------------------------------------------
# saving
# --------------------------------------------------------------------------------------------
def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    p = tiny_preset("vanilla", "tiny", num_layers=1)
    meta = CheckpointMeta(p.featurizer, p.relation, ["y"])
    first = seeded_model(p, seed=1)
    path = save_checkpoint(tmp_path / "m.pt", first, meta)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.pt"]
    # overwrite with another model: replaced, still no leftovers
    second = seeded_model(p, seed=2)
    save_checkpoint(path, second, meta)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.pt"]
    loaded = load_checkpoint(path).model.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in second.state_dict().items())


def test_failed_save_keeps_the_old_file_and_cleans_up(tmp_path, monkeypatch):
    p = tiny_preset("vanilla", "tiny", num_layers=1)
    meta = CheckpointMeta(p.featurizer, p.relation, ["y"])
    old = seeded_model(p, seed=1)
    path = save_checkpoint(tmp_path / "m.pt", old, meta)
    before = path.read_bytes()
    real_save = torch.save

    def crash_midway(obj, handle, *args, **kwargs):
        handle.write(b"partial garbage")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, seeded_model(p, seed=2), meta)
    monkeypatch.setattr(torch, "save", real_save)
    assert path.read_bytes() == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["m.pt"]


def test_save_rejects_wrong_number_of_target_names(tmp_path):
    p = tiny_preset("vanilla", "tiny", num_layers=1, num_tasks=2)
    with pytest.raises(ConfigError):
        save_checkpoint(tmp_path / "m.pt", seeded_model(p), CheckpointMeta(p.featurizer, p.relation, ["only_one"]))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("model,preset", [("gradformer", "default"), ("moire", "3d")])
def test_round_trip_keeps_predictions_for_other_variants(model, preset, tmp_path):
    """Featurizer settings (RWSE, 3-D coordinates) travel with the checkpoint."""
    p = tiny_preset(model, preset, num_layers=1)
    net = seeded_model(p).eval()
    net.set_target_normalization(torch.tensor([-3.0]), torch.tensor([2.0]))
    path = save_checkpoint(tmp_path / "m.pt", net, CheckpointMeta(p.featurizer, p.relation, ["y"]))
    table = Predictor(path, device="cpu").predict(QUERY[:4])
    np.testing.assert_allclose(table[["y_pred"]].to_numpy(dtype=float), _reference_predictions(net, p, QUERY[:4]), atol=1e-6)
    assert not math.isnan(table.loc[0, "y_pred"])
