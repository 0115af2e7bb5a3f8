"""Thread settings: the resolution rule, what set_threads changes, and the --threads option of the CLI."""
from __future__ import annotations

import os

import pytest
import torch
import yaml

from cli_fixtures import data_csv, workdir  # noqa: F401  (fixtures)
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.threads import DEFAULT_THREADS, resolve_threads, set_threads
from dgl_graphtx.training import TrainConfig


@pytest.fixture(autouse=True)
def restore_threads():
    """Give this process its thread settings back after every test."""
    threads, env = torch.get_num_threads(), {n: os.environ.get(n) for n in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    yield
    torch.set_num_threads(threads)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_explicit_count_wins_then_omp_num_threads_then_the_default(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert resolve_threads(2) == 2 and resolve_threads() == 3
    for unusable in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", unusable)
        assert resolve_threads() == DEFAULT_THREADS == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert resolve_threads() == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="threads must be an integer >= 1"):
            resolve_threads(bad)
    with pytest.raises(ConfigError, match="threads"):
        TrainConfig(threads=0)


def test_set_threads_sets_torch_and_the_environment_of_later_processes():
    assert set_threads(2) == 2
    assert torch.get_num_threads() == 2
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "2"
    assert set_threads(1) == 1 and torch.get_num_threads() == 1


@pytest.mark.parametrize("command", ["predict", "embed", "evaluate"])
def test_prediction_commands_apply_threads_before_running(command, tmp_path):
    torch.set_num_threads(1)
    argv = {"predict": ["predict", "C"], "embed": ["embed", "C", "--output", tmp_path / "e.csv"],
            "evaluate": ["evaluate", tmp_path / "d.csv"]}[command]
    result = run_cli([*argv, "--checkpoint", tmp_path / "missing.pt", "--threads", "2"])
    assert result[0] == 2  # the command itself fails (no checkpoint), after the threads were set
    assert torch.get_num_threads() == 2 and os.environ["OMP_NUM_THREADS"] == "2"
    assert_one_error_line(run_cli([*argv, "--checkpoint", tmp_path / "missing.pt", "--threads", "0"]), "--threads", "0")


def test_train_records_the_resolved_count_in_config_and_log(data_csv, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    torch.set_num_threads(2)
    out = tmp_path / "run"
    code, _, err = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "1",
                            "--batch-size", "16", "--device", "cpu", "--no-progress", "--no-cache"])
    assert code == 0, err
    assert torch.get_num_threads() == 1  # the default rule, applied
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["threads"] == 1
    assert "with 1 thread(s) per process" in (out / "train.log").read_text()
    # the recorded configuration repeats the run with the same count; --threads overrides it
    again = tmp_path / "again"
    code, _, err = run_cli(["train", "--config", out / "config.yaml", "--out", again, "--threads", "2", "--no-progress"])
    assert code == 0, err
    assert yaml.safe_load((again / "config.yaml").read_text())["train"]["threads"] == 2 and torch.get_num_threads() == 2


def test_trainer_applies_train_config_threads():
    from conftest_models import seeded_model, tiny_preset

    from dgl_graphtx.training import Trainer

    torch.set_num_threads(2)
    Trainer(seeded_model(tiny_preset("vanilla", "tiny", num_layers=1)), TrainConfig(threads=1, progress=False))
    assert torch.get_num_threads() == 1
    Trainer(seeded_model(tiny_preset("vanilla", "tiny", num_layers=1)), TrainConfig(progress=False))  # None: left alone
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("argv", [["train", "d.csv", "--out", "o"], ["hpopt", "d.csv", "--out", "o"],
                                  ["pretrain", "c.smi", "--out", "o"], ["predict", "C", "--checkpoint", "m.pt"],
                                  ["embed", "C", "--checkpoint", "m.pt", "--output", "e.csv"],
                                  ["evaluate", "d.csv", "--checkpoint", "m.pt"]])
def test_every_training_and_prediction_command_takes_threads(argv):
    from dgl_graphtx.cli import build_parser

    assert build_parser().parse_args([*argv, "--threads", "3"]).threads == 3
    assert build_parser().parse_args(argv).threads is None
