"""Command-line options: values checked before any work, by the parser (their type) and by the
library (ranges and choices), classification labels checked, metrics printed as valid JSON with
reasons."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from conftest_models import freesolv_rows
from cli_fixtures import checkpoint, data_csv, workdir  # noqa: F401  (module fixtures)
from cli_runner import assert_one_error_line, run_cli_without_runtime_warnings as run_cli

from dgl_graphtx.datasets import random_split


# --------------------------------------------------------------------------------------------
# options checked before any work, with the allowed range
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option, value, allowed", [
    ("--lr", "-1", "lr must be a finite number in [0, 10], got -1.0"),
    ("--lr", "nan", "lr must be a finite number in [0, 10], got nan"),
    ("--lr", "fast", "--lr: train.lr must be a number, got 'fast'"),
    ("--patience", "-3", "patience must be an integer >= 0, got -3"),
    ("--batch-size", "0", "batch_size must be an integer >= 1, got 0"),
    ("--epochs", "2.5", "--epochs: train.epochs must be an integer, got '2.5'"),
    ("--seed", "-1", "seed must be an integer in [0, 4294967295], got -1"),
    ("--device", "tpu:7", "unknown device 'tpu:7'"),
])
def test_train_options_are_checked_before_any_work(data_csv, workdir, option, value, allowed):
    """A value of the wrong type is refused by the parser, naming the option; one out of range
    by the library's own check of the setting (as in a config file), before any work."""
    out = workdir / f"never{option}{value}"
    result = run_cli(["train", data_csv, "--targets", "expt", "--out", out, option, value])
    assert_one_error_line(result, allowed)
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_predict_batch_size_is_checked(checkpoint, value):
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--batch-size", value, "CCO"]),
                          "--batch-size", "must be an integer >= 1")


@pytest.mark.parametrize("command", ["predict", "embed"])
def test_a_molecule_file_given_as_a_smiles_argument_is_refused_naming_input(checkpoint, data_csv, workdir, command, monkeypatch):
    """The probe: `predict --checkpoint best.pt data.csv` predicted the file's name as one invalid
    molecule; a name of a file that does not exist yet is caught by its ending."""
    more = ["--output", workdir / "e.csv"] if command == "embed" else []
    for name in (data_csv, "mols.sdf"):
        assert_one_error_line(run_cli([command, "--checkpoint", checkpoint, "CCO", name, *more]),
                              f"'{name}' is the name of a molecule file, not a SMILES string: give it with --input {name}")
    monkeypatch.chdir(workdir)
    (workdir / "CCO").write_text("smiles\nC\n")  # a file named as a SMILES: the argument is still the SMILES
    assert run_cli([command, "--checkpoint", checkpoint, "CCO", *more])[0] == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_cuda_device_is_refused_at_parse_time(checkpoint, data_csv):
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--device", "cuda", "CCO"]), "CUDA is not available")
    assert_one_error_line(run_cli(["evaluate", data_csv, "--checkpoint", checkpoint, "--device", "cuda:1"]), "CUDA")


def test_unknown_choice_is_one_error_line(data_csv, workdir):
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", workdir / "c", "--task", "ranking"]),
                          "task must be one of ('regression', 'classification', 'multiclass'), got 'ranking'")


# --------------------------------------------------------------------------------------------
# classification labels must be 0/1; undefined metrics are explained
# --------------------------------------------------------------------------------------------
def test_classification_on_continuous_labels_is_refused(data_csv, workdir):
    out = workdir / "cls"
    result = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--task", "classification",
                      "--model", "vanilla", "--epochs", "1", "--no-progress", "--device", "cpu"])
    assert_one_error_line(result, "classification needs labels 0 or 1", "'expt'", "regression")
    assert not (out / "best.pt").exists()


