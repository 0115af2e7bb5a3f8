"""The transfer suite's runner (benchmarks/_suite/runner.py) with a stand-in tool: results are
cached by key, a changed setting reruns, a failed run leaves no result, and a molecule a tool did
not predict gets the training mean and is counted."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

import suite_helpers  # noqa: F401  (puts benchmarks/ on sys.path)
from _suite import runner, tools
from _suite.children import ChildFailed, Usage
from _suite.config import SETS_BY_NAME, ToolSpec
from _suite.sets import SetData
from _suite.splits import write_split_files

SMILES = ["CCO", "CCN", "CCC", "CCCl", "CCBr", "CC=O", "CC#N", "COC", "CNC", "CSC"] * 2  # a test part of 2


def _runs(tmp_path, tool):
    spec = dataclasses.replace(SETS_BY_NAME["FreeSolv"], epochs=1)
    files = write_split_files(spec, SetData(pd.DataFrame({"smiles": SMILES, "target": range(20)})), 0, tmp_path / "splits")
    return [runner.PlannedRun(spec, 0, tool, files, files.counts()["train"])]


def test_cached_results_changed_settings_and_missing_predictions(tmp_path, monkeypatch):
    calls = []

    def fake(tool, run):
        calls.append(tool.settings["answer"])
        table = pd.read_csv(run.files.csv)
        test = list(table.index[table["split"] == "test"])
        return tools.ToolOutput({test[0]: float(tool.settings["answer"])}, Usage(1.0, 2.0))  # the other test row missing

    monkeypatch.setitem(tools.DRIVERS, "fake", fake)
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    tool = ToolSpec("stand-in", "fake", {"answer": 5})
    assert runner.run_all(store, _runs(tmp_path, tool)) == 0
    assert runner.run_all(store, _runs(tmp_path, tool)) == 0 and calls == [5]  # cached
    result = store.finished(_runs(tmp_path, tool)[0])
    table = pd.read_csv(tmp_path / "splits" / "data.csv")
    train_mean = table.loc[table.split == "train", "target"].mean()
    predictions = pd.read_csv(store.result_path(_runs(tmp_path, tool)[0]).with_suffix(".predictions.csv"))
    assert result["missing_predictions"] == 1 and sorted(predictions.prediction) == sorted([5.0, train_mean])
    changed = ToolSpec("stand-in", "fake", {"answer": 6})
    assert runner.run_all(store, _runs(tmp_path, changed)) == 0 and calls == [5, 6]


def test_a_failed_run_stores_nothing_and_is_retried(tmp_path, monkeypatch):
    def failing(tool, run):
        (run.work / "partial.txt").write_text("left by an interrupted run")
        raise ChildFailed("exit status 1")

    monkeypatch.setitem(tools.DRIVERS, "failing", failing)
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    runs = _runs(tmp_path, ToolSpec("broken", "failing", {}))
    assert runner.run_all(store, runs) == 1 and store.finished(runs[0]) is None
    assert runner.run_all(store, runs) == 1  # tried again from an emptied working folder
    assert [p.name for p in store.work(runs[0]).iterdir()] == ["partial.txt"]


def test_screened_recipes_and_3d_tools_run_only_where_they_belong():
    sets = [SETS_BY_NAME[name] for name in ("FreeSolv", "QM9-U0", "Solubility", "QM9-U0-heldout")]
    screened = ToolSpec("screened", "ours", {"args": []}, development_only=True)
    three_d = ToolSpec("3d", "ours", {"args": []}, three_d_only=True)
    plain = ToolSpec("plain", "ours", {"args": []})
    assert [screened.runs_on(s) for s in sets] == [True, False, False, False]   # judged on the 2-D dev sets
    assert [three_d.runs_on(s) for s in sets] == [False, True, False, True]
    assert [plain.runs_on(s) for s in sets] == [True, True, True, True]
    # the suite's own screened fine-tuning recipes never reach the test half
    from _suite.config import TOOLS
    assert {t.name for t in TOOLS if t.development_only} >= {"pretrained", "pretrained-lr0.3"}
    assert not any(t.runs_on(s) for t in TOOLS if t.development_only for s in sets[1:])


def test_screen_candidates_fine_tune_their_own_backbone_on_the_development_half_only(tmp_path, monkeypatch):
    from _suite.config import FINE_TUNING, FINE_TUNED_RECIPE, SCREEN_CANDIDATES, TOOLS_BY_NAME
    screen = [TOOLS_BY_NAME[f"screen-{name}"] for name in SCREEN_CANDIDATES]
    assert all(t.development_only and not t.runs_on(SETS_BY_NAME["Solubility"]) for t in screen)
    monkeypatch.setattr(tools, "SCREEN_BACKBONES", tmp_path / "backbones")
    run = _runs(tmp_path, screen[0])[0]
    work = tmp_path / "work"
    work.mkdir()
    run_input = tools.RunInput(run.spec, run.seed, run.files, run.spec.epochs, work)
    with pytest.raises(FileNotFoundError, match="run benchmarks/pretrain_screen.py first"):
        tools.ours(screen[0], run_input)
    backbone = tmp_path / "backbones" / "descriptors"
    backbone.mkdir(parents=True)
    (backbone / "card.json").write_text("{}")
    commands = []

    def stop(command, log):
        commands.append(command)
        raise ChildFailed("stopped by the test")

    monkeypatch.setattr(tools, "run_child", stop)
    with pytest.raises(ChildFailed, match="stopped by the test"):
        tools.ours(screen[0], run_input)
    command = commands[0]
    assert command[command.index("--from-pretrained") + 1] == str(backbone)
    assert command[-len(FINE_TUNING[FINE_TUNED_RECIPE]):] == FINE_TUNING[FINE_TUNED_RECIPE]
