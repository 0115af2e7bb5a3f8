"""The variant registry is the one source of the variant names, config sections, models, presets,
CLI choices and the attention test catalogue."""
from __future__ import annotations

import dataclasses
import typing

import pytest

from dgl_graphtx.cli.common import MODELS
from dgl_graphtx.cli.presets import recipe_lines
from dgl_graphtx.models import VARIANT_NAMES, VARIANT_SPECS, Gradformer, GraphTransformer, ModelConfig, build_model, get_preset
from dgl_graphtx.models.settings import ModelSettings
from dgl_graphtx.models.variants import option_sections

from attention_variants import VARIANTS


def test_every_registered_variant_is_in_the_attention_test_catalogue():
    assert {v.kind for v in VARIANTS} == set(VARIANT_NAMES)


def test_cli_model_choices_are_the_registry():
    assert MODELS == VARIANT_NAMES
    assert VARIANT_NAMES[:5] == ("grpe", "moire", "gradformer", "vanilla", "graphormer")


def test_model_config_declares_one_options_section_per_variant_with_settings():
    """ModelConfig's sections are declared fields (seen by mypy and IDEs): exactly the registry's,
    so a new variant with options fails here until its section is declared in models/config.py."""
    hints = typing.get_type_hints(ModelConfig)
    common = {f.name for f in dataclasses.fields(ModelSettings)}
    declared = {f.name: hints[f.name] for f in dataclasses.fields(ModelConfig) if f.name not in common}
    assert declared == option_sections()
    for name, options in declared.items():
        assert isinstance(getattr(ModelConfig(), name), options)
    assert "vanilla" not in declared  # the plain baseline has no settings


def test_default_presets_are_the_ones_before_the_registry():
    defaults = {name: get_preset(name).model for name in VARIANT_NAMES}
    expected = {"grpe": "tiny", "moire": "2d", "gradformer": "default", "vanilla": "tiny", "graphormer": "tiny"}
    for name, preset in expected.items():
        assert VARIANT_SPECS[name].default_preset == preset
        assert defaults[name] == get_preset(name, preset).model


@pytest.mark.parametrize("name", VARIANT_NAMES)
def test_build_model_picks_the_architecture_and_layers_of_the_entry(name):
    config = ModelConfig(variant=name, num_layers=2, hidden_dim=8, num_heads=2, readout="mean", virtual_node=False)
    model = build_model(config)
    assert type(model) is {"transformer": GraphTransformer, "gps": Gradformer}[VARIANT_SPECS[name].architecture]
    assert len(model.blocks) == 2
    expected_ffn = 16 if name == "gradformer" else 8  # Gradformer's GPS block: 2 x hidden_dim
    assert config.feedforward_dim == expected_ffn


def test_recipe_lists_only_the_options_of_its_own_variant():
    keys = {line.split(":")[0] for line in recipe_lines("moire", "2d")}
    assert "model.moire" in keys
    assert not keys & {"model.grpe", "model.gradformer", "model.graphormer", "model.gps"}  # moire runs in no GPS block
    assert "model.gps" in {line.split(":")[0] for line in recipe_lines("gradformer", "molhiv")}


def test_model_config_and_options_are_frozen():
    config = ModelConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.num_layers = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.grpe.max_distance = 2
    assert dataclasses.replace(config, num_layers=2).num_layers == 2


def test_a_variant_reading_3d_distances_needs_a_featurizer_with_coordinates():
    from dgl_graphtx.checkpoint import CheckpointMeta, validate_meta
    from dgl_graphtx.errors import ConfigError

    three_d, hops = get_preset("moire", "3d"), get_preset("moire", "2d")
    def reads_coordinates(model):
        return VARIANT_SPECS[model.variant].uses_coordinates(model, model.options)

    assert reads_coordinates(three_d.model) and not reads_coordinates(hops.model)
    assert not any(reads_coordinates(get_preset(name).model) for name in VARIANT_NAMES if name != "moire")
    validate_meta(three_d.model, CheckpointMeta(three_d.featurizer, three_d.relation, ["y"]))
    with pytest.raises(ConfigError, match="3-D distances needs a featurizer with coordinates"):
        validate_meta(three_d.model, CheckpointMeta(hops.featurizer, three_d.relation, ["y"]))


def test_a_bare_model_config_is_the_default_model():
    """ModelSettings.variant defaulted to grpe while the default model is gradformer."""
    from dgl_graphtx.models.settings import DEFAULT_MODEL
    from dgl_graphtx.relation_graph import RelationConfig
    config = ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)
    assert config.variant == DEFAULT_MODEL and config.virtual_node == RelationConfig().virtual_node
    assert type(build_model(config)) is {"transformer": GraphTransformer, "gps": Gradformer}[VARIANT_SPECS[DEFAULT_MODEL].architecture]


@pytest.mark.parametrize("name", [n for n in VARIANT_NAMES if VARIANT_SPECS[n].options is not None])
def test_options_defaults_are_the_layers_defaults(name):
    """An options class and the attention layer it configures agree on every default they share
    (MoiréGT's distance was 'spd' in its options and 'dist' in its layers)."""
    import inspect
    spec = VARIANT_SPECS[name]
    options = spec.options()
    config = ModelConfig(variant=name, num_layers=1, hidden_dim=8, num_heads=2, readout="mean", virtual_node=False)
    layer = spec.build_layers(config, options)[0]
    shared = 0
    for cls in (type(layer), type(layer.structure)):
        for parameter in inspect.signature(cls.__init__).parameters.values():
            if parameter.default is not inspect.Parameter.empty and parameter.name in {f.name for f in dataclasses.fields(options)}:
                assert getattr(options, parameter.name) == parameter.default, (cls.__name__, parameter.name)
                shared += 1
    assert shared >= 1  # the check compared something


def test_an_unknown_variant_is_refused_by_the_registry_alone():
    """A variant's name is checked in one place (``variant_spec``), whichever object is given it."""
    import traceback
    from dgl_graphtx.errors import ConfigError
    from dgl_graphtx.models import summarize_presets
    from dgl_graphtx.runs import PresetChoice, resolve_run_config

    calls = [lambda: ModelConfig(variant="xformer"), lambda: get_preset("xformer"), lambda: get_preset("xformer", "tiny"),
             lambda: summarize_presets("xformer"), lambda: PresetChoice("xformer"),
             lambda: resolve_run_config(overrides=["preset.model=xformer"])]
    raised = []
    for call in calls:
        with pytest.raises(ConfigError, match="unknown model 'xformer'") as err:
            call()
        raised.append(traceback.extract_tb(err.value.__traceback__)[-1][:3])
    assert len(set(raised)) == 1 and raised[0][2] == "variant_spec"
