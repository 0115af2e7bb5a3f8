"""The transfer suite end to end (``benchmarks/suite.py --quick``) in a temporary folder: two tiny
sets (FreeSolv, QM9 with DFT geometries), one seed, two epochs, our default and the random forest;
a second run finds every result cached. Needs no network: both sets ship with installed packages."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / "benchmarks" / "suite.py"


def _suite(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SUITE), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_quick_suite_runs_caches_and_reports(tmp_path):
    folders = ("--results", str(tmp_path / "results"), "--cache", str(tmp_path / "cache"))
    out = _suite("--quick", *folders)
    assert "4 to run" in out and "all runs finished" in out
    results = sorted((tmp_path / "results" / "runs").glob("*/seed0/*.json"))
    assert [f"{p.parent.parent.name}/{p.stem}" for p in results] == [
        "FreeSolv/RF-morgan", "FreeSolv/default", "QM9-U0/RF-morgan", "QM9-U0/default"]
    run = json.loads(results[1].read_text())
    assert run["metric"] == "rmse" and run["value"] > 0 and run["cpu_s"] > 0 and run["missing_predictions"] == 0
    assert (tmp_path / "cache" / "splits" / "QM9-U0" / "seed0" / "data.sdf").exists()
    assert "0 to run" in _suite("--quick", *folders)
    report = _suite("--report", "--no-docs", *folders)
    assert "| QM9-U0 (mae, 1) |" in report
