"""Cross-validation from the command line and from Python."""
import json

import pandas as pd
import pytest

from cli_runner import assert_one_error_line, run_cli
from dgl_graphtx.datasets import MoleculeDataset, freesolv
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import cross_validate
from dgl_graphtx.training import TrainConfig

SMALL = ["--model", "vanilla", "--epochs", "1", "--batch-size", "8", "--device", "cpu", "--no-progress",
         "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory):
    frame = freesolv()[:24].copy()
    frame["expt2"] = frame["expt"] * 2
    frame["series"] = [f"s{i % 4}" for i in range(len(frame))]
    path = tmp_path_factory.mktemp("cv") / "tiny.csv"
    frame.to_csv(path, index=False)
    return frame, path


def test_cv_by_group_column_end_to_end(tiny_csv, tmp_path):
    frame, path = tiny_csv
    out = tmp_path / "cv"
    code, stdout, stderr = run_cli(["train", path, "--targets", "expt,expt2", "--cv", "4", "--group-col", "series",
                                    "--out", out, *SMALL])
    assert code == 0, stderr
    tested = pd.concat([pd.read_csv(out / f"fold_{k}" / "test_predictions.csv") for k in range(4)])
    assert sorted(tested["row"]) == list(range(len(frame)))  # every molecule tested exactly once
    for k in range(4):  # each fold's test part is one whole series
        rows = pd.read_csv(out / f"fold_{k}" / "test_predictions.csv")["row"]
        assert frame["series"].iloc[rows].nunique() == 1
    table = pd.read_csv(out / "cv_metrics.csv")
    assert set(table["target"]) == {"all", "expt", "expt2"}
    rmse = table[(table["target"] == "expt") & (table["metric"] == "rmse")].iloc[0]
    folds = [rmse[f"fold_{k}"] for k in range(4)]
    assert rmse["mean"] == pytest.approx(sum(folds) / 4) and rmse["std"] == pytest.approx(pd.Series(folds).std(ddof=0))
    first = pd.read_csv(out / "fold_0" / "test_predictions.csv")
    assert folds[0] == pytest.approx(((first["expt"] - first["expt_pred"]) ** 2).mean() ** 0.5, rel=1e-5)
    report = json.loads((out / "cv_metrics.json").read_text())
    assert report["folds"] == 4 and report["kind"] == "group"
    assert report["targets"]["expt"]["rmse"]["mean"] == pytest.approx(rmse["mean"])
    assert "expt: rmse" in stdout and "+/-" in stdout


def test_cv_in_python_with_scaffold_folds():
    p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
    ds = MoleculeDataset.from_dataframe(freesolv()[:30], target_cols=["expt"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    result = cross_validate(ds, p, TrainConfig(epochs=1, progress=False, metrics=("mae",)), folds=3, kind="scaffold")
    assert sorted(i for run in result.folds for i in run.split.test) == list(range(30))
    assert list(result.summary["metric"]) == ["mae"]


def test_cv_refuses_a_predefined_split(tiny_csv, tmp_path):
    _, path = tiny_csv
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--cv", "3", "--split", "kmeans",
                                   "--out", tmp_path / "x", *SMALL]), "--cv 3")
