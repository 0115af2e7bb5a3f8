"""Training guards: labels beyond float32, NaN/inf loss and
gradients, validated settings, classification labels checked."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest_models import freesolv_rows, seeded_model, tiny_preset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError, NonFiniteError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.models import ModelConfig
from dgl_graphtx.training import TrainConfig, Trainer


@pytest.fixture(scope="module")
def preset():
    return tiny_preset("vanilla", "tiny", num_layers=1)


@pytest.fixture(scope="module")
def data(preset):
    frame = freesolv_rows(0, 24)
    return MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer,
                                          relation=preset.relation, progress=False)


# --------------------------------------------------------------------------------------------
# labels beyond float32's range
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["1e308", "-1e39", 3.5e38])
def test_labels_beyond_float32_are_masked_and_reported(value):
    ds = MoleculeDataset(["C", "CC", "CCC"], pd.DataFrame({"y": [1.0, value, 2.0]}), progress=False)
    assert torch.isfinite(ds.raw_labels[[0, 2]]).all()
    assert math.isnan(float(ds.raw_labels[1, 0]))
    issues = ds.report.to_frame()
    assert issues["row"].tolist() == [1] and issues["action"].tolist() == ["label_masked"]
    assert "float32" in issues["reason"][0] and "'y'" in issues["reason"][0]


def test_largest_float32_label_is_kept():
    top = float(np.finfo(np.float32).max)
    ds = MoleculeDataset(["C", "CC"], [[top], [-top]], progress=False)
    assert ds.raw_labels[:, 0].tolist() == [top, -top] and len(ds.report) == 0


def test_training_with_a_huge_label_stays_finite(preset, tmp_path):
    frame = freesolv_rows(0, 24).copy()
    frame["expt"] = frame["expt"].astype(object)
    frame.loc[3, "expt"] = "1e308"
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer,
                                        relation=preset.relation, progress=False)
    trainer = Trainer(seeded_model(preset), TrainConfig(epochs=2, batch_size=8, progress=False, device="cpu"))
    result = trainer.fit(ds, ds)
    assert np.isfinite(result.history["train_loss"]).all()
    assert np.isfinite(trainer.predict(ds)).all()


# --------------------------------------------------------------------------------------------
# NaN/inf loss or gradients
# --------------------------------------------------------------------------------------------
def _poison_call(model, calls):
    """Make the model's forward output NaN on the given (1-based) calls, as a diverging batch would."""
    count = {"n": 0}

    def hook(module, inputs, output):
        count["n"] += 1
        return output * float("nan") if count["n"] in calls else output

    return model.register_forward_hook(hook)


def test_non_finite_loss_stops_naming_epoch_and_batch(preset, data, tmp_path):
    model = seeded_model(preset)
    _poison_call(model, {2})
    trainer = Trainer(model, TrainConfig(epochs=3, batch_size=8, progress=False, device="cpu"), out_dir=tmp_path)
    with pytest.raises(NonFiniteError, match=r"epoch 1, batch 2 of 3: loss is nan"):
        trainer.fit(data)
    assert not (tmp_path / "best.pt").exists()


def test_non_finite_gradient_stops(preset, data):
    model = seeded_model(preset)
    model.head.weight.register_hook(lambda grad: grad * float("inf"))
    trainer = Trainer(model, TrainConfig(epochs=1, batch_size=8, progress=False, device="cpu"))
    with pytest.raises(NonFiniteError, match="epoch 1, batch 1 of 3: gradient norm is"):
        trainer.fit(data)


def test_skip_mode_skips_only_the_bad_steps(preset, data):
    model = seeded_model(preset)
    _poison_call(model, {2, 5})  # epoch 1 batch 2 and epoch 2 batch 2 (3 batches per epoch, no validation)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = Trainer(model, TrainConfig(epochs=2, batch_size=8, progress=False, device="cpu", on_nonfinite="skip"))
    result = trainer.fit(data)
    assert result.history["skipped_steps"].tolist() == [1, 1]
    assert np.isfinite(result.history["train_loss"]).all()
    state = model.state_dict()
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    assert any(not torch.equal(before[k], state[k]) for k in state)  # the good steps were taken


