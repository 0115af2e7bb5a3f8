"""Checkpoints and run configurations written by an earlier version keep loading unchanged.

``tests/data/saved_before_registry`` holds files written by the code before the variant registry:
one small checkpoint per model architecture (GRPE, MoiréGT, Gradformer) with the predictions it
gave then, and a resolved ``config.yaml``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models.config import upgrade_model_dict
from dgl_graphtx.runs import resolve_run_config

SAVED = Path(__file__).parent / "data" / "saved_before_registry"
RECORDED = json.loads((SAVED / "predictions.json").read_text())


@pytest.mark.parametrize("variant", sorted(RECORDED["predictions"]))
def test_old_checkpoint_predicts_as_recorded(variant):
    loaded = load_checkpoint(SAVED / f"{variant}.pt")
    assert loaded.model.config.variant == variant
    predictions = Predictor(loaded, device="cpu").predict(RECORDED["smiles"])
    np.testing.assert_allclose(predictions["y_pred"].to_numpy(), RECORDED["predictions"][variant], rtol=1e-5, atol=1e-6)


def _restricted(resolved, saved):
    """``resolved`` cut down to the keys of ``saved`` (a variant added later adds its own section)."""
    if isinstance(saved, dict):
        return {key: _restricted(resolved[key], value) for key, value in saved.items()}
    return resolved


def test_old_config_file_resolves_to_the_same_settings():
    run = resolve_run_config(SAVED / "config.yaml")
    assert run.model.variant == "moire" and run.model.moire.focus == "cauchy"
    saved = yaml.safe_load((SAVED / "config.yaml").read_text())
    assert saved["model"]["gradformer"]["local_model"] == "gine"  # written before the model.gps section
    saved["model"] = upgrade_model_dict(saved["model"])  # the same settings, GPS ones moved to model.gps
    resolved = run.to_dict()
    assert _restricted(resolved, saved) == saved
    # sections and fields added later (e.g. ``uncertainty``) may appear; none of the saved ones is lost
    assert set(saved) <= set(resolved) and set(saved["model"]) <= set(resolved["model"])
