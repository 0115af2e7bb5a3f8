"""Cross-validation from the command line and from Python: each fold tests once, validation and
calibration come from the other folds (groups whole), every molecule's out-of-fold prediction is
written and scored by ``evaluate``, and ``predict`` on the folder gives CV+ intervals."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from cli_runner import assert_one_error_line, run_cli
from dgl_graphtx.datasets import MoleculeDataset, cv_splits, freesolv, murcko_scaffold
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import cross_validate
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import cv_plus_intervals

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
    for k in range(4):  # validation comes from the other folds, whole series
        split = json.loads((out / f"fold_{k}" / "metrics.json").read_text())["sizes"]
        assert split["test"] == 6 and split["valid"] == 6 and split["train"] == 12
    # every molecule's out-of-fold prediction, with its fold; evaluate scores the file as it is
    oof = pd.read_csv(out / "oof_predictions.csv")
    assert oof["row"].tolist() == list(range(len(frame))) and list(oof.columns[:3]) == ["row", "smiles", "fold"]
    for k in range(4):
        fold = pd.read_csv(out / f"fold_{k}" / "test_predictions.csv")
        assert sorted(oof.loc[oof["fold"] == k, "row"]) == sorted(fold["row"])
    code, stdout, err = run_cli(["evaluate", out / "oof_predictions.csv"])
    assert code == 0, err
    scored = json.loads(stdout)
    assert scored["task"] == "regression" and scored["molecules"] == 24 and scored["targets"] == ["expt", "expt2"]
    errors = oof["expt"] - oof["expt_pred"]
    assert scored["per_target"]["expt"]["rmse"] == pytest.approx(float(np.sqrt((errors ** 2).mean())), rel=1e-6)
    assert [f["fold"] for f in scored["folds"]] == [0, 1, 2, 3]
    assert scored["folds"][0]["per_target"]["expt"]["rmse"] == pytest.approx(folds[0], rel=1e-5)


def test_cv_in_python_with_scaffold_folds():
    p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
    ds = MoleculeDataset.from_dataframe(freesolv()[:30], target_cols=["expt"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    result = cross_validate(ds, p, TrainConfig(epochs=1, progress=False, metrics=("mae",)), folds=3, kind="scaffold")
    assert sorted(i for run in result.folds for i in run.split.test) == list(range(30))
    assert list(result.summary["metric"]) == ["mae"]


def test_cv_refuses_a_predefined_split(tiny_csv, tmp_path):
    _, path = tiny_csv
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--cv", "3", "--split", "kennard_stone",
                                   "--out", tmp_path / "x", *SMALL]), "--cv 3")


def test_each_fold_trains_on_the_other_folds_less_their_validation_share():
    # 1,128 molecules, --cv 3: the test fold holds 376, validation 1/9 of the other 752 (84), and
    # 668 train (before: the next fold validated and one third trained, 376)
    splits = cv_splits("random", 3, seed=0, n=1128)
    for k, split in enumerate(splits):
        assert (len(split.train), len(split.valid), len(split.test)) == (668, 84, 376)
        others = set(range(1128)) - set(split.test)
        assert set(split.valid) <= others and set(split.train) == others - set(split.valid)
    assert sorted(i for s in splits for i in s.test) == list(range(1128))


def test_scaffold_folds_keep_scaffolds_whole_in_test_and_validation():
    smiles = freesolv()["smiles"][:200].tolist()
    scaffolds = [murcko_scaffold(s) for s in smiles]
    for split in cv_splits("scaffold", 4, seed=1, smiles=smiles):
        parts = [{scaffolds[i] for i in part} for part in split]
        assert not parts[0] & parts[1] and not parts[0] & parts[2] and not parts[1] & parts[2]
        assert split.valid and len(split.valid) < len(split.train)


def test_cv_with_uncertainty_gives_cv_plus_intervals_for_new_molecules(tiny_csv, tmp_path):
    frame, path = tiny_csv
    out = tmp_path / "cv"
    code, stdout, err = run_cli(["train", path, "--targets", "expt", "--cv", "3", "--uncertainty", "mve",
                                 "--calibration-share", "0.25", "--out", out, *SMALL])
    assert code == 0, err
    assert "CV+ intervals" in stdout
    oof = pd.read_csv(out / "oof_predictions.csv")
    assert {"expt_std", "expt_lo", "expt_hi"} <= set(oof.columns) and len(oof) == 24
    table = pd.read_csv(out / "cv_metrics.csv")
    assert {"coverage", "width"} <= set(table["metric"])
    for k in range(3):  # each fold calibrated on molecules of the other folds, not its validation part
        record = json.loads((out / f"fold_{k}" / "metrics.json").read_text())["uncertainty"]["calibrated_on"]
        assert record["count"] == 6 and not set(record["rows"]) & set(oof.loc[oof["fold"] == k, "row"])
    new = ["CCO", "c1ccccc1Cl", "CC(=O)OC"]
    code, _, err = run_cli(["predict", "--checkpoint", out, *new, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    # the naive CV+ interval: every molecule's out-of-fold score with every fold model's prediction
    folds = [Predictor(out / f"fold_{k}" / "best.pt").predict(new) for k in range(3)]
    means, stds = np.stack([f["expt_pred"] for f in folds]), np.stack([f["expt_std"] for f in folds])
    scores = (np.abs(oof["expt"] - oof["expt_pred"]) / oof["expt_std"]).to_numpy()
    n, k = len(scores), int(np.ceil(25 * 0.9))
    for m in range(len(new)):
        upper = sorted(means[f, m] + s * stds[f, m] for s, f in zip(scores, oof["fold"]))
        lower = sorted(means[f, m] - s * stds[f, m] for s, f in zip(scores, oof["fold"]))
        assert predicted["expt_hi"][m] == pytest.approx(upper[k - 1], rel=1e-5)
        assert predicted["expt_lo"][m] == pytest.approx(lower[n - k], rel=1e-5)
    assert predicted["expt_pred"].to_numpy() == pytest.approx(means.mean(0), rel=1e-5)
    lo, hi = cv_plus_intervals(means, scores, oof["fold"].to_numpy(), 0.9, stds)
    assert predicted["expt_lo"].to_numpy() == pytest.approx(lo, rel=1e-6)


def test_kmeans_folds_keep_clusters_whole():
    p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
    ds = MoleculeDataset.from_dataframe(freesolv()[:45], target_cols=["expt"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    result = cross_validate(ds, p, TrainConfig(epochs=1, progress=False), folds=3, kind="kmeans")
    assert sorted(result.oof_predictions["row"]) == list(range(45))


@pytest.fixture(scope="module")
def cv_with_intervals(tiny_csv, tmp_path_factory):
    _, path = tiny_csv
    out = tmp_path_factory.mktemp("cv-intervals") / "cv"
    code, _, err = run_cli(["train", path, "--targets", "expt", "--cv", "3", "--uncertainty", "mve",
                            "--calibration-share", "0.25", "--out", out, *SMALL])
    assert code == 0, err
    return out


def _edited_copy(cv, tmp_path, edit):
    """A copy of the cross-validation folder with ``edit(oof)`` written as its out-of-fold table,
    as by hand or by a version without records (the folder's record is left out)."""
    copy = tmp_path / "cv"
    shutil.copytree(cv, copy)
    (copy / "SHA256SUMS").unlink(missing_ok=True)
    oof = pd.read_csv(copy / "oof_predictions.csv")
    edited = edit(oof)
    if edited is None:
        (copy / "oof_predictions.csv").unlink()
    else:
        edited.to_csv(copy / "oof_predictions.csv", index=False)
    return copy


@pytest.mark.parametrize("edit, fragments", [
    (lambda oof: None, ["oof_predictions.csv is missing", "run the cross-validation again"]),
    (lambda oof: oof.drop(columns="fold"), ["lacks the column(s) ['fold']"]),
    (lambda oof: oof.assign(fold=oof["fold"].astype(object).where(oof.index != 3, None)), ["row 3 has fold nan, not one of 0..2"]),
    (lambda oof: oof.assign(expt_pred=oof["expt_pred"].astype(object).where(oof.index != 2, "abc")), ["oof_predictions.csv is damaged"]),
])
def test_a_cross_validation_without_a_usable_out_of_fold_table_is_one_line(cv_with_intervals, tmp_path, edit, fragments):
    """Without oof_predictions.csv a CV folder gave no intervals and no message; without its fold
    column a KeyError; a blank fold cell printed fold -9223372036854775808."""
    copy = _edited_copy(cv_with_intervals, tmp_path, edit)
    assert_one_error_line(run_cli(["predict", "--checkpoint", copy, "CCO", "c1ccccc1Cl"]), *fragments)


def test_a_folder_of_folds_without_its_report_is_refused(cv_with_intervals, tmp_path):
    """It was averaged as an ensemble, without its CV+ intervals and without a word."""
    copy = tmp_path / "cv"
    shutil.copytree(cv_with_intervals, copy)
    (copy / "SHA256SUMS").unlink(missing_ok=True)
    (copy / "cv_metrics.json").unlink()
    assert_one_error_line(run_cli(["predict", "--checkpoint", copy, "CCO"]), str(copy), "holds the folds", "no cv_metrics.json")


def test_too_few_out_of_fold_labels_for_the_coverage_are_said(cv_with_intervals, tmp_path, caplog):
    """Out-of-fold predictions cut to 5 rows gave unbounded intervals without a word."""
    import logging

    copy = _edited_copy(cv_with_intervals, tmp_path, lambda oof: oof.iloc[:5])
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        code, _, err = run_cli(["predict", "--checkpoint", copy, "CCO", "--output", tmp_path / "p.csv"])
    assert code == 0, err
    assert np.isinf(pd.read_csv(tmp_path / "p.csv")[["expt_lo", "expt_hi"]].to_numpy()).all()
    assert any("need at least 9 out-of-fold molecules with a label" in r.getMessage() and "has 5" in r.getMessage()
               for r in caplog.records)


def test_a_blank_group_is_refused_naming_its_row(tiny_csv, tmp_path):
    """The probe: blank --group-col cells made one group of every molecule without one (40 of 60
    molecules in one test fold), without a word."""
    frame, _ = tiny_csv
    path = tmp_path / "blank_groups.csv"
    frame.assign(series=[None if i % 3 == 0 else f"s{i % 4}" for i in range(len(frame))]).to_csv(path, index=False)
    assert_one_error_line(run_cli(["train", path, "--targets", "expt", "--cv", "3", "--group-col", "series", "--out",
                                   tmp_path / "cv", *SMALL]), "row 0 of", "group column 'series' is blank",
                          f"{len(range(0, len(frame), 3))} rows in all")


def test_a_metric_undefined_on_some_folds_says_over_how_many_its_mean_is(tiny_csv, tmp_path):
    """The probe: "rocauc 0.7368 +/- 0.0000" came from 1 of 3 folds (the others' test parts had one
    class), without a word."""
    frame, _ = tiny_csv
    path = tmp_path / "rare.csv"
    frame.assign(active=[1 if i in (0, 3) else 0 for i in range(len(frame))]).to_csv(path, index=False)
    out = tmp_path / "cv"
    code, stdout, err = run_cli(["train", path, "--targets", "active", "--task", "classification", "--cv", "3", "--out", out,
                                 "--kernel", "none", "--features-generators", "none", *SMALL])
    assert code == 0, err
    table = pd.read_csv(out / "cv_metrics.csv")
    rocauc = table[(table["target"] == "active") & (table["metric"] == "rocauc")].iloc[0]
    scored = sum(pd.notna(rocauc[f"fold_{k}"]) for k in range(3))
    assert 0 < scored < 3 and rocauc["folds"] == scored  # rows 0 and 3 in one or two test folds
    assert f"rocauc {rocauc['mean']:.4f} +/- {rocauc['std']:.4f} ({scored} of 3 folds)" in stdout
    assert json.loads((out / "cv_metrics.json").read_text())["targets"]["active"]["rocauc"]["folds"] == scored
