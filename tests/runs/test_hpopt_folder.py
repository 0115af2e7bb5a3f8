"""A search's folder: it may be moved or copied, and ``--no-cache`` caches nothing."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("optuna")

from cli_runner import run_cli  # noqa: E402
from dgl_graphtx.datasets import freesolv  # noqa: E402
from dgl_graphtx.runs import resolve_run_config  # noqa: E402

TINY = ["--model", "vanilla", "--epochs", "2", "--device", "cpu", "--no-progress", "--threads", "1",
        "--kernel", "none", "--features-generators", "none",
        "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("hp") / "tiny.csv"
    freesolv()[:30][["smiles", "expt"]].to_csv(path, index=False)
    return path


def _hpopt(data, out, trials, *flags):
    return run_cli(["hpopt", data, "--targets", "expt", "--out", out, "--trials", trials, "--pruner", "none", *TINY, *flags])


def test_a_moved_search_resumes_from_another_working_directory(tiny_csv, tmp_path, monkeypatch):
    """Trials stored their run folder relative to the working directory: a moved folder, or a
    resume from elsewhere, copied the wrong config.yaml or none."""
    monkeypatch.chdir(tmp_path)
    code, _, stderr = _hpopt(tiny_csv, "first", 1)
    assert code == 0, stderr
    shutil.move(tmp_path / "first", tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, stderr = _hpopt(tiny_csv, tmp_path / "moved", 2, "--resume")
    assert code == 0, stderr
    best = json.loads((tmp_path / "moved" / "best_trial.json").read_text())
    assert best["run"] == f"trials/trial_{best['trial']}"
    assert ((tmp_path / "moved" / "config.yaml").read_bytes()
            == (tmp_path / "moved" / best["run"] / "config.yaml").read_bytes())


def test_no_cache_caches_nothing(tiny_csv, tmp_path, monkeypatch):
    """--no-cache used to cache in OUT/cache, and the best trial's config.yaml said cache: true."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    out = tmp_path / "search"
    code, _, stderr = _hpopt(tiny_csv, out, 1, "--no-cache")
    assert code == 0, stderr
    assert not (out / "cache").exists() and not (tmp_path / "user-cache").exists()
    for name in ("config.yaml", "base_config.yaml"):
        assert resolve_run_config(out / name).data.cache is False
    code, _, stderr = _hpopt(tiny_csv, tmp_path / "cached", 1)  # without it: the user's cache, as train's
    assert code == 0, stderr
    assert any((tmp_path / "user-cache" / "dgl_graphtx" / "datasets").iterdir())
    assert resolve_run_config(tmp_path / "cached" / "config.yaml").data.cache_dir == str(
        tmp_path / "user-cache" / "dgl_graphtx" / "datasets")
