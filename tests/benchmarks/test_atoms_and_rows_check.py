"""The check behind docs/atoms_and_rows.md's tables keeps running (its quick mode) and reports what
it should: the constraint holds on every test molecule, and each model of rows gives its metrics."""
from __future__ import annotations

import pandas as pd

from benchmarks.checks import atoms_and_rows


def test_the_atoms_and_rows_check_runs_quickly(tmp_path):
    assert atoms_and_rows.main(["--quick", "--out", str(tmp_path), "--csv", str(tmp_path / "a.csv"), "--qm9", "60"]) == 0
    atoms = pd.read_csv(tmp_path / "a.csv")
    assert {"q", "crippen"} <= set(atoms["target"]) and (atoms["max_sum_gap"] < 1e-4).all()
    rows = pd.read_csv(tmp_path / "a-rows.csv")
    assert len(rows) == 3 and rows["test_rmse"].notna().all()
