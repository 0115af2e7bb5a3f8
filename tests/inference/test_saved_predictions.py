"""``evaluate`` of a saved table of predictions (no checkpoint), tried as a careless user would:
predictions that are not numbers or not finite, a ``--task`` the table does not hold, an empty
file, intervals with ``lo > hi`` or unbounded ones, a blank fold. Every metric is checked against
numpy on the rows that should count; what was left out is said in ``notes``."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cli_runner import assert_one_error_line, run_cli_without_runtime_warnings as run_cli

LABELS = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
PREDICTED = LABELS + np.array([0.5, -0.5, 1.0, 0.0, -1.0, 2.0, 0.5, -0.5, 0.0, 1.5])


def _rmse(labels, predicted):
    return float(np.sqrt(np.mean((labels - predicted) ** 2)))


def _evaluate(table: pd.DataFrame, path, *more):
    table.to_csv(path, index=False)
    code, out, err = run_cli(["evaluate", path, *more])
    assert code == 0, err
    return json.loads(out)


@pytest.fixture()
def table():
    return pd.DataFrame({"smiles": [f"C{'C' * i}O" for i in range(10)], "y": LABELS, "y_pred": PREDICTED})


@pytest.mark.parametrize("bad", ["nan", "inf", "1e308"])
def test_predictions_that_are_not_finite_numbers_are_left_out_and_counted(table, tmp_path, bad):
    """One NaN or 1e308 prediction made every metric null, with notes: []."""
    report = _evaluate(table.astype({"y_pred": object}).assign(y_pred=[bad, *PREDICTED[1:3], bad, *PREDICTED[4:]]), tmp_path / "t.csv")
    keep = np.ones(10, bool)
    keep[[0, 3]] = False
    assert report["rmse"] == pytest.approx(_rmse(LABELS[keep], PREDICTED[keep]))
    assert report["per_target"]["y"]["mae"] == pytest.approx(float(np.mean(np.abs(LABELS[keep] - PREDICTED[keep]))))
    assert report["notes"] == ["target 'y': 2 prediction(s) not a finite number (NaN, infinite or beyond float32's range) "
                               "left out of the metrics (first: row 0)"]


def test_a_text_cell_is_named_by_its_row_and_left_out(table, tmp_path):
    """A text prediction raised ValueError (inference/evaluation.py:116)."""
    report = _evaluate(table.astype({"y_pred": object}).assign(y_pred=[*PREDICTED[:4], "n/a?", *PREDICTED[5:]]), tmp_path / "t.csv")
    keep = np.arange(10) != 4
    assert report["rmse"] == pytest.approx(_rmse(LABELS[keep], PREDICTED[keep]))
    assert any("column 'y_pred': 1 cell(s) not a number" in note and "row 4 CCCCCO: 'n/a?'" in note for note in report["notes"])


@pytest.mark.parametrize("task, fragment", [("multiclass", "--task multiclass needs class probabilities"),
                                            ("classification", "--task classification needs 0/1 labels")])
def test_a_task_the_table_does_not_hold_is_one_line(table, tmp_path, task, fragment):
    """--task multiclass on a regression table raised KeyError (training/outputs.py:77)."""
    table.to_csv(tmp_path / "t.csv", index=False)
    assert_one_error_line(run_cli(["evaluate", tmp_path / "t.csv", "--task", task]), fragment, str(tmp_path / "t.csv"))


def test_an_empty_file_is_one_line_naming_it(tmp_path):
    """EmptyDataError (inference/table_output.py:82); with --checkpoint the reader already said it."""
    (tmp_path / "t.csv").write_text("")
    assert_one_error_line(run_cli(["evaluate", tmp_path / "t.csv"]), str(tmp_path / "t.csv"), "not a readable table")


def test_intervals_with_lo_above_hi_are_left_out_and_unbounded_ones_said(table, tmp_path):
    """A table with lo > hi reported width -2.0."""
    lo, hi = PREDICTED - 1.0, PREDICTED + 1.0
    lo[2], hi[2] = hi[2], lo[2]  # inverted
    lo[5], hi[5] = -np.inf, np.inf  # unbounded
    report = _evaluate(table.assign(y_lo=lo, y_hi=hi), tmp_path / "t.csv")
    keep = np.arange(10) != 2
    inside = (LABELS >= lo) & (LABELS <= hi)
    assert report["intervals"]["y"]["coverage"] == pytest.approx(float(inside[keep].mean()))
    assert report["intervals"]["y"]["width"] is None  # one unbounded interval: undefined, and said
    notes = " | ".join(report["notes"])
    assert "1 interval(s) with y_lo above y_hi (first: row 2)" in notes and "1 interval(s) are unbounded" in notes
    bounded = table.assign(y_lo=np.where(np.isinf(lo), PREDICTED - 1, lo), y_hi=np.where(np.isinf(hi), PREDICTED + 1, hi))
    width = _evaluate(bounded, tmp_path / "b.csv")["intervals"]["y"]["width"]
    assert width == pytest.approx(2.0) and width > 0


def test_a_blank_bound_or_a_bound_without_the_other_is_said(table, tmp_path):
    """A blank bound left its row out of coverage and width, and a lone y_lo left the intervals out, without a note."""
    lo, hi = PREDICTED - 1.0, PREDICTED + 1.0
    lo[3] = np.nan
    report = _evaluate(table.assign(y_lo=lo, y_hi=hi), tmp_path / "t.csv")
    keep = np.arange(10) != 3
    assert report["intervals"]["y"]["coverage"] == pytest.approx(float(((LABELS >= lo) & (LABELS <= hi))[keep].mean()))
    assert report["notes"] == ["target 'y': 1 labelled row(s) with a blank y_lo or y_hi (first: row 3) left out of coverage and width"]
    alone = _evaluate(table.assign(y_lo=PREDICTED - 1.0), tmp_path / "a.csv")
    assert "intervals" not in alone
    assert alone["notes"] == ["target 'y': the table has y_lo without its other bound, so no interval is scored"]


def test_a_blank_fold_is_left_out_of_the_per_fold_scores(table, tmp_path):
    folds = [0, 0, 0, 1, 1, 1, None, 2, 2, 2]
    report = _evaluate(table.assign(fold=folds), tmp_path / "t.csv")
    assert [f["fold"] for f in report["folds"]] == [0, 1, 2] and [f["molecules"] for f in report["folds"]] == [3, 3, 3]
    assert report["folds"][1]["rmse"] == pytest.approx(_rmse(LABELS[3:6], PREDICTED[3:6]))
    assert any("1 row(s) without a whole fold number (first: row 6)" in note for note in report["notes"])
    assert report["rmse"] == pytest.approx(_rmse(LABELS, PREDICTED))  # the row still counts overall
