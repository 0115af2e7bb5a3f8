"""Multi-task runs report each target's metrics next to the mean: metrics.json and the console."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest_models import freesolv_rows
from cli_runner import run_cli

from dgl_graphtx.training.target_metrics import per_target_metrics


def test_train_writes_and_prints_per_target_metrics(tmp_path):
    frame = freesolv_rows(0, 40)[["smiles", "expt"]].copy()
    frame["half"] = frame["expt"] / 2 + 1.0
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", data, "--targets", "expt,half", "--out", out, "--model", "vanilla", "--epochs", "1",
                                 "--device", "cpu", "--no-progress", "--set", "model.num_layers=1", "model.hidden_dim=16",
                                 "model.num_heads=2"])
    assert code == 0, err
    summary = json.loads((out / "metrics.json").read_text())
    tested = pd.read_csv(out / "test_predictions.csv")
    for name in ("expt", "half"):
        error = tested[f"{name}_pred"] - tested[name]
        values = summary["test_per_target"][name]
        assert values["rmse"] == pytest.approx(float(np.sqrt((error ** 2).mean())), rel=1e-6)
        assert values["mae"] == pytest.approx(float(error.abs().mean()), rel=1e-6)
        total = ((tested[name] - tested[name].mean()) ** 2).sum()
        assert values["r2"] == pytest.approx(1 - float((error ** 2).sum() / total), rel=1e-6)
        assert any(line.strip().startswith(f"{name}: rmse {values['rmse']:.4f}") for line in stdout.splitlines())
    assert summary["test"]["mae"] == pytest.approx(np.mean([summary["test_per_target"][n]["mae"] for n in ("expt", "half")]))
    assert "(mean over targets)" in stdout


def test_classification_per_target_auc_by_hand():
    y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, np.nan], [0.0, 1.0]])
    p = np.array([[0.9, 0.2], [0.1, 0.3], [0.4, 0.5], [0.6, 0.8]])
    metrics = per_target_metrics("classification", y, p, ["a", "b"])
    # target a: positives 0.9, 0.4 vs negatives 0.1, 0.6 -> 3 of 4 pairs ordered; target b: all ordered
    assert metrics["a"]["rocauc"] == pytest.approx(0.75) and metrics["b"]["rocauc"] == pytest.approx(1.0)


def test_multiclass_metrics_of_a_part_missing_a_class_follow_sklearn():
    """Class 0 of 4 is neither labelled nor predicted: a perfect classification scored F1 0.75
    (the absent class counted as 0), and ROC-AUC renormalised the probabilities over the classes
    present (1.0 for columns that do not separate the classes)."""
    from sklearn.metrics import f1_score, roc_auc_score

    from dgl_graphtx.training.metrics import multiclass_metrics

    perfect = np.array([[0.1, 0.7, 0.1, 0.1], [0.1, 0.1, 0.7, 0.1], [0.1, 0.1, 0.1, 0.7], [0.3, 0.4, 0.2, 0.1]])
    assert multiclass_metrics(np.array([[1.0], [2.0], [3.0], [1.0]]), perfect)["f1"] == 1.0
    y = np.array([1, 2, 1, 2, 3, 3, 1])
    p = np.array([[0.6, 0.3, 0.1, 0.0], [0.0, 0.4, 0.6, 0.0], [0.0, 0.45, 0.5, 0.05], [0.7, 0.1, 0.2, 0.0],
                  [0.2, 0.2, 0.2, 0.4], [0.0, 0.5, 0.1, 0.4], [0.1, 0.8, 0.05, 0.05]])
    metrics = multiclass_metrics(y[:, None].astype(float), p)
    # each labelled class against the rest on its own column: 1: 9 of 12 pairs ordered, 2: 8.5 of 10 (a tie), 3: 10 of 10
    assert metrics["rocauc"] == pytest.approx((9 / 12 + 8.5 / 10 + 1.0) / 3)
    assert metrics["rocauc"] == pytest.approx(np.mean([roc_auc_score(y == k, p[:, k]) for k in (1, 2, 3)]))
    assert metrics["f1"] == pytest.approx(f1_score(y, p.argmax(1), average="macro"))
    full = np.array([0, 1, 2, 3, 0, 2])  # every class labelled: sklearn's one-vs-rest itself
    q = np.random.default_rng(0).dirichlet(np.ones(4), size=6)
    assert multiclass_metrics(full[:, None].astype(float), q)["rocauc"] == pytest.approx(roc_auc_score(full, q, multi_class="ovr"))
