"""``train --resume`` with settings other than the run's is refused before any data are loaded."""
from __future__ import annotations

import os

import pytest
import torch
import yaml

from cli_fixtures import data_csv, workdir  # noqa: F401  (fixtures)
from cli_runner import assert_one_error_line, run_cli

import dgl_graphtx.runs.from_config as from_config
from dgl_graphtx.runs.config import DEFAULT_KERNEL
from dgl_graphtx.datasets import MoleculeDataset


@pytest.fixture
def loads(monkeypatch):
    """Counts of data loads and featurizations during a test."""
    counts = {"load": 0, "featurize": 0}
    load, featurize = from_config.load_training_data, MoleculeDataset._featurize

    def counted_load(*args, **kwargs):
        counts["load"] += 1
        return load(*args, **kwargs)

    def counted_featurize(self, *args, **kwargs):
        counts["featurize"] += 1
        return featurize(self, *args, **kwargs)

    monkeypatch.setattr(from_config, "load_training_data", counted_load)
    monkeypatch.setattr(MoleculeDataset, "_featurize", counted_featurize)
    return counts


@pytest.fixture
def restore_threads():
    """Give this process its thread settings back after a test that changes them."""
    threads, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    yield
    torch.set_num_threads(threads)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if env is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = env


def _train(data, out, *extra):
    return run_cli(["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--batch-size", "16",
                    "--device", "cpu", "--no-progress", "--no-cache", *extra])


def test_resume_with_other_epochs_fails_before_featurizing(data_csv, tmp_path, loads):  # noqa: F811
    out = tmp_path / "run"
    code, _, err = _train(data_csv, out, "--epochs", "2")
    assert code == 0, err
    assert loads == {"load": 1, "featurize": 1}
    before = (out / "config.yaml").read_text()
    line = assert_one_error_line(_train(data_csv, out, "--epochs", "3", "--resume"), "epochs=2", "now epochs=3", "last.pt")
    assert "resume with the same settings" in line
    assert loads == {"load": 1, "featurize": 1}  # refused before reading or featurizing the data
    assert (out / "config.yaml").read_text() == before  # the run's record is untouched
    assert yaml.safe_load(before)["train"]["epochs"] == 2


def test_resume_with_the_same_settings_and_other_threads_is_accepted(data_csv, tmp_path, loads, restore_threads):  # noqa: F811
    out = tmp_path / "run"
    assert _train(data_csv, out, "--epochs", "1", "--threads", "1")[0] == 0
    code, _, err = _train(data_csv, out, "--epochs", "1", "--threads", "2", "--resume")
    assert code == 0, err
    assert loads["load"] == 2
    assert yaml.safe_load((out / "config.yaml").read_text())["train"]["threads"] == 2


@pytest.mark.parametrize("change, said", [
    (["--set", "data.features_scaling=robust"], "data.features_scaling=standard; resume with the same settings (now robust)"),
    (["--kernel", "none"], f"data.kernel={DEFAULT_KERNEL}; resume with the same settings (now none)"),
    (["--features-generators", "none"], "data.features_generators=rdkit2d; resume with the same settings (now none)"),
])
def test_resume_with_other_extra_features_or_kernel_fails_before_featurizing(data_csv, tmp_path, loads, change, said):  # noqa: F811
    """The descriptors are scaled and the kernel fitted on the first start: a resume that changes
    them would mix two models in one (it resumed silently and gave another test error)."""
    out = tmp_path / "run"
    assert _train(data_csv, out, "--epochs", "1")[0] == 0
    before = (out / "config.yaml").read_text(), (out / "best.pt").read_bytes()
    assert_one_error_line(_train(data_csv, out, "--epochs", "1", "--resume", *change), said)
    assert loads == {"load": 1, "featurize": 1}
    assert ((out / "config.yaml").read_text(), (out / "best.pt").read_bytes()) == before
    assert _train(data_csv, out, "--epochs", "1", "--resume")[0] == 0  # the same settings resume
