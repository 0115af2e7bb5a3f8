"""The suite's report (benchmarks/suite/report.py) on small hand-worked cases."""
from __future__ import annotations

import doctest
import json

import pandas as pd
import pytest

from benchmarks.suite import metrics, report, runner, splits, tools
from benchmarks.suite.config import TOOLS_BY_NAME


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


def _row(store, name, seed, tool, value, metric="rmse", cliff=None, settings=None):
    spec = report.SETS_BY_NAME[name]
    store.record({"set": name, "half": spec.half, "seed": seed, "tool": tool, "key": f"{name}{seed}{tool}", "metric": metric,
                  "value": value, "cliff_rmse": cliff, "cpu_s": 10.0, "wall_s": 12.0, "epochs": 50,
                  "settings": json.dumps(TOOLS_BY_NAME[tool].settings if settings is None else settings)})


def test_report_tables_from_the_ledger(tmp_path):
    store = runner.Store(tmp_path, tmp_path / "cache")
    for seed, (ours, rf) in enumerate([(0.9, 1.0), (1.1, 1.2)]):
        _row(store, "FreeSolv", seed, "default", ours)
        _row(store, "FreeSolv", seed, "RF-morgan", rf)
    _row(store, "BACE", 0, "default", 0.8, metric="rocauc")
    _row(store, "BACE", 0, "RF-morgan", 0.85, metric="rocauc")
    text = report.markdown(report.load_results(store))
    assert "| tool | FreeSolv (rmse) | BACE (rocauc) | mean rank | CPU-s per run |" in text
    assert "| default | **1.000 ± 0.141** | 0.800 | 1.50 | 10 |" in text  # rank 1 on FreeSolv, 2 on BACE
    assert "| RF-morgan | 1.100 ± 0.141 | **0.850** | 1.50 | 10 |" in text
    assert "Test half" not in text and "MoleculeACE" not in text  # no rows there yet


def test_moleculeace_summary_beside_the_published_table(tmp_path):
    store = runner.Store(tmp_path, tmp_path / "cache")
    _row(store, "CHEMBL1862_Ki", 42, "default", 0.5, cliff=0.7)
    _row(store, "CHEMBL1862_Ki", 117, "default", 0.7, cliff=0.9)
    _row(store, "CHEMBL2034_Ki", 42, "default", 2.0, cliff=2.0)
    published = pd.DataFrame([{"model": m, "seed": 42, "set": s, "rmse": v, "noncliff_rmse": v, "cliff_rmse": v + 0.1}
                              for m, s, v in [("chemprop", "CHEMBL1862_Ki", 0.8), ("chemprop", "CHEMBL2034_Ki", 1.0),
                                              ("CheMeleon", "CHEMBL1862_Ki", 0.4), ("CheMeleon", "CHEMBL2034_Ki", 0.6)]])
    lines = report.moleculeace_summary(report.load_results(store), published)
    # ours: per set means 0.6 and 2.0 -> 1.3; cliffs 0.8 and 2.0 -> 1.4; better than chemprop on the first set only
    assert "| default (in-run) | 1.300 (1.400), 2 sets | - | 42, 117 | 1 of 2 |" in lines
    assert "| CheMeleon (published) | 0.500 (0.600), 2 sets | - | 42 | 2 of 2 |" in lines
    assert not any("minimol" in line for line in lines)  # no published rows for it here
def test_figure_points_are_improvements_over_chemprop_on_the_same_split(tmp_path):
    from benchmarks.suite import figure

    frame = pd.DataFrame([
        {"half": "dev", "set": "x", "seed": 0, "tool": "chemprop", "metric": "rmse", "value": 2.0},
        {"half": "dev", "set": "x", "seed": 0, "tool": "default", "metric": "rmse", "value": 1.5},
        {"half": "dev", "set": "x", "seed": 1, "tool": "default", "metric": "rmse", "value": 1.0},  # no chemprop on seed 1
    ])
    points = figure.improvements(frame)
    assert points[["seed", "tool", "improvement"]].values.tolist() == [[0, "default", 0.25]]
    assert figure.draw(frame, tmp_path / "suite.png").stat().st_size > 0


def test_rows_of_changed_or_retired_tools_are_left_out_of_the_report(tmp_path):
    store = runner.Store(tmp_path, tmp_path / "cache")
    _row(store, "FreeSolv", 0, "default", 1.0)
    _row(store, "FreeSolv", 0, "RF-morgan", 1.5)
    _row(store, "FreeSolv", 0, "descriptors", 0.8, settings={"args": ["--features-generators", "an-older-generator"]})
    store.record({"set": "FreeSolv", "half": "dev", "seed": 0, "tool": "screen-atoms", "key": "x", "metric": "rmse", "value": 0.5,
                  "settings": "{}"})
    assert sorted(report.load_results(store).tool) == ["RF-morgan", "default"]


