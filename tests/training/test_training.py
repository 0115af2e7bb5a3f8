"""Training: masked loss, the Trainer (loss decrease, reproducibility, early stopping, best-epoch
selection, output files), learning-rate schedules and metrics."""
from __future__ import annotations

import copy
import math
import random

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import Subset

from conftest_models import dataset_for, freesolv_rows, has_nitrogen, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, load_checkpoint
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.training import (
    TrainConfig,
    Trainer,
    classification_metrics,
    compute_metrics,
    dataset_labels,
    masked_loss,
    regression_metrics,
    seed_everything,
)
from dgl_graphtx.training.schedule import lr_factor

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _cfg(**kwargs) -> TrainConfig:
    base = dict(epochs=4, batch_size=8, lr=3e-3, warmup_epochs=1, progress=False, device="cpu")
    base.update(kwargs)
    return TrainConfig(**base)


@pytest.fixture(scope="module")
def regression_data():
    """40 FreeSolv molecules for the 1-layer vanilla preset: 32 train, 8 valid."""
    p = tiny_preset("vanilla", "tiny", num_layers=1)
    ds = dataset_for(p.featurizer, p.relation, 0, 40)
    return p, ds, Subset(ds, list(range(32))), Subset(ds, list(range(32, 40)))


# --------------------------------------------------------------------------------------------
# masked loss
# --------------------------------------------------------------------------------------------
def _loss_and_grad(task, output, target, mask):
    out = output.clone().requires_grad_(True)
    loss = masked_loss(task, out, target, mask)
    loss.backward()
    return loss.detach(), out.grad


def test_masked_loss_regression_matches_manual_mse_over_observed_labels():
    gen = torch.Generator().manual_seed(0)
    output = torch.randn(5, 3, generator=gen)
    target = torch.randn(5, 3, generator=gen)
    mask = torch.tensor([[1, 0, 1], [1, 1, 0], [0, 0, 0], [1, 0, 1], [0, 1, 1]], dtype=torch.bool)
    loss, grad = _loss_and_grad("regression", output, target, mask)
    observed = [(i, j) for i in range(5) for j in range(3) if mask[i, j]]
    manual = sum(float(output[i, j] - target[i, j]) ** 2 for i, j in observed) / len(observed)
    assert float(loss) == pytest.approx(manual, rel=1e-6)
    # gradient: 2 (o - t) / n on observed labels, exactly zero elsewhere
    expected = torch.zeros(5, 3)
    for i, j in observed:
        expected[i, j] = 2 * (output[i, j] - target[i, j]) / len(observed)
    assert torch.allclose(grad, expected, atol=1e-6)
    assert torch.equal(grad[~mask], torch.zeros(int((~mask).sum())))
    # a masked label may take any (finite) value without changing the loss or the gradient
    for fill in (0.0, 1e3, -7.25):
        changed = torch.where(mask, target, torch.full_like(target, fill))
        loss2, grad2 = _loss_and_grad("regression", output, changed, mask)
        assert torch.equal(loss2, loss) and torch.equal(grad2, grad)


def test_masked_loss_classification_matches_manual_bce():
    output = torch.tensor([[2.0, -1.0], [0.5, 3.0], [-2.0, 0.0]])
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    mask = torch.tensor([[True, False], [True, True], [False, True]])
    loss, grad = _loss_and_grad("classification", output, target, mask)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    terms = []
    for i in range(3):
        for j in range(2):
            if mask[i, j]:
                p, t = sig(float(output[i, j])), float(target[i, j])
                terms.append(-(t * math.log(p) + (1 - t) * math.log(1 - p)))
    assert float(loss) == pytest.approx(sum(terms) / len(terms), rel=1e-6)
    flipped = torch.where(mask, target, 1 - target)
    loss2, grad2 = _loss_and_grad("classification", output, flipped, mask)
    assert torch.equal(loss2, loss) and torch.equal(grad2, grad)
    assert torch.equal(grad[~mask], torch.zeros(2))


def test_masked_loss_with_nothing_observed_is_zero_not_nan():
    loss, grad = _loss_and_grad("regression", torch.ones(2, 2), torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.bool))
    assert float(loss) == 0.0 and torch.equal(grad, torch.zeros(2, 2))


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_masked_loss_ignores_nan_in_masked_labels(task):
    output = torch.tensor([[0.3, -0.2]])
    target = torch.tensor([[1.0, float("nan")]])
    mask = ~torch.isnan(target)
    loss, grad = _loss_and_grad(task, output, target, mask)
    reference, ref_grad = _loss_and_grad(task, output, torch.nan_to_num(target), mask)
    assert torch.isfinite(loss) and torch.isfinite(grad).all()
    assert torch.equal(loss, reference) and torch.equal(grad, ref_grad)


