"""benchmarks/qm9_energy.py: the formula baseline against numpy's least squares, and the script's
smoke run end to end (the suite's runner on a tiny QM9-U0, every step finished, the peers quoted
only when the suite has them)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
from rdkit import Chem
from suite_helpers import BENCHMARKS

from qm9_energy import STEPS, dressed_atoms_mae  # noqa: E402  (benchmarks/ is on the path via suite_helpers)
from _suite.splits import SplitFiles  # noqa: E402

SMILES = ["C", "CC", "CO", "C=O", "CCO", "CN", "CF", "OCC=O", "NC=O", "CCC", "FC(F)F", "CC#N"]


def test_dressed_atoms_is_the_least_squares_formula_fit_on_the_training_part(tmp_path):
    molecules = [Chem.AddHs(Chem.MolFromSmiles(s)) for s in SMILES]
    writer = Chem.SDWriter(str(tmp_path / "data.sdf"))
    for mol in molecules:
        writer.write(mol)
    writer.close()
    counts = np.array([[sum(a.GetSymbol() == e for a in m.GetAtoms()) for e in "HCNOF"] for m in molecules], float)
    rng = np.random.default_rng(0)
    y = counts @ np.array([-0.6, -38.0, -54.6, -75.1, -99.7]) + rng.normal(0, 2.0, len(SMILES))
    parts = ["train"] * 9 + ["test"] * 3
    pd.DataFrame({"smiles": SMILES, "target": y, "split": parts}).to_csv(tmp_path / "data.csv", index=False)
    values, *_ = np.linalg.lstsq(counts[:9], y[:9], rcond=None)
    expected = np.mean(np.abs(counts[9:] @ values - y[9:]))
    assert np.isclose(dressed_atoms_mae(SplitFiles(tmp_path, {})), expected, rtol=1e-9)


def test_smoke_run_finishes_every_step(tmp_path):
    done = subprocess.run([sys.executable, str(BENCHMARKS / "qm9_energy.py"), "--smoke", "--results", str(tmp_path / "r"),
                           "--cache", str(tmp_path / "c")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    values = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(values) == [tool.name for tool, _ in STEPS] + ["default", "RF-coulomb"]
    assert all(np.isfinite(values[tool.name]) and values[tool.name] > 0 for tool, _ in STEPS)
    assert values["default"] is None and values["RF-coulomb"] is None  # the suite never ran the smoke split
    assert "| dressed atoms |" in done.stdout
