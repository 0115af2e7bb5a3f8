"""The suite's runner (benchmarks/suite/runner.py) with a stand-in tool: finished runs are rows of
the ledger and are not redone, a changed setting reruns, a failed run leaves no row, a molecule a
tool did not predict gets the training mean and is counted, and cliff molecules get their own RMSE."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.suite import runner, tools
from command_processes import assert_process_ends
from benchmarks.suite.children import ChildFailed, Usage
from benchmarks.suite.config import SETS_BY_NAME, TOOLS, ToolSpec
from benchmarks.suite.sets import SetData
from benchmarks.suite.splits import write_split_files

SMILES = ["CCO", "CCN", "CCC", "CCCl", "CCBr", "CC=O", "CC#N", "COC", "CNC", "CSC"] * 2  # a test part of 2


def _runs(tmp_path, tool, spec=None, frame=None):
    spec = dataclasses.replace(spec or SETS_BY_NAME["FreeSolv"], epochs=1)
    frame = pd.DataFrame({"smiles": SMILES, "target": range(20)}) if frame is None else frame
    files = write_split_files(spec, SetData(frame), 0, tmp_path / "splits")
    return [runner.PlannedRun(spec, 0, tool, files, files.counts()["train"])]


def _answering(calls):
    def fake(tool, run):
        calls.append(tool.settings["answer"])
        table = pd.read_csv(run.files.csv)
        test = list(table.index[table["split"] == "test"])
        return tools.ToolOutput({test[0]: float(tool.settings["answer"])}, Usage(1.0, 2.0))  # the other test rows missing
    return fake


def test_ledger_rows_are_not_redone_changed_settings_rerun_and_missing_predictions_count(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(tools.DRIVERS, "fake", _answering(calls))
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    tool = ToolSpec("stand-in", "fake", {"answer": 5})
    assert runner.run_all(store, _runs(tmp_path, tool)) == 0
    assert runner.run_all(store, _runs(tmp_path, tool)) == 0 and calls == [5]  # in the ledger: skipped
    row = store.rows().iloc[0]
    table = pd.read_csv(tmp_path / "splits" / "data.csv")
    train_mean = table.loc[table.split == "train", "target"].mean()
    test_labels = table.loc[table.split == "test", "target"].to_numpy(float)
    predictions = pd.read_csv(store.predictions(_runs(tmp_path, tool)[0]))
    assert row["missing_predictions"] == 1 and sorted(predictions.prediction) == sorted([5.0, train_mean])
    expected = np.sqrt(np.mean((test_labels - predictions.prediction.to_numpy()) ** 2))
    assert np.isclose(row["value"], expected) and pd.isna(row["cliff_rmse"]) and json.loads(row["settings"]) == {"answer": 5}
    changed = ToolSpec("stand-in", "fake", {"answer": 6})
    assert runner.run_all(store, _runs(tmp_path, changed)) == 0 and calls == [5, 6]
    assert len(store.rows()) == 1 and json.loads(store.rows().iloc[0]["settings"]) == {"answer": 6}  # replaced, not added


def test_a_failed_run_records_nothing_and_is_retried(tmp_path, monkeypatch):
    def failing(tool, run):
        (run.work / "partial.txt").write_text("left by an interrupted run")
        raise ChildFailed("exit status 1")

    monkeypatch.setitem(tools.DRIVERS, "failing", failing)
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    runs = _runs(tmp_path, ToolSpec("broken", "failing", {}))
    assert runner.run_all(store, runs) == 1 and store.rows().empty
    assert runner.run_all(store, runs) == 1  # tried again from an emptied working folder
    assert [p.name for p in store.work(runs[0]).iterdir()] == ["partial.txt"]


def test_two_writers_never_lose_each_others_rows(tmp_path):
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    rows = [{"set": "FreeSolv", "half": "dev", "seed": seed, "tool": "t", "key": str(seed), "metric": "rmse", "value": 1.0,
             "settings": "{}"} for seed in range(40)]
    threads = [threading.Thread(target=store.record, args=(row,)) for row in rows]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(store.rows()["seed"]) == list(range(40))


def test_cliff_molecules_get_their_own_rmse(tmp_path, monkeypatch):
    def constant(tool, run):
        table = pd.read_csv(run.files.csv)
        return tools.ToolOutput({int(r): 0.0 for r in table.index[table["split"] == "test"]}, Usage(1.0, 1.0))

    monkeypatch.setitem(tools.DRIVERS, "constant", constant)
    parts = ["train"] * 16 + ["test"] * 4
    frame = pd.DataFrame({"smiles": SMILES, "target": [1.0] * 16 + [1.0, 2.0, 3.0, 4.0], "part": parts, "cliff": [0] * 18 + [1, 1]})
    store = runner.Store(tmp_path / "results", tmp_path / "cache")
    spec = SETS_BY_NAME["CHEMBL2835_Ki"]
    assert runner.run_all(store, _runs(tmp_path, ToolSpec("zero", "constant", {}), spec, frame)) == 0
    row = store.rows().iloc[0]
    assert np.isclose(row["value"], np.sqrt((1 + 4 + 9 + 16) / 4)) and np.isclose(row["cliff_rmse"], np.sqrt((9 + 16) / 2))


def test_screened_recipes_and_3d_tools_run_only_where_they_belong():
    sets = [SETS_BY_NAME[name] for name in ("FreeSolv", "QM9-U0", "Solubility", "QM9-U0-heldout", "CHEMBL1862_Ki", "CHEMBL1871_Ki")]
    screened = ToolSpec("screened", "ours", {"args": []}, development_only=True)
    three_d = ToolSpec("3d", "ours", {"args": []}, three_d_only=True)
    plain = ToolSpec("plain", "ours", {"args": []})
    assert [screened.runs_on(s) for s in sets] == [True, False, False, False, True, False]   # judged on the 2-D dev sets
    assert [three_d.runs_on(s) for s in sets] == [False, True, False, True, False, False]
    assert [plain.runs_on(s) for s in sets] == [True] * 6
    assert not any(t.runs_on(s) for t in TOOLS if t.development_only for s in sets if s.half == "test")


def test_moleculeace_halves_are_the_even_and_odd_sorted_names():
    ace = sorted(s.name for s in SETS_BY_NAME.values() if s.family == "moleculeace")
    assert len(ace) == 30
    dev = [name for name in ace if SETS_BY_NAME[name].half == "dev"]
    assert dev == ace[0::2] and dev[:3] == ["CHEMBL1862_Ki", "CHEMBL2034_Ki", "CHEMBL204_Ki"] and dev[-1] == "CHEMBL4616_EC50"


def test_the_suite_s_ledger_is_its_branch_s_worktree_and_main_keeps_the_digests(tmp_path, monkeypatch):
    """Results stay out of main's history: without the ``suite-results`` worktree the suite stops
    with the command that checks it out; with it, the ledger is read there and the split digests
    from main; ``--results DIR`` keeps both in DIR."""
    import pytest

    from benchmarks.suite import __main__ as suite

    monkeypatch.setattr(suite, "RESULTS", tmp_path / "results")
    with pytest.raises(SystemExit, match="git worktree add .*results suite-results"):
        suite.store_for(suite.parse_args(["--report"]))
    (tmp_path / "results").mkdir()
    store = suite.store_for(suite.parse_args(["--report"]))
    assert store.ledger == tmp_path / "results" / "runs.csv" and store.digests == suite.DIGESTS
    assert suite.DIGESTS.is_file()  # committed on main
    elsewhere = suite.store_for(suite.parse_args(["--report", "--results", str(tmp_path / "timing")]))
    assert elsewhere.ledger.parent == elsewhere.digests.parent == tmp_path / "timing"


def test_a_tools_process_ends_with_the_suites(tmp_path):
    """The suite stopped (here its stand-in, SIGKILLed) leaves no training behind."""
    pid_file, tool, suite_script = tmp_path / "child.pid", tmp_path / "tool.py", tmp_path / "suite.py"
    tool.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    suite_script.write_text("import sys\nfrom pathlib import Path\nfrom benchmarks.suite.children import run_child\n"
                            f"run_child([sys.executable, {str(tool)!r}], Path({str(tmp_path / 'log.txt')!r}))\n")
    root = Path(__file__).resolve().parents[2]
    suite = subprocess.Popen([sys.executable, str(suite_script)], env={**os.environ, "PYTHONPATH": str(root)})
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    suite.send_signal(signal.SIGKILL)
    suite.wait()
    assert_process_ends(child, 5, "the tool's process outlived the suite")