# --------------------------------------------------------------------------------------------
# seeds and reproducibility
# --------------------------------------------------------------------------------------------
def test_seed_everything_repeats_python_numpy_and_torch():
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    seed_everything(124)
    assert draw() != first


def _train_once(regression_data, seed, **cfg):
    p, _, train, valid = regression_data
    seed_everything(seed)
    model = seeded_model(p, seed)
    trainer = Trainer(model, _cfg(seed=seed, **cfg))
    result = trainer.fit(train, valid)
    return trainer, result


def test_same_seed_gives_identical_history_and_weights(regression_data):
    t1, r1 = _train_once(regression_data, seed=7, epochs=3)
    t2, r2 = _train_once(regression_data, seed=7, epochs=3)
    columns = [c for c in r1.history.columns if c != "seconds"]  # wall-clock time is not reproducible
    assert {"epoch", "lr", "train_loss", "valid_rmse", "valid_mae", "valid_r2"} <= set(columns)
    pd.testing.assert_frame_equal(r1.history[columns], r2.history[columns], check_exact=True)
    assert r1.best_epoch == r2.best_epoch and r1.best_metrics == r2.best_metrics
    s1, s2 = t1.model.state_dict(), t2.model.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    t3, r3 = _train_once(regression_data, seed=8, epochs=3)
    assert not np.array_equal(r3.history["train_loss"].to_numpy(), r1.history["train_loss"].to_numpy())
    assert not np.array_equal(r3.history["valid_rmse"].to_numpy(), r1.history["valid_rmse"].to_numpy())


def test_training_loss_decreases(regression_data):
    _, result = _train_once(regression_data, seed=0, epochs=8, lr=3e-3)
    loss = result.history["train_loss"].to_numpy()
    assert len(loss) == 8 and np.isfinite(loss).all()
    assert loss[-1] < 0.75 * loss[0], loss
    assert loss[-3:].mean() < loss[:3].mean()


# --------------------------------------------------------------------------------------------
# early stopping and best-epoch selection
# --------------------------------------------------------------------------------------------
def test_early_stopping_when_validation_stops_improving(regression_data):
    p, _, train, valid = regression_data
    # lr = 0: AdamW leaves the weights (and the validation metric) exactly unchanged
    model = seeded_model(p)
    before = copy.deepcopy(model.state_dict())
    result = Trainer(model, _cfg(epochs=20, lr=0.0, patience=3)).fit(train, valid)
    assert len(result.history) == 4 < 20  # epoch 1 is best; epochs 2, 3, 4 bring no improvement
    assert result.best_epoch == 1
    assert result.history["valid_rmse"].nunique() == 1
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items() if k not in ("target_mean", "target_std"))
    # without patience every epoch runs
    full = Trainer(seeded_model(p), _cfg(epochs=6, lr=0.0, patience=0)).fit(train, valid)
    assert list(full.history["epoch"]) == [1, 2, 3, 4, 5, 6]


class ScriptedTrainer(Trainer):
    """A Trainer whose validation RMSE follows a script; it snapshots the weights it scored."""

    def __init__(self, *args, scores, **kwargs):
        super().__init__(*args, **kwargs)
        self.scores = list(scores)
        self.snapshots = []

    def evaluate(self, dataset):
        real = super().evaluate(dataset)
        if self.scores:
            self.snapshots.append({k: v.clone() for k, v in self.model.state_dict().items()})
            return {**real, "rmse": self.scores.pop(0)}
        return real


def test_model_after_fit_holds_the_best_validation_epoch_weights(regression_data, tmp_path):
    p, ds, train, valid = regression_data
    scores = [3.0, 1.0, 2.0, 2.5]
    meta = CheckpointMeta(p.featurizer, p.relation, ["expt"])
    trainer = ScriptedTrainer(seeded_model(p), _cfg(epochs=4, lr=5e-3), out_dir=tmp_path, meta=meta, scores=scores)
    result = trainer.fit(train, valid)
    assert result.best_epoch == 2 and result.best_metrics["rmse"] == 1.0
    assert list(result.history["valid_rmse"]) == scores
    final = trainer.model.state_dict()
    best = trainer.snapshots[1]
    assert all(torch.equal(final[k], best[k]) for k in final)
    last = trainer.snapshots[3]
    assert any(not torch.equal(final[k], last[k]) for k in final), "weights moved after epoch 2"
    # best.pt holds the same weights and records its epoch
    loaded = load_checkpoint(tmp_path / "best.pt")
    assert loaded.meta.extra.epoch == 2
    assert all(torch.equal(loaded.model.state_dict()[k], best[k]) for k in best)


