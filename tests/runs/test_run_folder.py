"""Run folders and output locations: locked runs, no silent
overwrite, every file from the same run, outputs checked before any work, one-line I/O errors."""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest
import torch

from cli_runner import assert_one_error_line
from cli_fixtures import checkpoint, data_csv, workdir  # noqa: F401  (module fixtures)
from cli_runner import run_cli_without_runtime_warnings as run_cli

import dgl_graphtx.runs.from_config as from_config
from dgl_graphtx.errors import ConfigError, OutputError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs import RunFolder
from dgl_graphtx.runs.folder import LOCK_NAME, RUN_FILES, check_run_tree, open_run_tree

TRAIN = ["--targets", "expt", "--model", "vanilla", "--epochs", "1", "--batch-size", "16", "--no-progress", "--device", "cpu"]




def _run_ids(out):
    """run_id recorded by each file that records one."""
    return {
        "run.json": json.loads((out / "run.json").read_text())["run_id"],
        "metrics.json": json.loads((out / "metrics.json").read_text())["run_id"],
        "best.pt": torch.load(out / "best.pt", weights_only=True)["extra"]["run_id"],
    }


@pytest.fixture()
def no_featurizing(monkeypatch):
    """Fail the test if the command starts featurizing (output problems must be found first)."""
    def refuse(*args, **kwargs):
        raise AssertionError("featurization started before the output location was checked")

    monkeypatch.setattr(from_config, "load_training_data", refuse)
    monkeypatch.setattr(Predictor, "predict", refuse)


# --------------------------------------------------------------------------------------------
# run folders
# --------------------------------------------------------------------------------------------
def test_second_run_into_the_same_folder_is_refused_and_the_first_kept(data_csv, workdir):
    out = workdir / "r"
    code, _, err = run_cli(["train", data_csv, "--out", out, "--seed", "1", *TRAIN])
    assert code == 0, err
    first = {name: (out / name).read_bytes() for name in ("best.pt", "metrics.json", "test_predictions.csv")}
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert_one_error_line(run_cli(["train", data_csv, "--out", out, "--seed", "2", *TRAIN]), str(out), "already holds a run", "--overwrite")
    assert {name: (out / name).read_bytes() for name in first} == first
    assert not (out / LOCK_NAME).exists()


def test_overwrite_replaces_every_file_with_the_new_run(data_csv, workdir):
    out = workdir / "ow"
    assert run_cli(["train", data_csv, "--out", out, "--seed", "1", *TRAIN])[0] == 0
    old_ids = _run_ids(out)
    code, _, err = run_cli(["train", data_csv, "--out", out, "--seed", "2", "--overwrite", *TRAIN])
    assert code == 0, err
    new_ids = _run_ids(out)
    assert len(set(new_ids.values())) == 1 and set(new_ids.values()).isdisjoint(old_ids.values())
    assert json.loads((out / "run.json").read_text())["status"] == "complete"


def test_overwrite_deletes_the_previous_run_before_writing(tmp_path):
    for name in RUN_FILES:
        (tmp_path / name).write_text("old run")
    (tmp_path / "cache").mkdir()  # not a run file: kept
    with RunFolder(tmp_path, overwrite=True) as run:
        present = sorted(p.name for p in tmp_path.iterdir())
        assert present == sorted([LOCK_NAME, "cache", "run.json", "SHA256SUMS"])  # a kill now leaves no old file
        assert (tmp_path / "SHA256SUMS").read_text().split()[1:] == ["run.json"]  # the old record went with the old run
        assert json.loads((tmp_path / "run.json").read_text()) == {**json.loads((tmp_path / "run.json").read_text()),
                                                                   "run_id": run.run_id, "status": "running"}


def test_concurrent_run_is_refused_naming_the_lock_holder(data_csv, workdir):
    out = workdir / "busy"
    with RunFolder(out):
        assert_one_error_line(run_cli(["train", data_csv, "--out", out, *TRAIN]), "locked by a run of process", str(os.getpid()))
        assert_one_error_line(run_cli(["train", data_csv, "--out", out, "--overwrite", *TRAIN]), "is writing to it")
    assert not (out / LOCK_NAME).exists()


