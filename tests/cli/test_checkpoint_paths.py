"""Every command taking --checkpoint accepts a checkpoint file, a run folder or an ensemble folder
the same way: predict/evaluate/plot parity average an ensemble, embed and the model figures
need one model and say so in one line."""
from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

from conftest_models import freesolv_rows, tiny_preset
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.errors import CheckpointError
from dgl_graphtx.inference import resolve_checkpoints, single_checkpoint
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A run folder (best.pt, last.pt beside it) and an ensemble folder of two members."""
    root = tmp_path_factory.mktemp("ckpt")
    preset = tiny_preset("vanilla")
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["expt"])
    run, ensemble = root / "run", root / "ens"
    seed_everything(0)
    save_checkpoint(run / "best.pt", build_model(preset.model), meta)
    save_checkpoint(run / "last.pt", build_model(preset.model), meta)
    members = []
    for seed in (1, 2):
        seed_everything(seed)
        members.append(save_checkpoint(ensemble / "replicate_0" / f"member_{seed}" / "best.pt", build_model(preset.model), meta))
    data = root / "eval.csv"
    freesolv_rows(0, 8)[["smiles", "expt"]].to_csv(data, index=False)
    return run, ensemble, members, data


def test_resolver_reads_files_run_folders_and_ensembles(folders):
    run, ensemble, members, _ = folders
    assert resolve_checkpoints(run / "best.pt") == [run / "best.pt"]
    assert resolve_checkpoints(run) == [run / "best.pt"]  # not last.pt
    assert resolve_checkpoints(ensemble) == members
    assert single_checkpoint(run) == run / "best.pt"
    with pytest.raises(CheckpointError, match="holds 2 checkpoints"):
        single_checkpoint(ensemble, "embed")


def test_python_predictor_accepts_a_run_folder(folders):
    run, *_ = folders
    pd.testing.assert_frame_equal(Predictor(run).predict(["CCO", "c1ccccc1"]), Predictor(run / "best.pt").predict(["CCO", "c1ccccc1"]))


def _evaluate(checkpoint, data):
    code, stdout, err = run_cli(["evaluate", data, "--checkpoint", checkpoint, "--device", "cpu"])
    assert code == 0, err
    return json.loads(stdout)


def test_evaluate_accepts_run_and_ensemble_folders(folders, tmp_path):
    run, ensemble, members, data = folders
    assert _evaluate(run, data) == _evaluate(run / "best.pt", data)
    out = tmp_path / "rows.csv"
    code, stdout, err = run_cli(["evaluate", data, "--checkpoint", ensemble, "--device", "cpu", "--output", out])
    assert code == 0, err
    rows = pd.read_csv(out)
    smiles = freesolv_rows(0, 8)["smiles"].tolist()
    each = np.stack([Predictor(m).predict(smiles)["expt_pred"].to_numpy() for m in members])
    np.testing.assert_allclose(rows["expt_pred"], each.mean(0), atol=1e-6)
    np.testing.assert_allclose(rows["expt_std"], each.std(0), atol=1e-6)
    measured = freesolv_rows(0, 8)["expt"].to_numpy()
    assert json.loads(stdout)["rmse"] == pytest.approx(float(np.sqrt(np.mean((each.mean(0) - measured) ** 2))), rel=1e-6)


def test_plot_parity_accepts_an_ensemble_folder(folders, tmp_path):
    _, ensemble, members, data = folders
    out = tmp_path / "parity.png"
    code, _, err = run_cli(["plot", "parity", "--checkpoint", ensemble, "--data", data, "--out", out])
    assert code == 0, err
    errors = pd.read_csv(tmp_path / "parity_errors.csv")
    assert out.is_file() and len(errors) == 8


def test_one_model_commands_take_a_run_folder_and_refuse_an_ensemble_in_one_line(folders, tmp_path):
    run, ensemble, _, _ = folders
    code, _, err = run_cli(["embed", "CCO", "--checkpoint", run, "--output", tmp_path / "e.npy"])
    assert code == 0, err
    assert_one_error_line(run_cli(["embed", "CCO", "--checkpoint", ensemble, "--output", tmp_path / "e.npy"]),
                          "holds 2 checkpoints", "embed reads one model")
    assert_one_error_line(run_cli(["plot", "attention", "--checkpoint", ensemble, "--smiles", "CCO", "--out", tmp_path / "a.png"]),
                          "plot attention reads one model")


def test_a_folder_without_checkpoint_is_one_line(tmp_path):
    assert_one_error_line(run_cli(["evaluate", tmp_path / "d.csv", "--checkpoint", tmp_path]), "checkpoint not found", "run folder")


# --------------------------------------------------------------------------------------------
# an ensemble killed while a member trained: that member is left out, with a warning
# --------------------------------------------------------------------------------------------
def _mark(folder, status):
    (folder / "run.json").write_text(json.dumps({"run_id": "x", "status": status}))


def _ensemble(members, folder, statuses):
    """``folder`` holding a copy of each member's ``best.pt``, its ``run.json`` saying its status."""
    for member, status in zip(members, statuses):
        (folder / member.parent.name).mkdir(parents=True)
        (folder / member.parent.name / "best.pt").write_bytes(member.read_bytes())
        _mark(folder / member.parent.name, status)
    return folder