def test_early_stopping_counts_from_the_best_epoch(regression_data):
    p, _, train, valid = regression_data
    # improves at 2, then 2 epochs without improvement -> stop after epoch 4 (never sees the 0.5)
    trainer = ScriptedTrainer(seeded_model(p), _cfg(epochs=10, patience=2), scores=[3.0, 2.0, 2.5, 2.1, 0.5, 0.4])
    result = trainer.fit(train, valid)
    assert list(result.history["epoch"]) == [1, 2, 3, 4]
    assert result.best_epoch == 2


def test_evaluate_after_fit_equals_best_metrics(regression_data):
    trainer, result = _train_once(regression_data, seed=3, epochs=6, lr=2e-2)
    history = result.history
    best_row = history.loc[history["valid_rmse"].idxmin()]
    assert result.best_epoch == int(best_row["epoch"])
    again = trainer.evaluate(regression_data[3])
    assert again == pytest.approx(result.best_metrics, rel=1e-9, abs=1e-12)
    assert again["rmse"] == pytest.approx(best_row["valid_rmse"], rel=1e-9)


# --------------------------------------------------------------------------------------------
# output folder
# --------------------------------------------------------------------------------------------
def test_out_dir_gets_log_curve_and_checkpoint(regression_data, tmp_path):
    p, _, train, valid = regression_data
    meta = CheckpointMeta(p.featurizer, p.relation, ["expt"])
    epochs = 3
    result = Trainer(seeded_model(p), _cfg(epochs=epochs), out_dir=tmp_path / "run", meta=meta).fit(train, valid)
    out = tmp_path / "run"
    log = pd.read_csv(out / "log.csv")
    assert len(log) == epochs and list(log["epoch"]) == [1, 2, 3]
    assert list(log.columns[:3]) == ["epoch", "lr", "train_loss"]
    assert {"valid_rmse", "valid_mae", "valid_r2"} <= set(log.columns)
    np.testing.assert_allclose(log["train_loss"], result.history["train_loss"], rtol=1e-12)
    np.testing.assert_allclose(log["valid_rmse"], result.history["valid_rmse"], rtol=1e-12)
    png = out / "learning_curve.png"
    assert png.read_bytes()[:8] == PNG_SIGNATURE
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert (out / "best.pt").is_file()
    assert load_checkpoint(out / "best.pt").meta.extra.epoch == result.best_epoch
    assert not [f for f in out.iterdir() if f.name.endswith(".tmp")]


def test_logged_learning_rate_follows_the_schedule(regression_data):
    p, _, train, valid = regression_data
    epochs, lr = 5, 1e-2
    cfg = _cfg(epochs=epochs, lr=lr, warmup_epochs=2, schedule="linear", final_lr_ratio=0.1)
    result = Trainer(seeded_model(p), cfg).fit(train, valid)
    steps = 4  # 32 training molecules, batches of 8
    # warm-up over 8 steps, linear decay to 0.1 * lr at step 20; the log records the lr used by
    # each epoch's last optimisation step (0-based step 4 e - 1)
    expected = [lr * f for f in (4 / 8, 1.0, 1 - 0.9 * 3 / 12, 1 - 0.9 * 7 / 12, 1 - 0.9 * 11 / 12)]
    np.testing.assert_allclose(result.history["lr"], expected, rtol=1e-9)
    factor = lr_factor("linear", 2 * steps, epochs * steps, 0.1)
    np.testing.assert_allclose(result.history["lr"], [lr * factor(e * steps - 1) for e in range(1, epochs + 1)])


# --------------------------------------------------------------------------------------------
# learning-rate schedules
# --------------------------------------------------------------------------------------------
def test_lr_factor_linear():
    f = lr_factor("linear", warmup_steps=2, total_steps=10, final_ratio=0.1)
    expected = [0.5, 1.0, 1.0, 0.8875, 0.775, 0.6625, 0.55, 0.4375, 0.325, 0.2125, 0.1, 0.1, 0.1]
    assert [f(s) for s in range(13)] == pytest.approx(expected, abs=1e-12)


