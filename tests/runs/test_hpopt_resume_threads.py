"""A hyperparameter search continues with another thread count, not with other settings."""
from __future__ import annotations

import pytest

pytest.importorskip("optuna")

from dgl_graphtx.errors import ConfigError  # noqa: E402
from dgl_graphtx.runs import resolve_run_config  # noqa: E402
from dgl_graphtx.runs.hpopt import SearchSettings, hyperparameter_search  # noqa: E402


class Reached(Exception):
    """Raised by the search space when the search gets past its settings check."""


class SpaceThatStops:
    def __iter__(self):
        raise Reached


def _search(base, out):
    hyperparameter_search(base, out, SearchSettings(trials=1), space=SpaceThatStops(), resume=True)


def test_resume_accepts_other_threads_and_refuses_other_settings(tmp_path):
    out = tmp_path / "search"
    base = resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "train.threads=1", "data.cache_dir=c"])
    out.mkdir()
    (out / "hpopt.journal").write_text("")
    with pytest.raises(Reached):  # first call: writes base_config.yaml
        _search(base, out)
    assert (out / "base_config.yaml").is_file()
    with pytest.raises(Reached):
        _search(resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "train.threads=2", "data.cache_dir=c"]), out)
    with pytest.raises(ConfigError, match="needs the settings of the search in .*: train.epochs is 7 now, .* in the search"):
        _search(resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "train.threads=1", "train.epochs=7",
                                              "data.cache_dir=c"]), out)


def test_resume_accepts_other_cache_settings_and_uses_them(tmp_path):
    """A search of an earlier version cached in OUT/cache even with --no-cache: resumed with
    --no-cache, its trials cache nothing (the cache leaves results as they are)."""
    out = tmp_path / "search"
    out.mkdir()
    (out / "hpopt.journal").write_text("")
    settings = ["data.path=d.csv", "data.targets=y", "train.threads=1"]
    with pytest.raises(Reached):
        _search(resolve_run_config(overrides=[*settings, f"data.cache_dir={out / 'cache'}"]), out)
    with pytest.raises(Reached):
        _search(resolve_run_config(overrides=[*settings, "data.cache=false"]), out)
    saved = resolve_run_config(out / "base_config.yaml")
    assert saved.data.cache is False and saved.data.cache_dir is None
