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


def test_gps_settings_on_a_model_of_another_architecture_are_one_cli_error(tmp_path):
    line = assert_one_error_line(run_cli(["train", "d.csv", "--targets", "y", "--out", tmp_path / "o", "--model", "moire",
                                          "--set", "model.gps.norm=layer"]),
                                 "model.gps.norm=layer", "architecture is transformer", "model.architecture=gps")
    assert not (tmp_path / "o").exists()
    assert line.count("error:") == 1


def test_gps_settings_in_a_config_file_are_refused_unless_the_architecture_is_gps(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("preset:\n  model: vanilla\nmodel:\n  gps:\n    local_model: gatedgcn\n")
    with pytest.raises(ConfigError, match="model.gps.local_model=gatedgcn"):
        resolve_run_config(path)
    gps_run = resolve_run_config(overrides=["preset.model=gradformer", "model.gps.norm=layer", "data.targets=y"])
    assert gps_run.model.gps.norm == "layer"
    chosen = resolve_run_config(overrides=["preset.model=grpe", "model.architecture=gps", "model.virtual_node=false",
                                           "model.readout=mean", "model.gps.norm=layer", "data.targets=y"])
    assert chosen.model.model_architecture == "gps" and chosen.model.gps.norm == "layer"


def test_a_saved_transformer_config_with_its_preset_gps_section_still_loads(tmp_path):
    run = resolve_run_config(overrides=["preset.model=moire", "data.targets=y"])
    path = run.save(tmp_path / "config.yaml")
    assert "gps:" in path.read_text()
    assert resolve_run_config(path) == run
