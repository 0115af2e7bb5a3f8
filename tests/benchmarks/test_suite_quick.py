"""The suite end to end (``python -m benchmarks.suite --quick``) in a temporary folder: two tiny sets
(FreeSolv, QM9 with DFT geometries), one seed, two epochs, our default and the random forest; a
second run finds every run in the ledger. Needs no network: both sets ship with installed packages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]


def _suite(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "benchmarks.suite", *args], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_quick_suite_runs_resumes_and_reports(tmp_path):
    folders = ("--results", str(tmp_path / "results"), "--cache", str(tmp_path / "cache"))
    out = _suite("--quick", *folders)
    assert "4 to run" in out and "all runs finished" in out
    ledger = pd.read_csv(tmp_path / "results" / "runs.csv")
    assert sorted(zip(ledger["set"], ledger["tool"])) == [
        ("FreeSolv", "RF-morgan"), ("FreeSolv", "default"), ("QM9-U0", "RF-morgan"), ("QM9-U0", "default")]
    run = ledger[(ledger["set"] == "FreeSolv") & (ledger["tool"] == "default")].iloc[0]
    assert run["metric"] == "rmse" and run["value"] > 0 and run["cpu_s"] > 0 and run["missing_predictions"] == 0
    assert (tmp_path / "cache" / "splits" / "QM9-U0" / "seed0" / "data.sdf").exists()
    assert (tmp_path / "cache" / "predictions" / "FreeSolv" / "seed0" / "default.csv").exists()
    assert "0 to run" in _suite("--quick", *folders)
    report = _suite("--report", "--no-docs", *folders)
    assert "| tool | FreeSolv (rmse) | QM9-U0 (mae) | mean rank | CPU-s per run |" in report