def test_lr_factor_cosine():
    f = lr_factor("cosine", warmup_steps=2, total_steps=10, final_ratio=0.1)
    # 0.1 + 0.45 (1 + cos(pi p)), p = (s - 2) / 8
    expected = {0: 0.5, 1: 1.0, 2: 1.0, 4: 0.1 + 0.45 * (1 + math.sqrt(0.5)), 6: 0.55, 8: 0.1 + 0.45 * (1 - math.sqrt(0.5)), 10: 0.1,
                15: 0.1}
    for step, value in expected.items():
        assert f(step) == pytest.approx(value, abs=1e-12), step
    values = [f(s) for s in range(2, 11)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_lr_factor_constant_and_no_warmup():
    f = lr_factor("constant", warmup_steps=4, total_steps=10, final_ratio=0.0)
    assert [f(s) for s in range(8)] == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0])
    g = lr_factor("linear", warmup_steps=0, total_steps=4, final_ratio=0.0)
    assert [g(s) for s in range(5)] == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0])
    with pytest.raises(ValueError):
        lr_factor("step", 0, 10, 0.0)


def test_train_config_validation():
    with pytest.raises(ConfigError):
        TrainConfig(schedule="exponential")
    with pytest.raises(ConfigError):
        TrainConfig(epochs=0)
    with pytest.raises(ConfigError):
        TrainConfig(batch_size=0)


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def test_regression_metrics_with_missing_labels():
    nan = np.nan
    y = np.array([[1.0, 2.0], [2.0, nan], [nan, 0.0], [4.0, 1.0], [3.0, nan]])
    p = np.array([[1.5, 2.5], [1.0, 9.0], [7.0, 0.0], [4.0, 2.0], [2.0, -5.0]])
    # task 0 labelled rows 0, 1, 3, 4: errors -0.5, 1, 0, 1 ; task 1 rows 0, 2, 3: -0.5, 0, -1
    rmse0, rmse1 = math.sqrt((0.25 + 1 + 0 + 1) / 4), math.sqrt((0.25 + 0 + 1) / 3)
    mae0, mae1 = (0.5 + 1 + 0 + 1) / 4, (0.5 + 0 + 1) / 3
    # r2 = 1 - SSE / SST ; task 0 mean 2.5, SST 1.5^2 + 0.5^2 + 1.5^2 + 0.5^2 = 5
    r2_0 = 1 - 2.25 / 5.0
    r2_1 = 1 - 1.25 / ((2 - 1) ** 2 + (0 - 1) ** 2 + (1 - 1) ** 2)  # task 1 labels 2, 0, 1: mean 1
    m = regression_metrics(y, p)
    assert m["rmse"] == pytest.approx((rmse0 + rmse1) / 2, rel=1e-12)
    assert m["mae"] == pytest.approx((mae0 + mae1) / 2, rel=1e-12)
    assert m["r2"] == pytest.approx((r2_0 + r2_1) / 2, rel=1e-12)
    assert compute_metrics("regression", y, p) == m
    # perfect predictions
    perfect = regression_metrics(y, np.nan_to_num(y))
    assert perfect["rmse"] == 0.0 and perfect["mae"] == 0.0 and perfect["r2"] == 1.0


def test_a_target_without_labels_leaves_the_mean_over_the_others():
    """The probe: a second target with no validation labels made the mean RMSE NaN (OGB's mean over
    every task), so every epoch was "best" and early stopping never fired; MAE and R2 skipped it."""
    y = np.array([[1.0, np.nan], [2.0, np.nan], [4.0, np.nan]])
    p = np.array([[1.5, 0.0], [2.5, 0.0], [3.0, 0.0]])
    m = regression_metrics(y, p)
    assert m["rmse"] == pytest.approx(math.sqrt((0.25 + 0.25 + 1) / 3), rel=1e-12)
    assert m["mae"] == pytest.approx((0.5 + 0.5 + 1) / 3, rel=1e-12)
    assert math.isnan(regression_metrics(np.full((2, 1), np.nan), np.zeros((2, 1)))["rmse"])


