"""What insight/ and the predictors rely on from a model: its attention layers, the MoiréGT shift
and width it really uses, and eval mode switched on and back."""
from __future__ import annotations

import math

import pytest
import torch

from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.insight import focus_parameters
from dgl_graphtx.models import ModelConfig, MoireOptions, build_model
from dgl_graphtx.relation_graph import RelationConfig


def _moire(mode: str):
    config = ModelConfig(variant="moire", num_layers=2, hidden_dim=8, num_heads=2, readout="mean", virtual_node=False,
                         moire=MoireOptions(mode=mode, distance="spd", focus="gaussian", init_width=2.0))
    model = build_model(config)
    with torch.no_grad():
        for layer in model.attention_layers():
            layer.structure.shift.copy_(torch.tensor([0.2, 3.0]))  # head 0 below the paper's clamp 0.5
    return model


@pytest.mark.parametrize("mode, mu0", [("paper", 0.5), ("reference", 0.2)])
def test_focus_table_shows_the_shift_the_forward_pass_uses(mode, mu0):
    model = _moire(mode)
    table = focus_parameters(model)
    assert table["mu"].tolist() == pytest.approx([mu0, 3.0, mu0, 3.0])
    assert table["sigma"].tolist() == pytest.approx([2.0] * 4)
    # the forward pass: log f = -(d - mu)^2 / sigma on a bond (d = 1 hop), written out by hand
    _, rel = smiles_to_graphs("CC", relation=RelationConfig(virtual_node=False))
    term = model.attention_layers()[0].structure
    bond = int(torch.nonzero(rel.edata["spd"] == 1)[0])
    expected = [-(1.0 - mu0) ** 2 / 2.0, -(1.0 - 3.0) ** 2 / 2.0]
    if mode == "reference":
        expected = [max(v, math.log(1e-9)) for v in expected]
    assert term.log_focus(rel)[bond].tolist() == pytest.approx(expected, abs=1e-6)


def test_attention_layers_are_the_blocks_attention_in_order():
    model = _moire("paper")
    assert [id(layer) for layer in model.attention_layers()] == [id(block.attention) for block in model.blocks]


@pytest.mark.parametrize("start_training", [True, False])
def test_eval_mode_restores_the_mode_even_after_an_error(start_training):
    model = _moire("paper").train(start_training)
    seen = []
    with pytest.raises(RuntimeError):
        with model.eval_mode():
            seen.append(model.training)
            raise RuntimeError("inside")
    assert seen == [False] and model.training is start_training


@pytest.mark.parametrize("atom_features", ["ogb", "canonical"])
def test_presets_runs_and_checkpoints_take_the_feature_sizes_from_the_featurizer(atom_features):
    from dgl_graphtx.checkpoint import CheckpointMeta, validate_meta
    from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
    from dgl_graphtx.models import get_preset
    from dgl_graphtx.runs import resolve_run_config

    featurizer = MoleculeFeaturizer(FeaturizerConfig(atom_features=atom_features))
    inputs = featurizer.model_inputs
    graph, _ = featurizer("CC(=O)O")
    if atom_features == "canonical":  # the width of the features the featurizer really writes
        assert inputs["atom_feature_dims"] == (graph.ndata["feat"].shape[1],)
        assert inputs["bond_feature_dims"] == (graph.edata["feat"].shape[1],)
    else:  # one category count per OGB column, each above every value seen
        assert len(inputs["atom_feature_dims"]) == graph.ndata["feat"].shape[1]
        assert (graph.ndata["feat"] < torch.tensor(inputs["atom_feature_dims"])).all()
    preset = get_preset("grpe", atom_features=atom_features)
    run = resolve_run_config(overrides=["preset.model=grpe", f"featurizer.atom_features={atom_features}", "data.targets=y"])
    for config in (preset.model, run.model):
        assert {key: getattr(config, key) for key in inputs} == inputs
    validate_meta(preset.model, CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
