"""``train --resume`` continues the run in OUT on the data and split it was trained on, or refuses;
and a folder holding a finished run is never trained over without ``--overwrite``, whatever
``--resume`` says. A run is stopped after its first epoch (KeyboardInterrupt, as Ctrl-C) and
resumed with another file, the same file in another order of rows, another split or the same."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from conftest_models import freesolv_rows
from cli_runner import assert_one_error_line, run_cli, stopped_after_first_epoch


EPOCHS = ["--epochs", "3"]


def _argv(data, out, *extra):
    return ["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--preset", "tiny",
            "--set", "model.num_layers=1", "--batch-size", "16", "--device", "cpu", "--no-progress", "--no-cache", *EPOCHS, *extra]


def _train(data, out, *extra):
    return run_cli(_argv(data, out, *extra))


@pytest.fixture()
def data(tmp_path):
    path = tmp_path / "data.csv"
    frame = freesolv_rows(0, 60)[["smiles", "expt"]]
    frame.assign(part=["train"] * 40 + ["valid"] * 10 + ["test"] * 10).to_csv(path, index=False)
    return path


@pytest.fixture()
def stopped(data, tmp_path, monkeypatch):
    """A run of 3 epochs stopped after its first (last.pt holds epoch 1)."""
    out = tmp_path / "run"
    stopped_after_first_epoch(monkeypatch, _argv(data, out))
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    return out


def _unchanged(out, before):
    assert {name: (out / name).read_bytes() for name in before} == before


def _files(out):
    return {name: (out / name).read_bytes() for name in ("run.json", "config.yaml", "last.pt", "best.pt", "log.csv")}


def test_resume_with_another_data_file_is_refused(stopped, data, tmp_path):
    other = tmp_path / "other.csv"
    freesolv_rows(100, 160)[["smiles", "expt"]].to_csv(other, index=False)
    before = _files(stopped)
    assert_one_error_line(_train(other, stopped, "--resume"), str(stopped / "last.pt"), "other data", "60 molecules")
    _unchanged(stopped, before)


def test_resume_with_the_same_molecules_in_another_order_is_refused(stopped, data, tmp_path):
    """Same molecules, other rows: the random split puts other molecules in the test part."""
    shuffled = tmp_path / "shuffled.csv"
    pd.read_csv(data).iloc[::-1].to_csv(shuffled, index=False)
    assert_one_error_line(_train(shuffled, stopped, "--resume"), "other data")


def test_resume_with_another_split_is_refused(stopped, data):
    before = _files(stopped)
    line = assert_one_error_line(_train(data, stopped, "--resume", "--split-col", "part"), "another split", "test")
    assert "were not in it" in line
    _unchanged(stopped, before)
    assert_one_error_line(_train(data, stopped, "--resume", "--split", "scaffold"), "another split")


def test_resume_with_the_same_data_and_split_continues(stopped, data, tmp_path):
    code, _, err = _train(data, stopped, "--resume")
    assert code == 0, err
    assert json.loads((stopped / "run.json").read_text())["status"] == "complete"
    assert len(pd.read_csv(stopped / "log.csv")) == 3
    assert yaml.safe_load((stopped / "config.yaml").read_text())["data"]["path"] == str(data)


def test_training_again_into_a_stopped_run_names_it_and_offers_resume_first(stopped, data):
    """The probe (a notebook's interrupted cell run again): the refusal said only --overwrite, which
    throws the stopped run's epochs away; now it says the run stopped and that --resume continues it."""
    before = _files(stopped)
    assert_one_error_line(_train(data, stopped), str(stopped), "holds a run that stopped before it finished",
                          "use --resume (resume=True) to continue it, --overwrite (overwrite=True) to replace it")
    _unchanged(stopped, before)
    assert _train(data, stopped, "--resume")[0] == 0
    assert json.loads((stopped / "run.json").read_text())["status"] == "complete"
    assert_one_error_line(_train(data, stopped), str(stopped), "already holds a run", "--overwrite")  # finished: as before


# --------------------------------------------------------------------------------------------
# 2: a finished run is not trained over by --resume
# --------------------------------------------------------------------------------------------
def test_resume_over_a_finished_run_without_last_pt_is_refused(data, tmp_path):
    out = tmp_path / "run"
    assert _train(data, out)[0] == 0
    (out / "last.pt").unlink()
    before = {name: (out / name).read_bytes() for name in ("best.pt", "metrics.json", "run.json", "config.yaml", "log.csv")}
    line = assert_one_error_line(_train(data, out, "--resume", "--epochs", "2"), str(out), "no last.pt", "--overwrite")
    assert "best.pt" in line and "metrics.json" in line
    _unchanged(out, before)


def test_a_run_stopped_while_it_recorded_its_first_epoch_resumes_from_the_start(data, tmp_path, monkeypatch):
    """The probe: Ctrl-C after epoch 1's log.csv (and best.pt) but before its last.pt advised --resume,
    which refused the folder (results, no last.pt); it now trains the run again, as an uninterrupted run."""
    from dgl_graphtx.training.run_checkpoints import RunCheckpoints

    out, whole = tmp_path / "run", tmp_path / "whole"
    with monkeypatch.context() as patch:
        patch.setattr(RunCheckpoints, "save_last", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            _train(data, out)
    assert {"log.csv", "best.pt"} <= {p.name for p in out.iterdir()} and not (out / "last.pt").exists()
    assert json.loads((out / "run.json").read_text())["status"] == "running"
    code, _, err = _train(data, out, "--resume")
    assert code == 0, err
    assert _train(data, whole)[0] == 0
    assert (out / "test_predictions.csv").read_bytes() == (whole / "test_predictions.csv").read_bytes()
    assert len(pd.read_csv(out / "log.csv")) == 3


def test_resume_of_a_finished_run_changes_no_result(data, tmp_path):
    """With its last.pt, resuming a finished run only restores it (a rerun of a job script is harmless)."""
    out = tmp_path / "run"
    assert _train(data, out)[0] == 0
    metrics = json.loads((out / "metrics.json").read_text())
    best = (out / "best.pt").read_bytes()
    code, _, err = _train(data, out, "--resume")
    assert code == 0, err
    assert json.loads((out / "metrics.json").read_text()) == metrics and (out / "best.pt").read_bytes() == best
