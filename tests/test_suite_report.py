"""The transfer suite's report (benchmarks/_suite/report.py) on small hand-worked cases."""
from __future__ import annotations

import doctest
import json

import numpy as np
import pandas as pd
import pytest

import suite_helpers  # noqa: F401  (puts benchmarks/ on sys.path)
from _suite import metrics, report, runner, splits, tools


@pytest.mark.parametrize("module", [metrics, report, runner, splits, tools])
def test_docstring_examples(module):
    assert doctest.testmod(module).failed == 0


def test_ranks_average_ties_and_follow_the_metric_direction():
    means = pd.DataFrame({"a": [0.5, 0.70], "b": [0.7, 0.90], "c": [0.5, 0.80]}, index=["rmse_set", "auc_set"])
    rank = report.ranks(means, {"rmse_set": True, "auc_set": False})
    # rmse: a and c tie for first (1.5 each), b third; ROC-AUC: b 0.9 first, c second, a third
    assert rank.loc["rmse_set"].tolist() == [1.5, 3.0, 1.5]
    assert rank.loc["auc_set"].tolist() == [3.0, 1.0, 2.0]
    assert rank.mean().round(2).tolist() == [2.25, 2.0, 1.75]


def test_wins_losses_skip_sets_a_tool_did_not_run():
    means = pd.DataFrame({"a": [1.0, 0.8, np.nan], "b": [1.2, 0.9, 0.5]}, index=["x", "y", "z"])
    assert report.wins_losses(means, {"x": True, "y": False, "z": True}, "a", "b") == (1, 1, 0)


def test_wilcoxon_matches_the_hand_worked_exact_p_value():
    # B's RMSE 2.0 on every seed, A's 1.8, 1.6, 2.6, 1.2, 1.0: relative improvements 0.1, 0.2, -0.3,
    # 0.4, 0.5; |d| ranks 1..5 and W- = 3. The subsets of {1..5} summing to at most 3 are {}, {1},
    # {2}, {3}, {1, 2}: exact two-sided p = 2 * 5 / 32 = 0.3125.
    rows = []
    for seed, a in enumerate([1.8, 1.6, 2.6, 1.2, 1.0]):
        rows += [{"set": "s", "seed": seed, "tool": "A", "metric": "rmse", "value": a},
                 {"set": "s", "seed": seed, "tool": "B", "metric": "rmse", "value": 2.0}]
    test = report.paired_test(pd.DataFrame(rows), "A", "B")
    assert test["n"] == 5 and test["wins"] == 4 and test["median"] == pytest.approx(0.2)
    assert test["p"] == pytest.approx(0.3125)


def _result(folder, name, seed, tool, value, half="dev", metric="rmse"):
    path = folder / "runs" / name / f"seed{seed}" / f"{tool}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"set": name, "half": half, "seed": seed, "tool": tool, "metric": metric,
                                "value": value, "cpu_s": 10.0, "wall_s": 12.0, "epochs": 50}))


def test_report_tables_from_stored_results(tmp_path):
    for seed, (ours, rf) in enumerate([(0.9, 1.0), (1.1, 1.2)]):
        _result(tmp_path, "FreeSolv", seed, "default", ours)
        _result(tmp_path, "FreeSolv", seed, "RF-morgan", rf)
    _result(tmp_path, "BACE", 0, "default", 0.8, metric="rocauc")
    _result(tmp_path, "BACE", 0, "RF-morgan", 0.85, metric="rocauc")
    text = report.markdown(report.load_results(tmp_path), tmp_path)
    assert "| FreeSolv (rmse, 2) | **1.000 ± 0.141** | 1.100 ± 0.141 |" in text
    assert "| BACE (rocauc, 1) | 0.800 | **0.850** |" in text
    assert "| default | 1.50 | 2 | 10 | 0.01 |" in text  # rank 1 on FreeSolv, 2 on BACE
    assert "| default |  | 1/1/0 |" in text
    assert "No results yet." in text  # the test half