def test_lock_of_a_killed_run_needs_overwrite(data_csv, workdir):
    out = workdir / "killed"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    import socket

    (out / LOCK_NAME).write_text(json.dumps({"pid": int(dead), "host": socket.gethostname()}))
    (out / "best.pt").write_text("half a run")
    assert_one_error_line(run_cli(["train", data_csv, "--out", out, *TRAIN]), "killed before finishing", "--overwrite")
    code, _, err = run_cli(["train", data_csv, "--out", out, "--overwrite", *TRAIN])
    assert code == 0, err
    assert len(set(_run_ids(out).values())) == 1


def test_failed_run_leaves_the_folder_as_it_found_it(tmp_path):
    out = tmp_path / "new"
    with pytest.raises(RuntimeError):
        with RunFolder(out):
            raise RuntimeError("featurization failed")
    assert not out.exists()
    with RunFolder(out) as run:  # usable again right away
        run.finish()


def test_an_error_after_the_run_wrote_results_marks_it_failed_with_the_error(tmp_path):
    """The probe: a run stopped by an error after training (an uncertainty with no spread to
    calibrate) said "running", and predict called its kernel-less best.pt unfinished."""
    out = tmp_path / "r"
    with pytest.raises(ConfigError):
        with RunFolder(out):
            (out / "best.pt").write_bytes(b"the network")
            raise ConfigError("no spread\n  to calibrate")
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "failed" and info["error"] == "no spread to calibrate"
    for stop in (KeyboardInterrupt, RuntimeError, OutputError):  # an interruption, a full disk...: --resume may continue
        with pytest.raises(stop):
            with RunFolder(tmp_path / stop.__name__) as run:
                (run.path / "best.pt").write_bytes(b"the network")
                raise stop("stopped")
        assert json.loads((tmp_path / stop.__name__ / "run.json").read_text())["status"] == "running"


def test_two_processes_racing_for_one_folder_one_wins(tmp_path):
    # Each process marks that it tried; the winner holds the folder until all three have tried, so
    # the race does not depend on how fast a loaded machine starts them.
    code = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from dgl_graphtx.runs.folder import RunFolder\n"
        "from dgl_graphtx.errors import OutputError\n"
        "tried = Path(sys.argv[2])\n"
        "try:\n    run = RunFolder(sys.argv[1]).open()\n"
        "except OutputError:\n    (tried / str(os.getpid())).touch(); print('refused'); sys.exit(0)\n"
        "(tried / str(os.getpid())).touch()\n"
        "deadline = time.time() + 100\n"
        "while len(list(tried.iterdir())) < 3 and time.time() < deadline:\n    time.sleep(0.05)\n"
        "run.finish(); run.close(); print('won')\n"
    )
    tried = tmp_path / "tried"
    tried.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "race"), str(tried)], stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    outcomes = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert outcomes == ["refused", "refused", "won"]


# --------------------------------------------------------------------------------------------
# output locations checked before any work; one error line naming the path
# --------------------------------------------------------------------------------------------
def test_out_naming_an_existing_file(data_csv, workdir, no_featurizing):
    target = workdir / "a_file"
    target.write_text("x")
    assert_one_error_line(run_cli(["train", data_csv, "--out", target, *TRAIN]), str(target), "existing file")
    assert_one_error_line(run_cli(["train", data_csv, "--out", target / "sub", *TRAIN]), str(target / "sub"))


def test_out_that_cannot_be_created(data_csv, no_featurizing):
    assert_one_error_line(run_cli(["train", data_csv, "--out", "/proc/no_such_dir/run", *TRAIN]), "/proc/no_such_dir/run")


def test_a_cache_folder_that_cannot_be_written_is_refused_before_featurizing(data_csv, workdir, no_featurizing, monkeypatch):
    """``--cache-dir`` naming a file (or ``XDG_CACHE_HOME`` under one): refused after featurizing,
    the work lost, as "cannot write FILE/molecules-<key>.pt"."""
    target = workdir / "a_file"
    target.write_text("x")
    assert_one_error_line(run_cli(["train", data_csv, "--out", workdir / "a", "--cache-dir", target, *TRAIN]),
                          f"dataset cache in {target}: it is a file", "--no-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(target))
    assert_one_error_line(run_cli(["train", data_csv, "--out", workdir / "b", *TRAIN]), str(target), "Not a directory")
    assert target.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores folder permissions")
def test_read_only_out(data_csv, tmp_path, no_featurizing):
    tmp_path.chmod(0o500)
    try:
        assert_one_error_line(run_cli(["train", data_csv, "--out", tmp_path / "r", *TRAIN]), str(tmp_path / "r"))
    finally:
        tmp_path.chmod(0o700)


@pytest.mark.parametrize("where", ["folder", "proc"])
def test_predict_output_problems_found_before_featurizing(checkpoint, workdir, no_featurizing, where):
    output = workdir if where == "folder" else "/proc/no_such_dir/p.csv"
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--output", output, "CCO"]), str(output))


def test_unreadable_input_is_one_error_line(checkpoint, workdir):
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", workdir, "--output", workdir / "p.csv"]),
                          str(workdir), "is a folder, not a")


