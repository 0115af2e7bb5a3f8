"""Per-atom importance by attention rollout, checked on hand-computed cases, the default
``plot attention`` figure and table, and the note on parameters that never moved."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem

from cli_runner import run_cli
from conftest_models import tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.insight import (
    AttentionMaps,
    atom_importance,
    attention_rollout,
    parameters_at_initial_values,
    plot_focus_functions,
    plot_start_points,
)
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything

# two layers x two heads over three nodes
LAYER0 = np.array([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]],
                   [[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0]]])
LAYER1 = np.array([[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]],
                   [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])


def test_rollout_equals_the_hand_computed_product():
    # layer 0: mean over heads [[.5,.5,0],[.5,.5,0],[0,.5,.5]]; + I and rows / 2:
    a0 = np.array([[0.75, 0.25, 0.0], [0.25, 0.75, 0.0], [0.0, 0.25, 0.75]])
    # layer 1: mean [[0,0,1],[0,1,0],[.5,0,.5]]; + I and rows / 2:
    a1 = np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0], [0.25, 0.0, 0.75]])
    expected = np.array([[0.375, 0.25, 0.375], [0.25, 0.75, 0.0], [0.1875, 0.25, 0.5625]])  # a1 @ a0 by hand
    np.testing.assert_allclose(a1 @ a0, expected)
    rollout = attention_rollout(np.stack([LAYER0, LAYER1]))
    np.testing.assert_allclose(rollout, expected, atol=1e-12)
    np.testing.assert_allclose(rollout.sum(1), 1.0)


def test_importance_is_the_readout_row_mapped_to_input_atoms():
    mol = Chem.MolFromSmiles("CO")
    # graph nodes: atom 1 (O), atom 0 (C), virtual node last
    maps = AttentionMaps(np.stack([LAYER0, LAYER1]), np.array([1, 0, -1]), mol, "CO")
    table = atom_importance(maps)
    # virtual row of the rollout [0.1875, 0.25, 0.5625]; atoms only, renormalised: node 0 -> 0.4286, node 1 -> 0.5714
    assert table["atom"].tolist() == [0, 1] and table["element"].tolist() == ["C", "O"]
    np.testing.assert_allclose(table["importance"], [0.25 / 0.4375, 0.1875 / 0.4375])
    pooled = atom_importance(AttentionMaps(np.stack([LAYER0, LAYER1])[:, :, :2, :2], np.array([0, 1]), mol, "CO"))
    assert pooled["importance"].sum() == pytest.approx(1.0)


def _checkpoint(variant, tmp_path):
    seed_everything(0)
    preset = tiny_preset(variant)
    model = build_model(preset.model).eval()
    return save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y"]))


def test_plot_attention_draws_one_large_figure_and_a_per_atom_table(tmp_path):
    checkpoint = _checkpoint("grpe", tmp_path)
    code, stdout, err = run_cli(["plot", "attention", "--checkpoint", checkpoint, "--smiles", "CC(=O)Oc1ccccc1C(=O)O",
                                 "--out", tmp_path / "att.png"])
    assert code == 0, err
    assert (tmp_path / "att.png").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "att_heatmap.png").exists()
    table = pd.read_csv(tmp_path / "att_atoms.csv")
    assert len(table) == 13 and table["importance"].sum() == pytest.approx(1.0)
    assert table["element"].tolist()[:4] == ["C", "C", "O", "O"] and "most important atoms:" in stdout


@pytest.mark.parametrize("variant, plot, parameter", [("moire", plot_focus_functions, "width"),
                                                      ("gradformer", plot_start_points, "start")])
def test_figures_say_when_parameters_never_moved(variant, plot, parameter):
    seed_everything(0)
    model = build_model(tiny_preset(variant).model)
    assert parameter in " ".join(parameters_at_initial_values(model))
    untrained = plot(model)
    assert any("not learned" in text.get_text() for text in untrained.texts)
    with torch.no_grad():
        for layer in model.attention_layers():
            for name, value in layer.structure.named_parameters():
                value.add_(0.3)
    assert parameters_at_initial_values(model) == []
    assert not any("not learned" in text.get_text() for text in plot(model).texts)