def test_figure_points_are_improvements_over_chemprop_on_the_same_split(tmp_path):
    from _suite import figure

    frame = pd.DataFrame([
        {"half": "dev", "set": "x", "seed": 0, "tool": "chemprop", "metric": "rmse", "value": 2.0},
        {"half": "dev", "set": "x", "seed": 0, "tool": "default", "metric": "rmse", "value": 1.5},
        {"half": "dev", "set": "x", "seed": 1, "tool": "default", "metric": "rmse", "value": 1.0},  # no chemprop on seed 1
    ])
    points = figure.improvements(frame)
    assert points[["seed", "tool", "improvement"]].values.tolist() == [[0, "default", 0.25]]
    assert figure.draw(frame, tmp_path / "suite.png").stat().st_size > 0


def test_runs_of_changed_tools_are_left_out_of_the_report(tmp_path):
    from _suite.config import TOOLS_BY_NAME
    _result(tmp_path, "FreeSolv", 0, "default", 1.0)
    _result(tmp_path, "FreeSolv", 0, "RF-morgan", 1.5)
    stale = tmp_path / "runs" / "FreeSolv" / "seed0" / "pretrained.json"
    stale.write_text(json.dumps({"set": "FreeSolv", "half": "dev", "seed": 0, "tool": "pretrained", "metric": "rmse",
                                 "value": 0.5, "cpu_s": 1.0, "wall_s": 1.0, "epochs": 50,
                                 "settings": {"args": ["--from-pretrained", "an-older-backbone"]}}))
    current = dict(json.loads(stale.read_text()), tool="descriptors", value=0.8, settings=TOOLS_BY_NAME["descriptors"].settings)
    (stale.parent / "descriptors.json").write_text(json.dumps(current))
    frame = report.load_results(tmp_path)
    assert sorted(frame.tool) == ["RF-morgan", "default", "descriptors"]


def test_relative_errors_against_the_default_by_hand():
    # FreeSolv RMSE default 2.0, descriptors 1.5 (0.75); BACE ROC-AUC default 0.8 (error 0.2), descriptors
    # 0.75 (error 0.25: 1.25); mean 1.0, better in 1 of 2. The forest is not one of our recipes.
    rows = [("FreeSolv", "rmse", "default", 2.0), ("FreeSolv", "rmse", "descriptors", 1.5), ("FreeSolv", "rmse", "RF-morgan", 1.0),
            ("BACE", "rocauc", "default", 0.8), ("BACE", "rocauc", "descriptors", 0.75), ("BACE", "rocauc", "RF-morgan", 0.9)]
    frame = pd.DataFrame([{"set": s, "seed": 0, "metric": m, "tool": t, "value": v} for s, m, t, v in rows])
    table = report.relative_errors(frame)
    assert table.to_dict("records") == [{"tool": "descriptors", "relative error": pytest.approx(1.0), "pairs": 2, "better": 1}]


def test_readme_tables_hold_the_test_half_only_with_the_quantum_set_apart():
    rows = [{"set": s, "half": h, "seed": 0, "tool": t, "metric": m, "value": v}
            for s, h, m, t, v in [("Solubility", "test", "rmse", "default", 1.0), ("Solubility", "test", "rmse", "RF-morgan", 1.5),
                                  ("FreeSolv", "dev", "rmse", "default", 9.0),
                                  ("QM9-U0-heldout", "test", "mae", "moire-3d", 3.0), ("QM9-U0-heldout", "test", "mae", "RF-coulomb", 16.0)]]
    tables = report.readme_markdown(pd.DataFrame(rows)).split("\n\n")
    assert len(tables) == 2 and "FreeSolv" not in tables[0] + tables[1]
    assert "| Solubility (rmse) | **1.000 (1 seed)** |" in tables[0] and "1.500 (1 seed)" in tables[0]
    assert tables[1].splitlines()[0].startswith("| set (metric) | moire-3d") and "**3.000 (1 seed)**" in tables[1]