def test_single_class_split_is_explained_not_silently_nan(workdir):
    parts = random_split(30, (0.8, 0.1, 0.1), 1)
    frame = freesolv_rows(0, 30)[["smiles"]].assign(active=0)
    frame.loc[list(parts.test) + list(parts.train[:10]), "active"] = 1  # test part: class 1 only
    path = workdir / "cls.csv"
    frame.to_csv(path, index=False)
    out = workdir / "cls_run"
    code, stdout, err = run_cli(["train", path, "--targets", "active", "--out", out, "--task", "classification",
                                 "--model", "vanilla", "--preset", "tiny", "--epochs", "1", "--batch-size", "8",
                                 "--no-progress", "--device", "cpu", "--seed", "1"])
    assert code == 0, err
    assert pd.read_csv(out / "test_predictions.csv")["active"].tolist() == [1] * len(parts.test)
    summary = json.loads((out / "metrics.json").read_text(), parse_constant=lambda name: pytest.fail(name))
    assert summary["test"]["rocauc"] is None and summary["test"]["ap"] is None
    assert summary["notes"] == [f"target 'active': only class 1 among {len(parts.test)} labelled molecules, "
                                "so ROC-AUC and AP are undefined"]
    assert "rocauc n/a" in stdout and "note: target 'active': only class 1" in stdout


# --------------------------------------------------------------------------------------------
# evaluate prints valid JSON and no numpy warnings
# --------------------------------------------------------------------------------------------
def test_evaluate_output_is_strict_json_with_reasons(checkpoint, workdir):
    path = workdir / "huge.csv"
    pd.DataFrame({"smiles": ["CCO", "CCC", "C1CC"], "expt": [1e308, -1e308, 1.0]}).to_csv(path, index=False)
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--device", "cpu"])
    assert code == 0, err
    report = json.loads(stdout, parse_constant=lambda name: pytest.fail(f"non-JSON constant {name}"))
    assert report["rmse"] is None and report["invalid"] == 1
    path = workdir / "unlabelled.csv"
    pd.DataFrame({"smiles": ["CCO", "CCC"], "expt": [None, None]}).to_csv(path, index=False)
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--device", "cpu"])
    report = json.loads(stdout, parse_constant=lambda name: pytest.fail(f"non-JSON constant {name}"))
    assert code == 0 and report["rmse"] is None and "no labelled molecules" in report["notes"][0]
    path = workdir / "unreadable.csv"  # labelled, but no molecule could be predicted (the probe: "no labelled molecules")
    pd.DataFrame({"smiles": ["C1CC", "xyz"], "expt": [1.0, 2.0]}).to_csv(path, index=False)
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--device", "cpu"])
    assert code == 0 and json.loads(stdout)["notes"] == [
        "target 'expt': none of its 2 labelled molecules has a prediction (the error column says why), so no metric can be computed"]


def test_evaluate_says_why_labels_were_left_out(checkpoint, workdir):
    """A 1e308 label used to void every metric (null, notes []), and a column of text labels was
    dropped without a word: unusable labels are left out of the metrics, with the reason."""
    path = workdir / "one_huge.csv"
    frame = pd.DataFrame({"smiles": ["CCO", "CCC", "CCN", "CCCl"], "expt": [1.0, 1e308, 2.0, 4.0]})
    frame.to_csv(path, index=False)
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--device", "cpu", "--output", workdir / "rows.csv"])
    assert code == 0, err
    report = json.loads(stdout)
    rows = pd.read_csv(workdir / "rows.csv")
    kept = [0, 2, 3]
    expected = ((rows["expt_pred"][kept] - frame["expt"][kept]) ** 2).mean() ** 0.5
    assert report["labelled"] == 3 and report["rmse"] == pytest.approx(expected)
    assert report["notes"] == ["target 'expt': 1 label value(s) unusable and left out of the metrics (first: row 1 CCC: "
                               "value 1e+308 in target 'expt' is beyond float32's range (|y| > 3.403e+38); rescale the target)"]
    path = workdir / "text_labels.csv"
    pd.DataFrame({"smiles": ["CCO", "CCC"], "expt": ["high", "low"]}).to_csv(path, index=False)
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--device", "cpu"])
    assert code == 0, err
    assert json.loads(stdout)["notes"] == [
        "target 'expt': 2 label value(s) unusable and left out of the metrics (first: row 0 CCO: unusable value 'high' in target 'expt')",
        "target 'expt': no labelled molecules, so no metric can be computed"]
