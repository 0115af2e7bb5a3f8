"""The run plan: made once, from Python or a configuration, and taken by the three workflows; a
preset with the old keywords is shorthand for it; the data a run trains on is checked against it."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest_models import freesolv_rows, tiny_preset

from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, Split, add_extra_features
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import get_pretrained
from dgl_graphtx.runs import (EnsembleConfig, RunPlan, cross_validate, pretrained_run_config, resolve_run_config,
                              train_and_evaluate, train_ensemble)
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import UncertaintyConfig

CONFIG = TrainConfig(epochs=1, batch_size=16, progress=False, device="cpu")


@pytest.fixture(scope="module")
def preset():
    return tiny_preset("vanilla", "tiny", num_layers=1)


@pytest.fixture(scope="module")
def dataset(preset):
    return MoleculeDataset.from_dataframe(freesolv_rows(0, 40), target_cols=["expt"], featurizer=preset.featurizer,
                                          relation=preset.relation, progress=False)


def test_the_shorthand_is_the_plan(dataset, preset):
    by_plan = train_and_evaluate(dataset, RunPlan(preset, CONFIG, split="kmeans", fractions=(0.6, 0.2, 0.2)))
    shorthand = train_and_evaluate(dataset, preset, CONFIG, split="kmeans", fractions=(0.6, 0.2, 0.2))
    assert by_plan.split == shorthand.split and by_plan.test_metrics == shorthand.test_metrics
    folds = cross_validate(dataset, RunPlan(preset, CONFIG, folds=3))
    assert [f.split for f in folds.folds] == [f.split for f in cross_validate(dataset, preset, CONFIG, folds=3).folds]
    ensemble = train_ensemble(dataset, RunPlan(preset, CONFIG, ensemble=EnsembleConfig(2)))
    assert ensemble.metrics.equals(train_ensemble(dataset, preset, CONFIG, ensemble_size=2).metrics)


def test_a_plan_takes_no_settings_beside_it_and_the_workflows_take_theirs(dataset, preset):
    plan = RunPlan(preset, CONFIG)
    with pytest.raises(ConfigError, match="got a RunPlan and the settings split beside it"):
        train_and_evaluate(dataset, plan, split="scaffold")
    with pytest.raises(TypeError, match="unexpected keyword argument.*folds"):
        train_and_evaluate(dataset, preset, CONFIG, folds=3)
    with pytest.raises(ConfigError, match="train_and_evaluate trains one model"):
        train_and_evaluate(dataset, dataclasses.replace(plan, folds=3))
    with pytest.raises(ConfigError, match="cross_validate needs a plan with folds"):
        cross_validate(dataset, plan)


def test_the_plan_resolves_the_device_once(preset):
    plan = RunPlan(preset, dataclasses.replace(CONFIG, device="auto"))
    assert plan.train.device in ("cpu", "cuda") and plan.train.compute in ("dgl", "tensors")
    assert dataclasses.replace(plan, folds=3).train == plan.train


def test_a_feature_column_of_a_dataset_that_is_its_target_is_refused(preset):
    frame = freesolv_rows(0, 20)
    data = MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer, relation=preset.relation,
                                          progress=False)
    add_extra_features(data, ExtraFeatures(columns=("expt",)), list(frame["smiles"]), frame)
    with pytest.raises(ConfigError, match=r"feature column\(s\) expt .* are also target\(s\)"):
        train_and_evaluate(data, preset, CONFIG)


def test_calibration_rows_without_a_method_are_refused_by_the_plan(dataset, preset):
    with pytest.raises(ConfigError, match="a calibration set .* calibrates an uncertainty, but the run estimates none"):
        train_and_evaluate(dataset, preset, CONFIG, split=Split(list(range(30)), list(range(30, 35)), list(range(35, 40))),
                           calibration=[0])
    with pytest.raises(ConfigError, match="--calibration-share .* chooses the molecules carved"):
        train_and_evaluate(dataset, preset, CONFIG, uncertainty=UncertaintyConfig("mve", calibration_share=0.3), calibration=[0])


def test_fine_tuning_keeps_what_the_run_changed_and_fills_the_rest_from_the_backbone():
    backbone = get_pretrained("gradformer-tiny-moses3k")
    theirs = backbone.checkpoint.model.config
    run = pretrained_run_config(resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k",
                                                              "model.dropout=0.3"]), backbone)
    assert (run.model.num_layers, run.model.hidden_dim, run.model.dropout) == (theirs.num_layers, theirs.hidden_dim, 0.3)
    RunPlan.from_config(run, backbone)  # head settings are the run's
    with pytest.raises(ConfigError, match="model.gps.local_model=gatedgcn but pretrained model"):
        RunPlan.from_config(resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k",
                                                          "model.gps.local_model=gatedgcn"]))
    with pytest.raises(ConfigError, match="pretrained with relation"):
        RunPlan.from_config(resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k",
                                                          "relation=hops=2"]))


def test_a_fine_tuning_run_s_saved_configuration_makes_the_same_plan(tmp_path):
    run = resolve_run_config(overrides=["data.targets=y", "train.from_pretrained=gradformer-tiny-moses3k", "train.epochs=3",
                                        "train.freeze_backbone_epochs=1"])
    plan = RunPlan.from_config(run)
    assert plan.config is not None
    again = RunPlan.from_config(resolve_run_config(plan.config.save(tmp_path / "config.yaml")))
    assert again == plan and np.isclose(again.train.lr, plan.train.lr)
