"""Settings of another model's option section are refused, not silently ignored."""
from __future__ import annotations

import pytest

from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.runs import resolve_run_config


def test_set_on_another_models_section_is_one_cli_error_naming_the_active_model(tmp_path):
    line = assert_one_error_line(run_cli(["train", "d.csv", "--targets", "y", "--out", tmp_path / "o", "--model", "gradformer",
                                          "--set", "model.moire.focus=laplacian"]),
                                 "model.moire.focus=laplacian", "active model is gradformer", "--model moire")
    assert not (tmp_path / "o").exists()  # refused before any work
    assert line.count("error:") == 1


@pytest.mark.parametrize("model, key", [("grpe", "model.gradformer.decay=0.7"), ("vanilla", "model.grpe.max_distance=3"),
                                        ("moire", "model.graphormer.max_distance=9")])
def test_every_inactive_section_is_refused(model, key):
    with pytest.raises(ConfigError, match=f"active model is {model}"):
        resolve_run_config(overrides=[f"preset.model={model}", key, "data.targets=y"])


def test_config_file_sections_of_other_models_are_checked_too(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[preset]\nmodel = "gradformer"\n[model.moire]\nfocus = "laplacian"\n')
    with pytest.raises(ConfigError, match="model.moire.focus=laplacian"):
        resolve_run_config(path)


def test_a_saved_config_with_every_section_still_loads_and_the_active_section_is_settable(tmp_path):
    run = resolve_run_config(overrides=["preset.model=gradformer", "model.gradformer.decay=0.7", "data.targets=y"])
    assert run.model.gradformer.decay == 0.7
    path = run.save(tmp_path / "config.yaml")  # holds the moire/grpe/graphormer sections with their preset values
    assert "moire:" in path.read_text()
    assert resolve_run_config(path) == run
