"""``train`` caches featurized file inputs by default in the user's cache folder; ``--no-cache``
turns that off and ``--cache-dir`` names another folder."""
from __future__ import annotations

import json

import pytest

from cli_fixtures import data_csv, workdir  # noqa: F401  (fixtures)
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.datasets import MoleculeDataset


@pytest.fixture
def featurizations(monkeypatch, tmp_path):
    """The number of featurizations during a test, with the user's cache folder in ``tmp_path``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    count = [0]
    featurize = MoleculeDataset._featurize

    def counted(self, *args, **kwargs):
        count[0] += 1
        return featurize(self, *args, **kwargs)

    monkeypatch.setattr(MoleculeDataset, "_featurize", counted)
    return count


def _train(data, out, *extra):
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "1",
                            "--batch-size", "16", "--device", "cpu", "--no-progress", *extra])
    assert code == 0, err


def test_second_run_over_the_same_file_reads_the_user_cache(data_csv, tmp_path, featurizations):  # noqa: F811
    _train(data_csv, tmp_path / "a")
    assert featurizations[0] == 1
    cached = list((tmp_path / "xdg" / "dgl_graphtx" / "datasets").glob("molecules-*.pt"))
    assert len(cached) == 1
    _train(data_csv, tmp_path / "b")
    assert featurizations[0] == 1  # read from the cache
    assert "featurized molecules read from the cache" in (tmp_path / "b" / "train.log").read_text()
    # the results of the two runs are the same (the cache changes nothing)
    first, second = (json.loads((tmp_path / run / "metrics.json").read_text()) for run in "ab")
    assert first["test"] == second["test"] and first["best_epoch"] == second["best_epoch"]


def test_no_cache_featurizes_every_time_and_cache_dir_names_the_folder(data_csv, tmp_path, featurizations):  # noqa: F811
    _train(data_csv, tmp_path / "a", "--no-cache")
    _train(data_csv, tmp_path / "b", "--no-cache")
    assert featurizations[0] == 2
    assert not (tmp_path / "xdg").exists()
    _train(data_csv, tmp_path / "c", "--cache-dir", tmp_path / "mine")
    assert featurizations[0] == 3 and len(list((tmp_path / "mine").glob("molecules-*.pt"))) == 1


def test_cache_dir_and_no_cache_together_are_refused(data_csv, tmp_path):  # noqa: F811
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "a", "--no-cache",
                                   "--cache-dir", tmp_path / "c"]), "--no-cache", "--cache-dir")