def test_unfinished_member_is_left_out_with_a_warning(folders, tmp_path, caplog):
    _, _, members, data = folders
    ensemble = _ensemble(members, tmp_path / "killed", ("complete", "running"))
    finished = ensemble / members[0].parent.name / "best.pt"
    assert resolve_checkpoints(ensemble) == [finished]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        code, stdout, err = run_cli(["predict", "--checkpoint", ensemble, "--device", "cpu", "CCO", "c1ccccc1O",
                                     "--output", tmp_path / "p.csv"])
    assert code == 0, err
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "leaving out 1 of 2 members" in warnings[0]
    assert str(ensemble / members[1].parent.name) in warnings[0]
    alone = Predictor(finished, device="cpu").predict(["CCO", "c1ccccc1O"])
    assert (tmp_path / "p.csv").read_text() == alone.to_csv(index=False)  # one model: no ensemble spread


def test_a_failed_run_is_left_out_of_an_ensemble_and_named_with_its_error_alone(folders, tmp_path, caplog):
    _, _, members, _ = folders
    ensemble = _ensemble(members, tmp_path / "failed", ("complete", "failed"))
    (ensemble / members[1].parent.name / "run.json").write_text(json.dumps({"status": "failed", "error": "no spread"}))
    assert resolve_checkpoints(ensemble) == [ensemble / members[0].parent.name / "best.pt"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        assert resolve_checkpoints(ensemble / members[1].parent.name) == [ensemble / members[1].parent.name / "best.pt"]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "failed (its run.json: no spread)" in warning and "without what the run adds after training" in warning


def test_folder_without_a_finished_run_is_refused(folders, tmp_path, caplog):
    _, _, members, _ = folders
    ensemble = tmp_path / "killed"
    (ensemble / "member_0").mkdir(parents=True)
    (ensemble / "member_0" / "best.pt").write_bytes(members[0].read_bytes())
    _mark(ensemble / "member_0", "running")
    assert_one_error_line(run_cli(["predict", "--checkpoint", ensemble, "--device", "cpu", "CCO"]),
                          str(ensemble), "no finished run", "running")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        code, _, err = run_cli(["predict", "--checkpoint", ensemble / "member_0", "--device", "cpu", "CCO"])  # named itself: used
    assert code == 0, err
    assert [r.getMessage() for r in caplog.records if "has not finished training" in r.getMessage()] != []


def test_a_search_folder_is_no_ensemble(folders, tmp_path):
    """The probe: --checkpoint naming an hpopt folder averaged every finished trial, models of
    different settings, as if they were an ensemble."""
    _, _, members, _ = folders
    search = tmp_path / "search"
    for k, member in enumerate(members):
        (search / "trials" / f"trial_{k}").mkdir(parents=True)
        (search / "trials" / f"trial_{k}" / "best.pt").write_bytes(member.read_bytes())
    (search / "hpopt.journal").write_text("")
    assert_one_error_line(run_cli(["predict", "--checkpoint", search, "--device", "cpu", "CCO"]),
                          "is a hyperparameter search", "trials/trial_N", f"--config {search}/config.yaml")
    assert resolve_checkpoints(search / "trials" / "trial_1") == [search / "trials" / "trial_1" / "best.pt"]
