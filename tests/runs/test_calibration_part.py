"""The molecules that calibrate a run's intervals never trained the model or chose its best epoch:
a carved share (whole scaffolds for a scaffold split), given rows, or a separate file; which ones
they were is recorded, and the stored quantile is the conformal quantile of their scores."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_rows, tiny_preset
from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import MoleculeDataset, Split, make_split, murcko_scaffold
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import UncertaintyConfig, conformal_quantile

SMALL = ["--model", "vanilla", "--epochs", "2", "--batch-size", "16", "--device", "cpu", "--no-progress",
         "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("calibration") / "d.csv"
    freesolv_rows(0, 120)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _dataset(preset, start=0, stop=120):
    return MoleculeDataset.from_dataframe(freesolv_rows(start, stop), target_cols=["expt"], featurizer=preset.featurizer,
                                          relation=preset.relation, progress=False)


def test_calibration_molecules_neither_train_nor_choose_the_epoch(data_csv, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--uncertainty", "mve",
                                 "--calibration-share", "0.2", *SMALL])
    assert code == 0, err
    assert "calibrated on 24 molecules (carved from train)" in stdout
    report = json.loads((out / "metrics.json").read_text())
    record = report["uncertainty"]["calibrated_on"]
    assert record["source"] == "carved from train" and record["count"] == len(record["rows"]) == 24
    assert report["sizes"] == {"train": 72, "valid": 12, "test": 12, "calibration": 24}
    # the split the run used: the 80/10/10 split of seed 0, with the calibration rows taken from its training part
    parts = make_split(MoleculeDataset(freesolv_rows(0, 120)["smiles"].tolist(), [[0.0]] * 120, progress=False),
                       "random", (0.8, 0.1, 0.1), 0)
    calibrated = set(record["rows"])
    assert calibrated <= set(parts.train) and not calibrated & (set(parts.valid) | set(parts.test))
    # the stored quantile is the conformal quantile of the calibration molecules' own scores
    table = pd.read_csv(out / "calibration_predictions.csv")
    assert sorted(table["row"]) == sorted(record["rows"])
    scores = np.abs(table["expt"] - table["expt_pred"]) / table["expt_std"]
    stored = load_checkpoint(out / "best.pt").meta.extra.uncertainty
    assert stored["calibration"]["conformal"][0] == pytest.approx(conformal_quantile(scores.to_numpy(), 0.9), rel=1e-6)
    assert stored["calibrated_on"] == record
    spread = report["uncertainty"]["expected_test_coverage"]["expt"]
    assert spread["calibration_labels"] == 24 and spread["test_labels"] == 12 and spread["low"] <= spread["mean"] <= spread["high"]


def test_a_scaffold_split_carves_whole_scaffolds():
    preset = tiny_preset("vanilla")
    dataset = _dataset(preset)
    result = train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), split="scaffold",
                                uncertainty=UncertaintyConfig("mve", calibration_share=0.15))
    part = result.calibration_part
    scaffolds = [murcko_scaffold(s) for s in dataset.identifiers]
    carved = {scaffolds[i] for i in part.indices}
    rest = {scaffolds[i] for i in result.split.train + result.split.valid + result.split.test}
    assert part.indices and not carved & rest  # every carved scaffold left the other parts whole
    # made like the scaffold split's test part: no scaffold set larger than half the part is carved
    sizes = {s: scaffolds.count(s) for s in carved}
    assert max(sizes.values()) <= round(0.15 * 120) / 2
    assert max(scaffolds.count(s) for s in set(scaffolds)) > round(0.15 * 120) / 2  # there was one to leave
    assert not set(part.indices) & set(result.split.train + result.split.valid + result.split.test)


def test_carving_from_the_validation_part_keeps_the_training_part():
    preset = tiny_preset("vanilla")
    dataset = _dataset(preset)
    uncertainty = UncertaintyConfig("mve", calibration_share=0.05, calibration_from="valid")
    result = train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), uncertainty=uncertainty)
    parts = make_split(dataset, "random", (0.8, 0.1, 0.1), 0)
    assert result.split.train == parts.train and len(result.split.valid) == 6
    assert sorted(result.split.valid + result.calibration_part.indices) == sorted(parts.valid)


def test_given_rows_and_their_checks():
    preset = tiny_preset("vanilla")
    dataset = _dataset(preset, 0, 40)
    split = Split(list(range(30)), list(range(30, 35)), list(range(35, 40)))
    result = train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), split=split,
                                uncertainty=UncertaintyConfig("mve"), calibration=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert result.split.train == list(range(10, 30)) and result.calibration_part.source == "given rows"
    with pytest.raises(ConfigError, match="in the test part"):
        train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), split=split,
                           uncertainty=UncertaintyConfig("mve"), calibration=[36])
    with pytest.raises(ConfigError, match="calibrates an uncertainty"):
        train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), split=split, calibration=[0])


def test_a_calibration_file(data_csv, tmp_path):
    calibration = tmp_path / "calibration.csv"
    freesolv_rows(200, 230)[["smiles", "expt"]].to_csv(calibration, index=False)
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--uncertainty", "mve",
                                 "--calibration", calibration, *SMALL])
    assert code == 0, err
    report = json.loads((out / "metrics.json").read_text())
    assert report["uncertainty"]["calibrated_on"] == {"source": "calibration file", "count": 30, "rows": list(range(30))}
    assert report["sizes"] == {"train": 96, "valid": 12, "test": 12, "calibration": 30}  # nothing carved from the data
    table = pd.read_csv(out / "calibration_predictions.csv")
    assert table["smiles"].tolist() == freesolv_rows(200, 230)["smiles"].tolist()


def test_calibration_settings_are_checked_first(data_csv, tmp_path):
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "a", "--calibration",
                                   data_csv, *SMALL]), "--calibration", "--uncertainty")
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "b", "--uncertainty", "mve",
                                   "--set", "uncertainty.calibration_share=0", *SMALL]), "uncertainty.calibration_share")
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "c", "--uncertainty", "mve",
                                   "--cv", "3", "--calibration", data_csv, *SMALL]), "--cv", "--calibration")


def test_ensemble_members_share_one_calibration_part_that_none_trains_on(tmp_path):
    from dgl_graphtx.runs import train_ensemble

    preset = tiny_preset("vanilla")
    dataset = _dataset(preset)
    result = train_ensemble(dataset, preset, TrainConfig(epochs=1, progress=False), ensemble_size=2,
                            uncertainty=UncertaintyConfig("mve"))
    first, second = (run.calibration_part.indices for run in result.members[0])
    assert first == second and len(first) == 12
    for run in result.members[0]:
        assert not set(first) & set(run.split.train + run.split.valid + run.split.test)
    spread = train_ensemble(dataset, preset, TrainConfig(epochs=1, progress=False), ensemble_size=2,
                            uncertainty=UncertaintyConfig("ensemble"), out_dir=tmp_path / "ens")
    record = json.loads((tmp_path / "ens" / "ensemble_metrics.json").read_text())["uncertainty"][0]["calibrated_on"]
    assert record["count"] == 12 and not set(record["rows"]) & set(spread.members[0][0].split.train)
