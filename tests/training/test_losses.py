"""Losses, censored labels, weights, metric choice and multiclass training against hand-computed values."""
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import Subset

from cli_runner import assert_one_error_line, run_cli
from dgl_graphtx.datasets import freesolv, load_labelled
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.training import TrainConfig, Trainer, compute_metrics, per_label_loss, resolve_loss, weighted_loss

ALL = torch.ones(3, 1, dtype=torch.bool)


def test_bounded_mse_three_samples_by_hand():
    out = torch.tensor([[2.0], [2.0], [2.0]])
    y = torch.tensor([[3.0], [1.0], [5.0]])
    censor = torch.tensor([[-1], [-1], [1]])  # "<3": 2 is below, free; "<1": 2 is above, (2-1)^2; ">5": 2 below, (2-5)^2
    assert float(weighted_loss("bounded_mse", out, y, ALL, censor=censor)) == pytest.approx((0 + 1 + 9) / 3)
    assert float(weighted_loss("bounded_mse", out, y, ALL)) == pytest.approx((1 + 1 + 9) / 3)  # no censoring: MSE


def test_regression_losses_by_hand():
    out, y = torch.tensor([[0.0], [3.0], [0.5]]), torch.zeros(3, 1)
    assert float(weighted_loss("mse", out, y, ALL)) == pytest.approx((0 + 9 + 0.25) / 3)
    assert float(weighted_loss("mae", out, y, ALL)) == pytest.approx((0 + 3 + 0.5) / 3)
    assert float(weighted_loss("huber", out, y, ALL)) == pytest.approx((0 + (3 - 0.5) + 0.5 * 0.25) / 3)


def _sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_bce_pos_weight_and_weights_by_hand():
    logits, y = torch.tensor([[0.0], [0.0], [2.0]]), torch.tensor([[1.0], [0.0], [1.0]])
    expected = (3 * -math.log(0.5) + -math.log(0.5) + 3 * -math.log(_sigmoid(2.0))) / 3
    assert float(weighted_loss("bce", logits, y, ALL, pos_weight=torch.tensor([3.0]))) == pytest.approx(expected, rel=1e-6)
    weights = torch.tensor([1.0, 0.0, 2.0])
    expected = (-math.log(0.5) + 0 + 2 * -math.log(_sigmoid(2.0))) / 3
    assert float(weighted_loss("bce", logits, y, ALL, sample_weights=weights)) == pytest.approx(expected, rel=1e-6)


def test_cross_entropy_two_tasks_and_missing_labels():
    logits = torch.tensor([[0.0, math.log(3.0), 0.0, 0.0]])  # task 0: p = (1/4, 3/4); task 1: (1/2, 1/2)
    y, mask = torch.tensor([[1.0, float("nan")]]), torch.tensor([[True, False]])
    assert float(weighted_loss("cross_entropy", logits, y, mask)) == pytest.approx(-math.log(0.75))
    out = per_label_loss("cross_entropy", logits, torch.tensor([[0.0, 1.0]]))
    assert out.tolist()[0] == pytest.approx([-math.log(0.25), -math.log(0.5)])


def test_task_weights_and_masked_nan_have_no_gradient():
    out = torch.tensor([[1.0, 2.0]], requires_grad=True)
    loss = weighted_loss("mse", out, torch.tensor([[0.0, float("nan")]]), torch.tensor([[True, False]]),
                         task_weights=torch.tensor([3.0, 1.0]))
    loss.backward()
    assert float(loss.detach()) == 3.0 and out.grad.tolist() == [[6.0, 0.0]]


def test_losses_must_fit_the_task():
    with pytest.raises(ConfigError, match="does not apply to classification"):
        resolve_loss("classification", "huber")
    with pytest.raises(ConfigError, match="do not apply to regression"):
        compute_metrics("regression", np.zeros((2, 1)), np.zeros((2, 1)), ["rocauc"])


def _tiny(tmp_path, n=24):
    frame = freesolv()[:n].copy()
    frame["kind"] = (frame["expt"].rank(method="first").to_numpy() - 1) * 3 // n
    frame["y"] = frame["expt"].astype(str)
    frame.loc[frame.index[:3], "y"] = "<" + frame["y"].iloc[:3]
    frame["w"] = [0.0] * 6 + [1.0] * (n - 6)
    path = tmp_path / "tiny.csv"
    frame.to_csv(path, index=False)
    return frame, path


