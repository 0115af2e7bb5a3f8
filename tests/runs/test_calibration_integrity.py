"""Calibration never sees a molecule that trained, chose or tests the model (issue 41, case C): a
resumed run calibrates on the molecules it set apart when it started (another
``--calibration-share``, ``--uncertainty`` or calibration file is refused with one line), and a
``--calibration`` file's molecules that are also in the run's data are left out, with a line
saying how many."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from rdkit import Chem

from conftest_models import freesolv_rows
from cli_runner import assert_one_error_line, run_cli, stopped_after_first_epoch


TRAIN = ["--model", "vanilla", "--preset", "tiny", "--set", "model.num_layers=1", "--batch-size", "16", "--device", "cpu",
         "--no-progress", "--no-cache", "--epochs", "3", "--uncertainty", "mve"]


def _train(data, out, *extra):
    return run_cli(["train", data, "--targets", "expt", "--out", out, *TRAIN, *extra])


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "data.csv"
    freesolv_rows(0, 60)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _calibration_file(path, first, last):
    freesolv_rows(first, last)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _stopped(monkeypatch, data, out, *extra):
    """A run of 3 epochs stopped after its first (last.pt holds epoch 1)."""
    stopped_after_first_epoch(monkeypatch, ["train", data, "--targets", "expt", "--out", out, *TRAIN, *extra])
    return out


def _files(out):
    return {name: (out / name).read_bytes() for name in ("run.json", "config.yaml", "last.pt", "log.csv")}


def test_resume_with_another_calibration_share_is_refused_and_the_same_continues(data, tmp_path, monkeypatch):
    """Was accepted: 8 of 12 calibration molecules of the resumed run had been trained on."""
    out = _stopped(monkeypatch, data, tmp_path / "run")
    before = _files(out)
    line = assert_one_error_line(_train(data, out, "--resume", "--calibration-share", "0.3"),
                                 "uncertainty.calibration_share=0.1", "now 0.3", "never trained")
    assert str(out / "last.pt") in line
    assert _files(out) == before  # refused before any work
    assert_one_error_line(_train(data, out, "--resume", "--uncertainty", "evidential"), "uncertainty.method=mve", "now evidential")
    code, _, err = _train(data, out, "--resume")
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["sizes"]["calibration"] == 6 and metrics["uncertainty"]["calibrated_on"]["source"] == "carved from train"


def test_resume_with_another_calibration_file_is_refused(data, tmp_path, monkeypatch):
    """The calibration molecules are recorded in the checkpoints with the data and checked on resume."""
    first = _calibration_file(tmp_path / "cal.csv", 100, 115)
    out = _stopped(monkeypatch, data, tmp_path / "run", "--calibration", first)
    other = _calibration_file(tmp_path / "other.csv", 120, 135)
    line = assert_one_error_line(_train(data, out, "--resume", "--calibration", other), "15 calibration molecules",
                                 "calibration file", "resume with the run's")
    assert str(out / "last.pt") in line
    assert_one_error_line(_train(data, out, "--resume"), "15 calibration molecules (calibration file)", "6 carved from train")
    code, _, err = _train(data, out, "--resume", "--calibration", first)
    assert code == 0, err


def test_calibration_file_molecules_in_the_run_are_left_out_with_a_line(data, tmp_path, caplog):
    """Was never compared: a calibration file holding training molecules calibrated on them."""
    calibration = pd.concat([freesolv_rows(100, 110), freesolv_rows(0, 4)], ignore_index=True)[["smiles", "expt"]]
    calibration.loc[calibration.index[-1], "smiles"] = Chem.MolToSmiles(Chem.MolFromSmiles(calibration["smiles"].iloc[-1]),
                                                                         doRandom=True, canonical=False)  # written otherwise
    path = tmp_path / "cal.csv"
    calibration.to_csv(path, index=False)
    out = tmp_path / "run"
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        code, _, err = _train(data, out, "--calibration", path)
    assert code == 0, err
    warned = [r.getMessage() for r in caplog.records if "calibration file" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith("4 of the 14 molecules of the calibration file are also in the run's data")
    assert "left out, 10 calibrate" in warned[0]
    calibrated_on = json.loads((out / "metrics.json").read_text())["uncertainty"]["calibrated_on"]
    assert calibrated_on["count"] == 10 and calibrated_on["left_out_as_in_the_run"] == 4
    used = pd.read_csv(out / "calibration_predictions.csv")["smiles"]
    run = {Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in pd.read_csv(data)["smiles"]}
    assert len(used) == 10 and not {Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in used} & run


def test_a_calibration_file_of_the_run_s_own_molecules_is_refused(data, tmp_path):
    path = _calibration_file(tmp_path / "cal.csv", 0, 8)
    assert_one_error_line(_train(data, tmp_path / "run", "--calibration", path),
                          "8 of the 8 molecules of the calibration file are also in the run's data", "none is left")


def test_the_run_folder_records_the_device_the_plan_resolved(data, tmp_path):
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "run", *TRAIN[:-2], "--device", "auto",
                            "--epochs", "1"])
    assert code == 0, err
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "complete" and info["device"] in ("cpu", "cuda") and info["compute"] in ("dgl", "tensors")
