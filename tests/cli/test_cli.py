"""Command-line interface: train / predict / evaluate / info in-process, the real console script,
and one-line errors for user mistakes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from conftest_models import freesolv_rows

from dgl_graphtx.cli import build_parser
from dgl_graphtx.datasets import example_sdf_path
from dgl_graphtx.inference import Predictor
from dgl_graphtx.training import regression_metrics
from cli_runner import run_cli

SCRIPT = Path(sys.executable).parent / "dgl-graphtx"
SDF_TARGET = "r_mmffld_Potential_Energy-OPLS_2005"




def _assert_user_error(code, out, err, *fragments):
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:"), err
    assert "Traceback" not in err + out
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def data_csv(workdir):
    path = workdir / "freesolv40.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def trained_run(workdir, data_csv):
    out = workdir / "run"
    result = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "2",
                   "--batch-size", "16", "--device", "cpu", "--no-progress", "--seed", "3"])
    return out, result


# --------------------------------------------------------------------------------------------
# train
# --------------------------------------------------------------------------------------------
def test_train_on_csv_writes_outputs_and_prints_metrics(trained_run):
    out, (code, stdout, stderr) = trained_run
    assert code == 0, stderr
    for name in ("best.pt", "log.csv", "metrics.json", "test_predictions.csv", "learning_curve.png"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "metrics.json").read_text())
    assert set(summary["test"]) == {"rmse", "mae", "r2"}
    assert summary["sizes"] == {"train": 32, "valid": 4, "test": 4}
    assert summary["best_epoch"] in (1, 2)
    log = pd.read_csv(out / "log.csv")
    assert list(log["epoch"]) == [1, 2] and "valid_rmse" in log
    table = pd.read_csv(out / "test_predictions.csv")
    assert len(table) == 4 and {"row", "smiles", "expt", "expt_pred"} <= set(table.columns)
    # the printed test metrics are those of metrics.json, and those of the predictions table
    test_line = next(line for line in stdout.splitlines() if line.startswith("test ("))
    assert "4 molecules" in test_line
    assert f"rmse {summary['test']['rmse']:.4f}" in test_line
    manual_rmse = float(np.sqrt(np.mean((table["expt"] - table["expt_pred"]) ** 2)))
    assert summary["test"]["rmse"] == pytest.approx(manual_rmse, rel=1e-5)
    assert f"best epoch {summary['best_epoch']}" in stdout
    assert "best.pt" in stdout
    # the model is the one asked for
    assert Predictor(out / "best.pt", device="cpu").model.config.variant == "vanilla"


def test_train_on_sdf_works_or_fails_with_a_clear_split_error(workdir):
    out = workdir / "sdf"
    code, stdout, stderr = run_cli(["train", example_sdf_path(), "--targets", SDF_TARGET, "--out", out, "--model", "vanilla",
                                 "--epochs", "2", "--device", "cpu", "--no-progress"])
    if code == 0:
        assert (out / "best.pt").is_file()
        summary = json.loads((out / "metrics.json").read_text())
        assert sum(summary["sizes"].values()) == 8
        assert "test (" in stdout
        assert Predictor(out / "best.pt", device="cpu").target_names == [SDF_TARGET]
    else:
        _assert_user_error(code, stdout, stderr, "split")


# --------------------------------------------------------------------------------------------
# predict and evaluate
# --------------------------------------------------------------------------------------------
def test_predict_smiles_arguments(trained_run):
    out, _ = trained_run
    smiles = ["CCO", "C1CC(", "c1ccccc1O"]
    code, stdout, stderr = run_cli(["predict", "CCO", "C1CC(", "c1ccccc1O", "--checkpoint", out / "best.pt", "--device", "cpu"])
    assert code == 0, stderr
    lines = stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["smiles", "canonical_smiles", "expt_pred"] and lines[0].split()[-2:] == ["error", "warning"]
    rows = lines[1:]
    assert len(rows) == 3
    assert [row.split()[0] for row in rows] == smiles
    assert [rows[0].split()[1], rows[2].split()[1]] == ["CCO", "Oc1ccccc1"]  # RDKit's canonical SMILES beside the input
    expected = Predictor(out / "best.pt", device="cpu").predict(smiles)
    assert float(rows[0].split()[2]) == pytest.approx(expected.loc[0, "expt_pred"], abs=1e-5)
    assert float(rows[2].split()[2]) == pytest.approx(expected.loc[2, "expt_pred"], abs=1e-5)
    assert "NaN" in rows[1].split() and "syntax" in rows[1]


def test_predict_input_csv_to_output_csv(trained_run, workdir):
    out, _ = trained_run
    inputs = pd.DataFrame({"name": ["a", "b", "c", "d", "e"], "SMI": ["CCO", "", "C(C)(C)(C)(C)C", "CCCCCC", "c1ccccc1O"]})
    src, dst = workdir / "to_predict.csv", workdir / "sub" / "predicted.csv"
    inputs.to_csv(src, index=False)
    code, stdout, stderr = run_cli(["predict", "--checkpoint", out / "best.pt", "--input", src, "--smiles-col", "SMI",
                                 "--output", dst, "--device", "cpu"])
    assert code == 0, stderr
    assert "wrote 5 predictions (2 invalid, 0 outside the training domain)" in stdout
    table = pd.read_csv(dst)  # missing values (NaN predictions, no error, empty SMILES) are blank cells
    assert list(table.columns) == ["smiles", "canonical_smiles", "expt_pred", "error", "warning"]
    assert list(table["smiles"].fillna("")) == list(inputs["SMI"])
    expected = Predictor(out / "best.pt", device="cpu").predict(list(inputs["SMI"]))
    np.testing.assert_allclose(table["expt_pred"].to_numpy(dtype=float), expected["expt_pred"].to_numpy(dtype=float), atol=1e-6)
    assert table.loc[[1, 2], "expt_pred"].isna().all() and table.loc[[0, 3, 4], "expt_pred"].notna().all()
    assert (table.loc[[1, 2], "error"].str.len() > 0).all() and table.loc[[0, 3, 4], "error"].isna().all()


def test_evaluate_prints_json_metrics(trained_run, workdir):
    out, _ = trained_run
    frame = freesolv_rows(40, 52)[["smiles", "expt"]]
    frame = pd.concat([frame, pd.DataFrame({"smiles": ["C1CC("], "expt": [1.0]})], ignore_index=True)
    path = workdir / "eval.csv"
    frame.to_csv(path, index=False)
    code, stdout, stderr = run_cli(["evaluate", path, "--checkpoint", out / "best.pt", "--device", "cpu"])
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report["molecules"] == 12 and report["invalid"] == 1
    predicted = Predictor(out / "best.pt", device="cpu").predict(list(frame["smiles"][:12]))
    manual = regression_metrics(frame[["expt"]][:12].to_numpy(), predicted[["expt_pred"]].to_numpy(dtype=float))
    for key in ("rmse", "mae", "r2"):
        assert report[key] == pytest.approx(manual[key], rel=1e-5)
    rmse = float(np.sqrt(np.mean((frame["expt"][:12].to_numpy() - predicted["expt_pred"].to_numpy()) ** 2)))
    assert report["rmse"] == pytest.approx(rmse, rel=1e-5)


def test_info_in_process():
    code, stdout, _ = run_cli(["info"])
    assert code == 0
    keys = {line.split("  ")[0].strip() for line in stdout.splitlines()}
    assert {"python", "torch", "dgl", "dgllife", "ogb", "rdkit", "cuda (torch)", "cuda (dgl)"} <= keys
    torch_line = next(line for line in stdout.splitlines() if line.startswith("torch "))
    assert torch.__version__ in torch_line


@pytest.mark.parametrize("command", ["train", "predict", "evaluate", "presets", "info", "demo"])
def test_help_for_every_subcommand(command):
    code, stdout, _ = run_cli([command, "--help"])
    assert code == 0
    assert stdout.startswith("usage: dgl-graphtx " + command)
    assert "--help" in stdout


def test_top_level_help_lists_subcommands():
    code, stdout, _ = run_cli(["--help"])
    assert code == 0
    for command in ("train", "predict", "evaluate", "presets", "info", "demo"):
        assert command in stdout
    assert {a.dest for a in build_parser()._actions} >= {"command"}


# --------------------------------------------------------------------------------------------
# user mistakes: one "error:" line, no traceback, exit status 2
# --------------------------------------------------------------------------------------------
def test_error_missing_data_file(workdir):
    _assert_user_error(*run_cli(["train", workdir / "nope.csv", "--targets", "expt", "--out", workdir / "x"]), "not found", "nope.csv")


def test_error_unknown_target_column(data_csv, workdir):
    _assert_user_error(*run_cli(["train", data_csv, "--targets", "expt,logP", "--out", workdir / "x", "--no-progress"]), "logP")
    _assert_user_error(*run_cli(["train", data_csv, "--targets", "expt", "--smiles-col", "SMILES", "--out", workdir / "x",
                              "--no-progress"]), "SMILES")
    assert not (workdir / "x" / "best.pt").exists()


def test_error_missing_checkpoint(workdir):
    _assert_user_error(*run_cli(["predict", "CCO", "--checkpoint", workdir / "missing.pt"]), "missing.pt")
    _assert_user_error(*run_cli(["evaluate", workdir / "missing.csv", "--checkpoint", workdir / "missing.pt"]), "missing.pt")


def test_error_corrupt_checkpoint(workdir, trained_run):
    out, _ = trained_run
    garbage = workdir / "garbage.pt"
    garbage.write_bytes(np.random.default_rng(1).bytes(1000))
    _assert_user_error(*run_cli(["predict", "CCO", "--checkpoint", garbage]), "garbage.pt")
    truncated = workdir / "truncated.pt"
    raw = (out / "best.pt").read_bytes()
    truncated.write_bytes(raw[: len(raw) // 3])
    _assert_user_error(*run_cli(["predict", "CCO", "--checkpoint", truncated]), "truncated.pt")


def test_error_neither_or_both_smiles_and_input(trained_run, data_csv):
    out, _ = trained_run
    _assert_user_error(*run_cli(["predict", "--checkpoint", out / "best.pt"]), "--input")
    _assert_user_error(*run_cli(["predict", "CCO", "--input", data_csv, "--checkpoint", out / "best.pt"]), "--input")


def test_error_bad_input_csv_for_predict_and_evaluate(trained_run, data_csv, workdir):
    out, _ = trained_run
    _assert_user_error(*run_cli(["predict", "--input", workdir / "absent.csv", "--checkpoint", out / "best.pt"]), "absent.csv")
    _assert_user_error(*run_cli(["predict", "--input", data_csv, "--smiles-col", "SMI", "--checkpoint", out / "best.pt"]), "SMI")
    no_target = workdir / "no_target.csv"
    pd.DataFrame({"smiles": ["CCO"], "logP": [0.1]}).to_csv(no_target, index=False)
    _assert_user_error(*run_cli(["evaluate", no_target, "--checkpoint", out / "best.pt"]), "expt")


def test_error_invalid_training_settings(data_csv, workdir):
    _assert_user_error(*run_cli(["train", data_csv, "--targets", "expt", "--out", workdir / "x", "--epochs", "0",
                              "--no-progress"]))
    if not torch.cuda.is_available():
        _assert_user_error(*run_cli(["train", data_csv, "--targets", "expt", "--out", workdir / "x", "--device", "cuda",
                                  "--no-progress", "--epochs", "1"]), "cuda")


@pytest.mark.parametrize("command", ["train", "predict"])
def test_error_empty_csv(command, trained_run, workdir):
    out, _ = trained_run
    empty = workdir / "empty.csv"
    empty.write_text("")
    if command == "train":
        argv = ["train", empty, "--targets", "expt", "--out", workdir / "x", "--no-progress"]
    else:
        argv = ["predict", "--input", empty, "--checkpoint", out / "best.pt"]
    try:
        result = run_cli(argv)
    except Exception as err:  # what a user would see as a traceback
        pytest.fail(f"{type(err).__name__} escaped main(): {err}")
    _assert_user_error(*result)


def test_argparse_mistakes_exit_with_status_2():
    code, _, err = run_cli(["train"])
    assert code == 2 and "required" in err
    code, _, err = run_cli(["frobnicate"])
    assert code == 2


# --------------------------------------------------------------------------------------------
# the real console script
# --------------------------------------------------------------------------------------------
def _script(*args):
    env = dict(os.environ, OUTDATED_IGNORE="1", DGLBACKEND="pytorch", OMP_NUM_THREADS="1")
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=120, env=env)


def test_console_script_info():
    assert SCRIPT.is_file()
    proc = _script("info")
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(None, 1) for line in proc.stdout.splitlines() if line.strip() and not line.startswith("cuda"))
    for key in ("python", "torch", "dgl", "dgllife", "ogb", "rdkit"):
        assert key in lines and lines[key].strip(), key
    assert lines["python"].strip() == ".".join(map(str, sys.version_info[:3]))
    cuda = [line for line in proc.stdout.splitlines() if line.startswith("cuda")]
    assert len(cuda) == 2
    assert "Traceback" not in proc.stderr


def test_console_script_error(workdir):
    proc = _script("predict", "CCO", "--checkpoint", workdir / "no_such_checkpoint.pt")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "no_such_checkpoint.pt" in lines[0], proc.stderr
