"""Ctrl-C at the ``dgl-graphtx`` command is one ``error: interrupted`` line, exit status 130, saying
whether ``--resume`` continues the run (it printed Python's traceback, about 40 lines); ``main``
called from Python still lets the ``KeyboardInterrupt`` through."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from command_processes import REPO, command_env, interruptible
from conftest_models import freesolv_rows
from dgl_graphtx import cli
from dgl_graphtx.cli import console_main, main

RESUMABLE = "error: interrupted (Ctrl-C); what was written is kept: rerun the same command with --resume to continue"


def _interrupting(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("command, said", [
    (["predict", "--checkpoint", "best.pt", "CCO"], "error: interrupted (Ctrl-C)"),  # printed rows cannot be resumed
    (["predict", "--checkpoint", "best.pt", "CCO", "--output", "p.csv"], RESUMABLE),
    (["featurize", "m.csv", "--out", "store"],  # a store resumes when started again, without --resume
     "error: interrupted (Ctrl-C); the finished shards are kept: rerun the same command to continue"),
    (["evaluate", "--checkpoint", "best.pt", "m.csv"], "error: interrupted (Ctrl-C)"),  # nothing to continue
])
def test_the_line_says_resume_only_where_the_command_can(command, said, monkeypatch, capsys):
    module = getattr(cli, command[0])
    monkeypatch.setattr(module, "run", _interrupting)
    monkeypatch.setattr(sys, "argv", ["dgl-graphtx", *command])
    assert console_main() == 130
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [said]
    with pytest.raises(KeyboardInterrupt):  # called from Python, the interruption goes on
        main(command)


def test_ctrl_c_of_a_training_run_is_one_line_and_keeps_its_last_epoch(tmp_path):
    data, out = tmp_path / "data.csv", tmp_path / "run"
    freesolv_rows(0, 60)[["smiles", "expt"]].to_csv(data, index=False)
    argv = ["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--preset", "tiny", "--set",
            "model.num_layers=1", "--batch-size", "16", "--device", "cpu", "--no-progress", "--no-cache", "--epochs", "10000"]
    job = subprocess.Popen([sys.executable, "-m", "dgl_graphtx", *map(str, argv)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=command_env(), cwd=REPO, preexec_fn=interruptible)
    deadline = time.time() + 240
    while not (out / "last.pt").exists() and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    assert job.poll() is None, job.communicate()
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 130, err
    assert "Traceback" not in err and [line for line in err.splitlines() if line.strip()][-1] == RESUMABLE
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # what --resume continues


def test_the_installed_command_is_the_light_console_entry_point():
    """dgl_graphtx.console loads this module's console_main inside its own try (tests/test_console.py)."""
    from importlib.metadata import entry_points

    from dgl_graphtx import console
    (command,) = [e for e in entry_points(group="console_scripts") if e.name == "dgl-graphtx"]
    assert command.load() is console.console_main


@pytest.mark.parametrize("more", [["--cv", "3"], ["--ensemble-size", "2"]])
def test_an_interrupted_ensemble_or_cross_validation_is_told_to_start_again(more, monkeypatch, capsys):
    """The probe: Ctrl-C of train --cv advised --resume, which refuses ensembles and --cv."""
    from dgl_graphtx.cli import train
    monkeypatch.setattr(train, "train_from_config", _interrupting)
    monkeypatch.setattr(sys, "argv", ["dgl-graphtx", "train", "m.csv", "--targets", "y", "--out", "run", *more])
    assert console_main() == 130
    assert capsys.readouterr().err.splitlines() == [
        "error: interrupted (Ctrl-C); an ensemble or a cross-validation cannot resume: rerun the same command with --overwrite"]


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """The probe: `dgl-graphtx presets vanilla tiny | head -1` printed "error: Broken pipe", exit 2."""
    job = subprocess.Popen([sys.executable, "-m", "dgl_graphtx", "presets", "vanilla", "tiny"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=command_env(), cwd=REPO)
    job.stdout.close()  # the reader is gone before the first line is written
    err = job.stderr.read()
    assert job.wait(timeout=120) == 141 and err == "", err