# --------------------------------------------------------------------------------------------
# settings validated in the dataclasses, with the allowed range in the message
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, fragment", [
    (dict(lr=-1.0), "lr must be a finite number in [0, 10], got -1.0"),
    (dict(lr=float("nan")), "lr must be a finite number in [0, 10], got nan"),
    (dict(lr=float("inf")), "lr must be"),
    (dict(batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (dict(batch_size=-1), "batch_size must be an integer >= 1"),
    (dict(batch_size=2.5), "batch_size must be an integer >= 1"),
    (dict(patience=-3), "patience must be an integer >= 0, got -3"),
    (dict(epochs=0), "epochs must be an integer >= 1"),
    (dict(grad_clip=-1.0), "grad_clip must be a finite number >= 0"),
    (dict(weight_decay=float("nan")), "weight_decay"),
    (dict(final_lr_ratio=2.0), "final_lr_ratio must be a finite number in [0, 1]"),
    (dict(warmup_epochs=-1), "warmup_epochs"),
    (dict(num_workers=-2), "num_workers"),
    (dict(seed=-1), "seed"),
    (dict(on_nonfinite="ignore"), "on_nonfinite must be one of ('stop', 'skip')"),
    (dict(device=3), "device must be a string"),
])
def test_train_config_rejects_out_of_range_values(kwargs, fragment):
    with pytest.raises(ConfigError) as info:
        TrainConfig(**kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(num_layers=0), "num_layers must be an integer in [1, 256]"),
    (dict(hidden_dim=-8), "hidden_dim"),
    (dict(dropout=1.0), "dropout must be a finite number in [0, 1)"),
    (dict(attn_dropout=float("nan")), "attn_dropout"),
    (dict(num_tasks=0), "num_tasks"),
    (dict(ffn_dim=0), "ffn_dim"),
    (dict(rwse_steps=-1), "rwse_steps"),
    (dict(num_layers=True), "num_layers"),
])
def test_model_config_rejects_out_of_range_values(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        ModelConfig(**kwargs)


def test_featurizer_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="embed_seed"):
        FeaturizerConfig(embed_seed=-5)
    with pytest.raises(ConfigError, match="explicit_hydrogens must be True or False"):
        FeaturizerConfig(explicit_hydrogens="yes")


def test_layer_lr_decay_gives_each_block_its_rate():
    """Head at lr; block i of L at lr * scale * g**(L + 1 - i); encoders at lr * scale * g**(L + 1)."""
    from dgl_graphtx.models import build_model, get_preset
    from dgl_graphtx.training import TrainConfig
    from dgl_graphtx.training.parameter_groups import parameter_groups

    model = build_model(get_preset("gradformer", num_layers=3, hidden_dim=16, num_heads=2).model)
    config = TrainConfig(epochs=1, lr=1e-3, backbone_lr_scale=0.5, layer_lr_decay=0.5, progress=False)
    groups = parameter_groups(model, config.lr, config.backbone_lr_scale, config.layer_lr_decay)
    rate_of = {id(p): group.get("lr", config.lr) for group in groups for p in group["params"]}
    assert len(rate_of) == len(list(model.parameters()))  # every parameter once
    expected = {**{id(p): 1e-3 * 0.5 * 0.5 ** 4 for p in model.parameters()},
                **{id(p): 1e-3 * 0.5 * 0.5 ** (4 - i) for i, b in enumerate(model.blocks, 1) for p in b.parameters()},
                **{id(p): 1e-3 for p in model.head.parameters()}}
    assert rate_of == pytest.approx(expected)
    with pytest.raises(ConfigError, match="layer_lr_decay"):
        TrainConfig(layer_lr_decay=0.0)


def test_a_classification_target_of_one_class_in_the_training_part_is_said(caplog):
    preset = tiny_preset("vanilla", "tiny", num_layers=1, task="classification", num_tasks=2)
    frame = freesolv_rows(0, 24)
    frame = frame.assign(active=[1.0] * 16 + [0.0, 1.0] * 4, other=[1.0, 0.0] * 12)
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["active", "other"], featurizer=preset.featurizer,
                                        relation=preset.relation, progress=False)
    trainer = Trainer(seeded_model(preset), TrainConfig(epochs=1, batch_size=8, progress=False, device="cpu"))
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        trainer.fit(torch.utils.data.Subset(ds, range(16)), torch.utils.data.Subset(ds, range(16, 24)))
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("training set:")]
    assert said == ["training set: target 'target 0' holds only class 1, so the model cannot learn to tell the classes apart; "
                    "split otherwise (another --seed, or --split-col)"]
