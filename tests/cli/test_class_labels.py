"""Text class labels (B3DB-style BBB+/BBB-): refused for regression with one line, mapped to 0/1
for classification (automatically or by --positive-label), recorded in the checkpoint and reused
by evaluate; --pos-weight auto|X weights the positive labels of the BCE loss."""
from __future__ import annotations

import json
import logging
import math

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from conftest_models import freesolv_rows
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets.class_labels import ClassLabels, check_usable_targets, encode_class_labels
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.training.trainer import masked_loss, positive_weights

SMALL = ["--model", "vanilla", "--epochs", "2", "--batch-size", "16", "--device", "cpu", "--no-progress",
         "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


@pytest.fixture(scope="module")
def b3db(tmp_path_factory):
    """A B3DB-like file: 40 molecules labelled BBB+ (the 15 lowest hydration free energies) or BBB-."""
    frame = freesolv_rows(0, 40)[["smiles", "expt"]].copy()
    positive = frame["expt"].rank(method="first") <= 15
    frame["BBB"] = np.where(positive, "BBB+", "BBB-")
    path = tmp_path_factory.mktemp("b3db") / "b3db.csv"
    frame[["smiles", "BBB"]].to_csv(path, index=False)
    return path, frame


def test_text_labels_for_regression_are_one_error_line_before_training(b3db, tmp_path):
    path, _ = b3db
    line = assert_one_error_line(run_cli(["train", path, "--targets", "BBB", "--out", tmp_path / "o", *SMALL]),
                                 "target 'BBB'", "no usable label", "'BBB+'", "--task classification")
    assert "--positive-label" in line
    assert not (tmp_path / "o" / "best.pt").exists()


def test_classification_with_no_usable_label_is_refused_not_trained_on_nothing(tmp_path):
    frame = freesolv_rows(0, 20)[["smiles"]].copy()
    frame["active"] = ""
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    assert_one_error_line(run_cli(["train", path, "--targets", "active", "--task", "classification", "--out", tmp_path / "o", *SMALL]),
                          "target 'active'", "no usable label")
    assert not (tmp_path / "o" / "best.pt").exists()


@pytest.mark.parametrize("flag, positive", [([], "BBB+"), (["--positive-label", "BBB-"], "BBB-")])
def test_two_text_classes_train_and_the_mapping_is_recorded(b3db, tmp_path, caplog, flag, positive):
    path, frame = b3db
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(["train", path, "--targets", "BBB", "--task", "classification", "--out", out, *flag, *SMALL])
    assert code == 0, stderr
    meta = load_checkpoint(out / "best.pt").meta
    negative = "BBB-" if positive == "BBB+" else "BBB+"
    assert meta.extra.class_labels == [{"target": "BBB", "negative": negative, "positive": positive}]
    tested = pd.read_csv(out / "test_predictions.csv")
    by_smiles = dict(zip(frame["smiles"], frame["BBB"]))
    assert tested["BBB"].tolist() == [1.0 if by_smiles[s] == positive else 0.0 for s in tested["smiles"]]
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["test"]["rocauc"] is not None or summary["notes"]
    kernel = summary["fingerprint_kernel"]  # a classification kernel: weight chosen by the log-loss of the blend in logits
    assert {"valid_log_loss_network", "valid_log_loss_kernel", "valid_log_loss_blend"} <= set(kernel)
    assert kernel["valid_log_loss_blend"][0] <= min(kernel["valid_log_loss_network"][0], kernel["valid_log_loss_kernel"][0]) + 1e-6
    assert "validation log-loss network" in stdout
    # evaluate maps the same text labels with the stored mapping: every molecule is labelled
    code, stdout, stderr = run_cli(["evaluate", path, "--checkpoint", out, "--device", "cpu"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["labelled"] == len(frame) and report["rocauc"] is not None
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        assert run_cli(["predict", "CCO", "--checkpoint", out, "--device", "cpu"])[0] == 0
    assert f"BBB is the probability of class {positive!r}" in caplog.text


def test_positive_label_must_be_one_of_the_values(b3db, tmp_path):
    path, _ = b3db
    assert_one_error_line(run_cli(["train", path, "--targets", "BBB", "--task", "classification", "--positive-label", "yes",
                                   "--out", tmp_path / "o", *SMALL]), "--positive-label 'yes'", "'BBB+'")


def test_positive_label_with_regression_is_refused(tmp_path):
    path = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(path, index=False)
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--positive-label", "1", "--out", tmp_path / "o", *SMALL]),
                          "classification only")


def test_automatic_choice_of_the_positive_class():
    def positive(values):
        return encode_class_labels(pd.DataFrame({"y": values}))[1][0].positive
    assert positive(["BBB-", "BBB+"]) == "BBB+"
    assert positive(["inactive", "active"]) == "active"
    assert positive(["no", "yes"]) == "yes"
    assert positive(["non-toxic", "toxic"]) == "toxic"
    assert positive(["beta", "alpha"]) == "beta"  # no clue in the words: the later one alphabetically


def test_numbers_other_than_0_1_are_mapped_only_when_the_positive_label_names_one():
    frame = pd.DataFrame({"y": [-1.0, 1.0, np.nan, 1.0]})
    unchanged, none = encode_class_labels(frame)
    assert none == () and unchanged["y"].tolist()[:2] == [-1.0, 1.0]
    encoded, classes = encode_class_labels(frame, positive_label="-1")
    assert classes == (ClassLabels("y", negative="1", positive="-1"),)
    assert encoded["y"].tolist()[:2] == [1.0, 0.0] and math.isnan(encoded["y"][2])


def test_more_than_two_text_classes_are_refused():
    with pytest.raises(ConfigError, match="3 distinct value"):
        encode_class_labels(pd.DataFrame({"y": ["a", "b", "c"]}))


def test_a_0_1_column_of_one_class_is_refused_as_text_of_one_class_is():
    with pytest.raises(ConfigError, match=r"^classification target 'y' has 1 distinct value\(s\) \('1'\); it needs exactly two"):
        encode_class_labels(pd.DataFrame({"y": [1.0, np.nan, 1.0]}))
    with pytest.raises(ConfigError, match=r"^classification target 'y' has 1 distinct value\(s\) \('yes'\)"):
        encode_class_labels(pd.DataFrame({"y": ["yes", "", "yes"]}))
    kept, classes = encode_class_labels(pd.DataFrame({"y": [1.0, 0.0, np.nan]}))
    assert classes == () and kept["y"].tolist()[:2] == [1.0, 0.0]


def test_a_column_with_some_numbers_passes_the_usable_label_check():
    check_usable_targets(pd.DataFrame({"y": ["1.5", "n/a", ""]}), "d.csv", "regression")
    with pytest.raises(ConfigError, match="every value is blank"):
        check_usable_targets(pd.DataFrame({"y": ["", None]}), "d.csv", "regression")


def test_auto_pos_weight_is_negatives_over_positives_per_target():
    labels = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, float("nan")], [1.0, 1.0]])
    # target 0: 3 negatives / 2 positives; target 1: 2 negatives / 2 positives
    assert positive_weights(labels, ["a", "b"]).tolist() == [1.5, 1.0]