def test_classification_metrics_hand_computed():
    nan = np.nan
    y = np.array([[0.0, 1.0], [0.0, nan], [1.0, 0.0], [1.0, 1.0]])
    p = np.array([[0.1, 0.9], [0.4, 0.0], [0.35, 0.2], [0.8, 0.1]])
    # task 0: positive scores {0.35, 0.8} vs negative {0.1, 0.4}: 3 of 4 pairs ordered -> 0.75
    # task 1 (row 1 unlabelled): positives {0.9, 0.1} vs negative {0.2}: 1 of 2 -> 0.5
    # AP task 0: ranking 0.8(+) 0.4(-) 0.35(+) 0.1(-): 0.5 * 1 + 0.5 * 2/3
    # AP task 1: ranking 0.9(+) 0.2(-) 0.1(+): 0.5 * 1 + 0.5 * 2/3
    m = classification_metrics(y, p)
    assert m["rocauc"] == pytest.approx((0.75 + 0.5) / 2)
    assert m["ap"] == pytest.approx(0.5 + 1 / 3)
    assert compute_metrics("classification", y, p) == m
    # a task with a single class is skipped; none left -> NaN
    single = classification_metrics(np.array([[1.0], [1.0]]), np.array([[0.3], [0.6]]))
    assert math.isnan(single["rocauc"])
    # log-loss: per task over its labelled rows, then the mean; a one-class task counts; p = 0 for a
    # positive is kept at 1e-6 (a large loss, not an infinite one)
    from sklearn.metrics import log_loss
    assert m["logloss"] == pytest.approx((log_loss([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) + log_loss([1, 0, 1], [0.9, 0.2, 0.1])) / 2)
    assert single["logloss"] == pytest.approx(-(math.log(0.3) + math.log(0.6)) / 2)
    assert classification_metrics(np.array([[1.0]]), np.array([[0.0]]))["logloss"] == pytest.approx(-math.log(1e-6))


def test_dataset_labels_keep_missing_values_as_nan():
    ds = MoleculeDataset(["C", "CC", "CCC", "CCCC"], [[1.0, None], [None, 2.0], [3.0, 4.0], [5.0, None]],
                         target_names=["a", "b"], progress=False)
    labels = dataset_labels(Subset(ds, [3, 1]))
    assert labels.shape == (2, 2)
    assert labels[0, 0] == 5.0 and torch.isnan(labels[0, 1])
    assert torch.isnan(labels[1, 0]) and labels[1, 1] == 2.0


# --------------------------------------------------------------------------------------------
# multi-task with missing labels, classification
# --------------------------------------------------------------------------------------------
def test_multitask_with_missing_labels_trains_without_nan():
    frame = freesolv_rows(0, 36)
    frame.loc[frame.index % 3 == 0, "expt"] = np.nan
    frame.loc[frame.index % 4 == 1, "calc"] = np.nan
    p = tiny_preset("vanilla", "tiny", num_layers=1, num_tasks=2)
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["expt", "calc"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    train_idx, valid_idx = list(range(28)), list(range(28, 36))
    trainer = Trainer(seeded_model(p), _cfg(epochs=3))
    result = trainer.fit(Subset(ds, train_idx), Subset(ds, valid_idx))
    numeric = result.history.drop(columns=["seconds"]).to_numpy(dtype=float)
    assert np.isfinite(numeric).all()
    # the target statistics come from the observed training labels only (population std)
    train_labels = frame.loc[train_idx, ["expt", "calc"]].to_numpy(dtype=float)
    np.testing.assert_allclose(trainer.model.target_mean.numpy(), np.nanmean(train_labels, axis=0), rtol=1e-5)
    np.testing.assert_allclose(trainer.model.target_std.numpy(), np.nanstd(train_labels, axis=0), rtol=1e-5)
    predictions = trainer.predict(ds)
    assert predictions.shape == (36, 2) and np.isfinite(predictions).all()


def test_classification_learns_contains_nitrogen():
    frame = freesolv_rows(0, 64)
    frame["has_n"] = [has_nitrogen(s) for s in frame["smiles"]]
    assert 10 <= frame["has_n"].sum() <= 54  # both classes well represented
    p = tiny_preset("grpe", "tiny", num_layers=1, task="classification")
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["has_n"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    seed_everything(0)
    trainer = Trainer(seeded_model(p), _cfg(epochs=15, batch_size=16, lr=5e-3))
    result = trainer.fit(ds)
    assert result.best_epoch == 15  # without a validation set the last epoch is kept
    probs = trainer.predict(ds)
    assert ((probs >= 0) & (probs <= 1)).all()
    metrics = trainer.evaluate(ds)
    print("training-set ROC-AUC for 'contains nitrogen':", metrics["rocauc"])
    assert metrics["rocauc"] > 0.8
    assert result.history["train_loss"].iloc[-1] < result.history["train_loss"].iloc[0]


def test_fit_with_single_class_validation_set_and_out_dir(tmp_path):
    frame = freesolv_rows(0, 20)
    frame["y"] = [1.0] * 10 + [0.0] * 10
    p = tiny_preset("vanilla", "tiny", num_layers=1, task="classification")
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["y"], featurizer=p.featurizer, relation=p.relation, progress=False)
    result = Trainer(seeded_model(p), _cfg(epochs=2), out_dir=tmp_path).fit(Subset(ds, range(16)), Subset(ds, range(16, 20)))
    assert math.isnan(result.best_metrics["rocauc"])
    assert (tmp_path / "learning_curve.png").is_file()
