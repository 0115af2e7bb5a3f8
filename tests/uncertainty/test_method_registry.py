"""The uncertainty-method registry is the one source of the method names, the CLI's choices, the
head sizes, the training losses, the std at prediction time and the calibration: every registered
head trains and predicts, and a method added to the table works end to end with no other change."""
from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest_models import batch_of, dataset_for, freesolv_rows, tiny_preset
from dgl_graphtx.cli import predict as predict_command
from dgl_graphtx.cli.common import TRAIN_FLAGS
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import ModelConfig, build_model
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import (METHODS, UNCERTAINTY_METHODS, UncertaintyConfig, UncertaintyMethod, head_loss,
                                     head_methods, predictive_moments)
from dgl_graphtx.uncertainty.heads import Moments, head_parts


def laplace_moments(raw: torch.Tensor) -> Moments:
    """A toy head: a Laplace location and scale ``b``; its variance is ``2 b^2``."""
    location, scale = head_parts(raw, 2)
    scale = F.softplus(scale) + 1e-6
    return Moments(location, 2 * scale ** 2)


def laplace_loss(raw: torch.Tensor, target: torch.Tensor, settings) -> torch.Tensor:
    location, scale = head_parts(raw, 2)
    scale = F.softplus(scale) + 1e-6
    return torch.log(2 * scale) + (target - location).abs() / scale


LAPLACE = UncertaintyMethod("laplace", "a Laplace head (a toy, for this test)", head_outputs=2, moments=laplace_moments,
                            loss=laplace_loss, std="head")


def test_cli_choices_are_the_registry():
    listed = {flag: options.get("metavar") for flag, _, options in TRAIN_FLAGS}  # train lists them; the library checks them
    assert listed["--uncertainty"] == "{" + ",".join(METHODS) + "}" and METHODS == tuple(UNCERTAINTY_METHODS)
    assert head_methods() == tuple(name for name, spec in UNCERTAINTY_METHODS.items() if spec.head_outputs > 1)
    parser = argparse.ArgumentParser()
    predict_command.register(parser.add_subparsers())
    action = next(a for a in parser._subparsers._group_actions[0].choices["predict"]._actions if a.dest == "uncertainty")
    # predict offers every method but those that need several models (the ensemble's spread)
    assert action.choices == [name for name, spec in UNCERTAINTY_METHODS.items() if spec.std != "members"]
    assert "ensemble" not in action.choices and "mve" in action.choices


@pytest.mark.parametrize("method", head_methods())
def test_every_registered_head_is_sized_trained_and_read_by_the_table(method):
    spec = UNCERTAINTY_METHODS[method]
    config = ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, num_tasks=3, uncertainty_head=method)
    assert config.output_width == 3 * spec.head_outputs
    preset = tiny_preset("vanilla")
    model = build_model(ModelConfig(**{**preset.model.to_dict(), "uncertainty_head": method}))
    batch = batch_of(dataset_for(preset.featurizer, preset.relation, 0, 6))
    raw = model(batch.graph, batch.relation_graph, distribution=True)
    assert raw.shape == (6, spec.head_outputs)
    moments = predictive_moments(method, raw)
    assert moments.mean.shape == (6, 1) and bool((moments.variance > 0).all())
    loss = head_loss(method, raw, batch.labels, batch.mask, UncertaintyConfig(method))
    assert torch.isfinite(loss) and loss.requires_grad


def test_a_method_added_to_the_table_trains_calibrates_and_predicts(monkeypatch, tmp_path):
    monkeypatch.setitem(UNCERTAINTY_METHODS, LAPLACE.name, LAPLACE)
    assert "laplace" in head_methods()
    preset = tiny_preset("vanilla")
    dataset = MoleculeDataset.from_dataframe(freesolv_rows(0, 80), target_cols=["expt"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    result = train_and_evaluate(dataset, preset, TrainConfig(epochs=2, progress=False), out_dir=tmp_path / "run",
                                uncertainty=UncertaintyConfig("laplace", calibration_share=0.2))
    assert result.model.config.uncertainty_head == "laplace" and result.model.config.output_width == 2
    table = result.test_predictions
    assert result.calibration.normalised and math.isfinite(result.calibration.conformal[0])
    half = (table["expt_hi"] - table["expt_pred"]).to_numpy()
    np.testing.assert_allclose(half, result.calibration.conformal[0] * table["expt_std"].to_numpy(), rtol=1e-6)
    predicted = Predictor(tmp_path / "run" / "best.pt").predict(table["smiles"].tolist())
    np.testing.assert_allclose(predicted["expt_std"], table["expt_std"], rtol=1e-5)
    np.testing.assert_allclose(predicted["expt_lo"], table["expt_lo"], rtol=1e-5, atol=1e-6)