def test_relative_errors_against_the_default_by_hand():
    # FreeSolv RMSE default 2.0, descriptors 1.5 (0.75); BACE ROC-AUC default 0.8 (error 0.2), descriptors
    # 0.75 (error 0.25: 1.25); mean 1.0, better in 1 of 2. The forest is not one of our recipes.
    rows = [("FreeSolv", "rmse", "default", 2.0), ("FreeSolv", "rmse", "descriptors", 1.5), ("FreeSolv", "rmse", "RF-morgan", 1.0),
            ("BACE", "rocauc", "default", 0.8), ("BACE", "rocauc", "descriptors", 0.75), ("BACE", "rocauc", "RF-morgan", 0.9)]
    frame = pd.DataFrame([{"set": s, "seed": 0, "metric": m, "tool": t, "value": v} for s, m, t, v in rows])
    table = report.relative_errors(frame)
    assert table.to_dict("records") == [{"tool": "descriptors", "relative error": pytest.approx(1.0), "pairs": 2, "better": 1}]


def test_readme_only_writes_the_readme_table_and_leaves_the_docs_section(tmp_path, monkeypatch):
    """``--report --readme-only``: while the tools of docs/benchmarks.md rerun into a new ledger, the
    README's table of the test halves is written from it alone; the docs section is not touched."""
    import benchmarks.common.report as common
    store = runner.Store(tmp_path, tmp_path / "cache")
    _row(store, "Solubility", 0, "default", 0.8)
    _row(store, "Solubility", 0, "RF-morgan", 1.3)
    _row(store, "FreeSolv", 0, "default", 0.9)
    written = {}
    monkeypatch.setattr(common, "update_section", lambda name, text, path=None: written.setdefault(name, text) and path)
    assert report.write_report(store, docs=True, readme_only=True) == 0
    assert list(written) == ["suite-test"] and "| Solubility (rmse) | **0.800** | - | - | 1.300 | - |" in written["suite-test"]
    assert "FreeSolv" not in written["suite-test"]
    written.clear()
    assert report.write_report(store, docs=True) == 0  # the whole report: both
    assert sorted(written) == ["suite", "suite-test"]


def test_readme_table_holds_the_test_halves_only():
    rows = [{"set": s, "half": h, "family": f, "seed": 0, "tool": t, "metric": m, "value": v}
            for s, h, f, m, t, v in [("Solubility", "test", "transfer", "rmse", "default", 1.0),
                                     ("Solubility", "test", "transfer", "rmse", "RF-morgan", 1.5),
                                     ("FreeSolv", "dev", "transfer", "rmse", "default", 9.0),
                                     ("CHEMBL1871_Ki", "test", "moleculeace", "rmse", "default", 0.7),
                                     ("CHEMBL2047_EC50", "test", "moleculeace", "rmse", "default", 0.9)]]
    text = report.readme_markdown(pd.DataFrame(rows))
    assert "FreeSolv" not in text and "| Solubility (rmse) | **1.000** | - | - | 1.500 | - |" in text
    assert "| MoleculeACE test half, mean of 15 (rmse) | 0.800 (2 sets, 1 seed) | - | - | - | - |" in text


def test_seeds_beyond_a_sets_own_stay_out_of_the_tables_and_make_the_seed_check(tmp_path):
    """The goal's pairs at 10 seeds (``--seed-check``): rows of seeds 3-9 are left out of the tables
    (which hold the sets' own 3 seeds for every tool) and appear in their own block, by hand: HIV
    ROC-AUC default 0.70, 0.80, 0.90, 0.75; forest 0.60, 0.90, 0.70, 0.75; chemprop 0.5 each. Against
    the forest the per-seed differences are +0.10, -0.10, +0.20, 0.00: mean +0.050, sd 0.129, t(0.975,
    3 df) 3.182, half-width 0.205; ahead at 2 of 4 seeds. Against chemprop +0.20, +0.30, +0.40, +0.25:
    mean +0.2875, sd 0.0854, half-width 0.136."""
    store = runner.Store(tmp_path, tmp_path / "cache")
    for seed, (ours, rf) in enumerate([(0.70, 0.60), (0.80, 0.90), (0.90, 0.70), (0.75, 0.75)]):
        for tool, value in (("default", ours), ("RF-morgan", rf), ("chemprop", 0.5)):
            _row(store, "HIV", seed, tool, value, metric="rocauc")
    tables = report.load_results(store)
    assert sorted(tables.seed.unique()) == [0, 1, 2]
    assert report.seed_check_markdown(tables) == []  # nothing beyond the sets' own seeds
    every = report.load_results(store, own_seeds=False)
    text = "\n".join(report.seed_check_markdown(every))
    assert ("| HIV (rocauc) | 4 | 0.787 | 0.738 | 0.500 | ahead at 2 of 4; +0.050 (-0.155 to +0.255) | "
            "ahead at 4 of 4; +0.287 (+0.152 to +0.423) |") in text
    assert "| default | **0.800 ± 0.100** |" in report.markdown(tables, every)  # the table: seeds 0-2 only
    assert "The goal's pairs at 10 seeds" in report.markdown(tables, every)


def test_seed_check_selects_the_goals_sets_tools_and_ten_seeds():
    from benchmarks.suite.__main__ import _selected, parse_args
    sets, seeds, tools = _selected(parse_args(["--seed-check"]))
    assert [s.name for s in sets] == ["Solubility", "ClinTox", "AqSolDB", "HIV"] and all(s.half == "test" for s in sets)
    assert seeds == list(range(10)) and [t.name for t in tools] == ["default", "RF-morgan", "chemprop"]
