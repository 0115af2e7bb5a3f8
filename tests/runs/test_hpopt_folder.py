"""A search's folder: a resume proposes new points, the folder may be moved or copied, a damaged
journal or a journal-less leftover is refused in one line, a failing trial says why, and
``--no-cache`` caches nothing."""
from __future__ import annotations

import json
import logging
import shutil

import pandas as pd
import pytest

pytest.importorskip("optuna")

from cli_runner import assert_one_error_line, run_cli  # noqa: E402
from dgl_graphtx.errors import ConfigError, GraphTxError  # noqa: E402
from dgl_graphtx.runs import resolve_run_config  # noqa: E402
from dgl_graphtx.runs.hpopt import SearchSettings, hyperparameter_search, search_space  # noqa: E402
from dgl_graphtx.runs.hpopt import search as search_module  # noqa: E402

TINY = ["--model", "vanilla", "--epochs", "2", "--device", "cpu", "--no-progress", "--threads", "1",
        "--kernel", "none", "--features-generators", "none",
        "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


def _hpopt(data, out, trials, *flags):
    return run_cli(["hpopt", data, "--targets", "expt", "--out", out, "--trials", trials, "--pruner", "none", *TINY, *flags])


def _params(out):
    frame = pd.read_csv(out / "trials.csv")
    columns = sorted(c for c in frame.columns if c.startswith("params_"))
    return [tuple(row) for row in frame.sort_values("number")[columns].itertuples(index=False)]


def test_a_resumed_search_proposes_new_points(search_csv, tmp_path):
    """The sampler was seeded as the first search's, so the resumed trials repeated its first ones."""
    out = tmp_path / "search"
    code, _, stderr = _hpopt(search_csv, out, 3)
    assert code == 0, stderr
    code, _, stderr = _hpopt(search_csv, out, 5, "--resume")
    assert code == 0, stderr
    params = _params(out)
    assert len(params) == 5 and not set(params[3:]) & set(params[:3])


def test_a_moved_search_resumes_from_another_working_directory(search_csv, tmp_path, monkeypatch):
    """Trials stored their run folder relative to the working directory: a moved folder, or a
    resume from elsewhere, copied the wrong config.yaml or none."""
    monkeypatch.chdir(tmp_path)
    code, _, stderr = _hpopt(search_csv, "first", 1)
    assert code == 0, stderr
    shutil.move(tmp_path / "first", tmp_path / "moved")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, stderr = _hpopt(search_csv, tmp_path / "moved", 2, "--resume")
    assert code == 0, stderr
    best = json.loads((tmp_path / "moved" / "best_trial.json").read_text())
    assert best["run"] == f"trials/trial_{best['trial']}"
    assert ((tmp_path / "moved" / "config.yaml").read_bytes()
            == (tmp_path / "moved" / best["run"] / "config.yaml").read_bytes())


def test_a_damaged_journal_is_refused_in_one_line(search_csv, tmp_path):
    out = tmp_path / "search"
    code, _, stderr = _hpopt(search_csv, out, 1)
    assert code == 0, stderr
    journal = out / "hpopt.journal"
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"op_code": 5, "wor')  # what a kill during a write leaves
    assert_one_error_line(_hpopt(search_csv, out, 2, "--resume"), str(journal), "incomplete record", "remove that last line")
    journal.write_bytes(whole + b'not json\n' + whole)
    bad_line = whole.count(b"\n") + 1
    assert_one_error_line(_hpopt(search_csv, out, 2, "--resume"), str(journal), "damaged", f"line {bad_line} ")
    journal.write_bytes(whole)  # with the damage taken away, the search continues
    code, _, stderr = _hpopt(search_csv, out, 2, "--resume")
    assert code == 0, stderr
    assert len(pd.read_csv(out / "trials.csv")) == 2


@pytest.mark.parametrize("resume", [False, True])
def test_trials_without_a_journal_are_refused_in_one_line(search_csv, tmp_path, resume):
    """A leftover trials/ folder used to be taken for a search: every trial then failed on its folder."""
    out = tmp_path / "search"
    (out / "trials" / "trial_0").mkdir(parents=True)
    flags = ["--resume"] if resume else []
    assert_one_error_line(_hpopt(search_csv, out, 1, *flags), str(out), "trials/", "no hpopt.journal")
    assert sorted(p.name for p in out.iterdir()) == ["trials"]


def test_a_trial_folder_the_journal_does_not_know_is_refused(search_csv, tmp_path):
    out = tmp_path / "search"
    code, _, stderr = _hpopt(search_csv, out, 1)
    assert code == 0, stderr
    (out / "trials" / "trial_1").mkdir()
    assert_one_error_line(_hpopt(search_csv, out, 2, "--resume"), "trial_1", "hpopt.journal")


def test_a_failing_trial_logs_its_reason_without_a_traceback(search_csv, tmp_path, monkeypatch):
    def fail(config, run_dir, hooks):
        raise ConfigError("the trial's settings clash\nin two lines")

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("optuna").addHandler(handler)
    monkeypatch.setattr(search_module, "run_trial", fail)
    base = resolve_run_config(overrides=["preset.model=vanilla", "train.device=cpu", "data.targets=expt",
                                         f"data.path={search_csv}"])
    space = [p for p in search_space("vanilla") if p.key == "train.lr"]
    try:
        with pytest.raises(GraphTxError, match=r"no trial completed \(trial 1: the trial's settings clash in two lines\)"):
            hyperparameter_search(base, tmp_path / "s", SearchSettings(trials=2, pruner="none"), space=space)
    finally:
        logging.getLogger("optuna").removeHandler(handler)
    log = (tmp_path / "s" / "hpopt.log").read_text()
    assert "trial 0 fail (the trial's settings clash in two lines)" in log
    assert "Traceback" not in log and not [r for r in records if r.exc_info]


def test_no_cache_caches_nothing(search_csv, tmp_path, monkeypatch):
    """--no-cache used to cache in OUT/cache, and the best trial's config.yaml said cache: true."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    out = tmp_path / "search"
    code, _, stderr = _hpopt(search_csv, out, 1, "--no-cache")
    assert code == 0, stderr
    assert not (out / "cache").exists() and not (tmp_path / "user-cache").exists()
    for name in ("config.yaml", "base_config.yaml"):
        assert resolve_run_config(out / name).data.cache is False
    code, _, stderr = _hpopt(search_csv, tmp_path / "cached", 1)  # without it: the user's cache, as train's
    assert code == 0, stderr
    assert any((tmp_path / "user-cache" / "dgl_graphtx" / "datasets").iterdir())
    assert resolve_run_config(tmp_path / "cached" / "config.yaml").data.cache_dir == str(
        tmp_path / "user-cache" / "dgl_graphtx" / "datasets")