def test_weighted_loss_matches_a_hand_written_bce():
    logits = torch.tensor([[0.3, -1.2], [2.0, 0.5]])
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    mask = torch.tensor([[True, True], [True, False]])
    weight = torch.tensor([4.0, 2.0])
    sig = torch.sigmoid(logits)
    terms = -(weight * target * torch.log(sig) + (1 - target) * torch.log(1 - sig))
    expected = (terms[0, 0] + terms[0, 1] + terms[1, 0]) / 3
    assert masked_loss("classification", logits, target, mask, weight).item() == pytest.approx(expected.item(), rel=1e-6)
    assert masked_loss("classification", logits, target, mask).item() != pytest.approx(expected.item(), rel=1e-3)


def test_pos_weight_auto_is_recorded_and_changes_training(b3db, tmp_path):
    path, _ = b3db
    runs = {}
    for name, extra in (("plain", []), ("auto", ["--pos-weight", "auto"])):
        out = tmp_path / name
        code, _, stderr = run_cli(["train", path, "--targets", "BBB", "--task", "classification", "--out", out, *extra, *SMALL])
        assert code == 0, stderr
        runs[name] = pd.read_csv(out / "log.csv")["train_loss"].tolist()
    config = yaml.safe_load((tmp_path / "auto" / "config.yaml").read_text())
    assert config["train"]["pos_weight"] == "auto"
    assert load_checkpoint(tmp_path / "auto" / "best.pt").meta.extra.train_config["pos_weight"] == "auto"
    assert runs["plain"] != runs["auto"]


def test_pos_weight_is_refused_for_regression_and_checked_at_parse_time(tmp_path):
    path = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(path, index=False)
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--pos-weight", "2", "--out", tmp_path / "o", *SMALL]),
                          "classification only")
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--pos-weight", "-1", "--out", tmp_path / "o"]),
                          "pos_weight must be a finite number > 0, got -1.0")