def test_full_disk_while_saving_is_one_error_line_naming_the_file(data_csv, workdir, monkeypatch):
    def full_disk(obj, handle, *args, **kwargs):
        handle.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:595] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    out = workdir / "full"
    result = run_cli(["train", data_csv, "--out", out, *TRAIN])
    assert_one_error_line(result, f"cannot write {out / 'best.pt'}", "unchanged")
    # what was written stays (config, log of epoch 1, run.json saying "running"); no temporary file, no lock
    assert sorted(p.name for p in out.iterdir()) == ["SHA256SUMS", "config.yaml", "log.csv", "run.json", "train.log"]
    assert json.loads((out / "run.json").read_text())["status"] == "running"


def test_predict_write_failure_is_one_error_line(checkpoint, workdir, monkeypatch):
    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    output = workdir / "pred.csv"
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--output", output, "CCO"]), str(output), "No space left")
    assert not output.exists() and not output.with_name("pred.csv.partial").exists()


# --------------------------------------------------------------------------------------------
# every output of a run has the same (umask) permissions
# --------------------------------------------------------------------------------------------
def test_run_files_share_one_permission_mode(data_csv, workdir):
    out = workdir / "modes"
    assert run_cli(["train", data_csv, "--out", out, *TRAIN])[0] == 0
    modes = {name: stat.S_IMODE((out / name).stat().st_mode) for name in RUN_FILES}
    umask = os.umask(0)
    os.umask(umask)
    assert set(modes.values()) == {0o666 & ~umask}, modes


def test_output_error_is_an_os_error_too():
    assert issubclass(OutputError, OSError)


def test_resume_continues_the_run_in_place_with_its_run_id(tmp_path):
    """RunFolder(resume=True): nothing deleted, the run's identity kept, a killed run's lock taken
    over (what `train --resume` relies on); --overwrite and --resume together are refused."""
    out = tmp_path / "run"
    with RunFolder(out) as first:
        (out / "last.pt").write_text("state")
    run_id = first.run_id
    (out / ".run.lock").write_text(json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname()}))  # a dead process
    with pytest.raises(OutputError, match="--resume"):
        RunFolder(out).open()
    with RunFolder(out, resume=True) as again:
        assert again.run_id == run_id and (out / "last.pt").read_text() == "state"
    with pytest.raises(OutputError, match="give one of them"):
        RunFolder(out, overwrite=True, resume=True)


def test_the_top_of_an_ensemble_or_cross_validation_is_refused_or_cleared(tmp_path):
    """What an ensemble or cross-validation left (runs' folders, reports, a single run's files) is
    refused without --overwrite; with it, all of it goes, so no fold_3 of an earlier --cv 4 stays
    beside the folds of a --cv 3, but the config.yaml and train.log of the new run stay."""
    root = tmp_path / "cv"
    for k in range(4):
        (root / f"fold_{k}").mkdir(parents=True)
        (root / f"fold_{k}" / "best.pt").write_bytes(b"old")
    for name in ("oof_predictions.csv", "cv_metrics.json", "best.pt", "run.json", "config.yaml", "train.log", "notes.txt"):
        (root / name).write_text("old")
    with pytest.raises(OutputError, match=r"already holds a run \(run\.json, best\.pt, config\.yaml, train\.log, "
                                          r"cv_metrics\.json, fold_0, fold_1, fold_2, fold_3, oof_predictions\.csv\)"):
        check_run_tree(root)
    open_run_tree(root, overwrite=True)
    assert sorted(p.name for p in root.iterdir()) == ["SHA256SUMS", "config.yaml", "notes.txt", "train.log"]
    check_run_tree(root)  # what is left is not a run