def test_censored_labels_and_weights_are_read_and_used(tmp_path):
    frame, path = _tiny(tmp_path)
    p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
    ds, _ = load_labelled(path, ["y"], censored=True, weight_col="w", featurizer=p.featurizer, relation=p.relation, progress=False)
    assert ds.censor[:4, 0].tolist() == [-1, -1, -1, 0]
    assert ds.raw_labels[:3, 0].tolist() == pytest.approx(frame["expt"][:3].tolist())
    assert ds.sample_weights.tolist() == frame["w"].tolist()
    # a batch of only zero-weight molecules contributes zero loss: training on them changes nothing
    torch.manual_seed(0)
    model = build_model(p.model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = TrainConfig(epochs=1, batch_size=6, lr=0.1, weight_decay=0.0, warmup_epochs=0, progress=False, loss="bounded_mse")
    Trainer(model, cfg).fit(Subset(ds, list(range(6))))
    changed = [k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.equal(v, before[k]) and "target_" not in k]
    assert changed == []
    Trainer(model, cfg).fit(Subset(ds, list(range(6, 12))))
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items() if "target_" not in k)


def test_multiclass_end_to_end_with_chosen_metrics(tmp_path):
    _, path = _tiny(tmp_path)
    out = tmp_path / "mc"
    code, stdout, stderr = run_cli(["train", path, "--targets", "kind", "--task", "multiclass", "--num-classes", "3",
                                    "--metrics", "f1,accuracy", "--out", out, "--model", "vanilla", "--epochs", "2",
                                    "--batch-size", "8", "--device", "cpu", "--no-progress",
                                    "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 0, stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["test"]) == ["f1", "accuracy"]
    assert "valid_f1" in pd.read_csv(out / "log.csv").columns
    table = pd.read_csv(out / "test_predictions.csv")
    probs = table[["kind_prob_0", "kind_prob_1", "kind_prob_2"]].to_numpy()
    assert np.allclose(probs.sum(1), 1.0) and (table["kind_pred"] == probs.argmax(1)).all()
    assert metrics["test"]["accuracy"] == pytest.approx(float((table["kind_pred"] == table["kind"]).mean()))
    code, stdout, stderr = run_cli(["predict", "--checkpoint", out / "best.pt", "CCO", "c1ccccc1"])
    assert code == 0, stderr
    assert "kind_prob_2" in stdout
    code, stdout, stderr = run_cli(["evaluate", path, "--checkpoint", out / "best.pt", "-q"])
    assert code == 0, stderr
    report = json.loads(stdout)
    frame = pd.read_csv(path)
    predicted = Predictor(out / "best.pt").predict(frame["smiles"].tolist())
    assert report["molecules"] == 24
    assert report["accuracy"] == pytest.approx(float((predicted["kind_pred"].to_numpy() == frame["kind"].to_numpy()).mean()))


def test_multiclass_labels_out_of_range_are_one_clear_error(tmp_path):
    _, path = _tiny(tmp_path)
    code, _, stderr = run_cli(["train", path, "--targets", "kind", "--task", "multiclass", "--num-classes", "2",
                               "--out", tmp_path / "bad", "--model", "vanilla", "--epochs", "1", "--no-progress",
                               "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 2 and "--num-classes 2" in stderr and "'kind'" in stderr


@pytest.mark.parametrize("flags, fragment", [
    (["--task", "classification", "--loss", "huber"], "loss 'huber' does not apply to classification"),
    (["--metrics", "rmse,accuracy"], "['accuracy'] do not apply to regression"),
    (["--task-weights", "1,2"], "2 task weight(s)"),
    (["--weight-col", "nope"], "column 'nope'"),
])
def test_loss_settings_that_do_not_fit_are_one_clear_error(tmp_path, flags, fragment):
    _, path = _tiny(tmp_path)
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--out", tmp_path / "x", "--model", "vanilla",
                                   "--epochs", "1", "--no-progress", *flags]), fragment)
