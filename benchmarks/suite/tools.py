"""Tool drivers: each trains one tool on one split file and returns its test predictions by row of
``data.csv``. Our library and chemprop run through their command lines as child processes; the
random forests run in this process; AttentiveFP runs in a child (``attentivefp.py``)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import numpy as np
import pandas as pd
from rdkit import Chem, rdBase
from rdkit.Chem import rdFingerprintGenerator

from .children import Usage, executable, run_child, self_cpu
from .config import CACHE, REPO, SuiteSet, ToolSpec
from .splits import SplitFiles

#: chemprop v2 lives in its own virtualenv (its dependencies would disturb our pinned .venv).
BENCH_VENV = REPO / ".venv-bench"
#: Featurized molecules of our runs, shared by the tools and seeds that featurize alike.
FEATURIZED = CACHE / "featurized"


@dataclass
class RunInput:
    """What a driver gets: the set, the seed, the split files, the epoch budget and an empty folder."""

    spec: SuiteSet
    seed: int
    files: SplitFiles
    epochs: int
    work: Path


@dataclass
class ToolOutput:
    """Test predictions keyed by row of ``data.csv``, the CPU and wall time spent, and notes."""

    predictions: Dict[int, float]
    usage: Usage
    notes: Dict[str, object] = field(default_factory=dict)


def _table(run: RunInput) -> pd.DataFrame:
    return pd.read_csv(run.files.csv)


def ours(tool: ToolSpec, run: RunInput) -> ToolOutput:
    """``dgl-graphtx train`` on the split file (``--split-col split``), one thread."""
    data = run.files.sdf if tool.settings.get("input") == "sdf" else run.files.csv
    out = run.work / "run"
    command = [executable("dgl-graphtx"), "train", str(data), "--targets", "target", "--split-col", "split",
               "--epochs", str(run.epochs), "--seed", str(run.seed), "--out", str(out), "--no-progress",
               "--threads", "1", "--cache-dir", str(FEATURIZED)]
    if run.spec.task == "classification":
        command += ["--task", "classification"]
    usage = run_child(command + list(tool.settings["args"]), run.work / "train.log")
    ensemble = out / "ensemble_test_predictions.csv"
    table = pd.read_csv(ensemble if ensemble.exists() else out / "test_predictions.csv")
    return ToolOutput(dict(zip(table["row"].astype(int), table["target_pred"].astype(float))), usage)


def chemprop(tool: ToolSpec, run: RunInput) -> ToolOutput:
    """``chemprop train`` (v2, its defaults) on the split file (``--splits-column split``), on the CPU."""
    out = run.work / "run"
    task = "regression" if run.spec.task == "regression" else "classification"
    command = [executable("chemprop", BENCH_VENV), "train", "--data-path", str(run.files.csv),
               "--smiles-columns", "smiles", "--target-columns", "target", "--splits-column", "split",
               "--task-type", task, "--epochs", str(run.epochs), "--data-seed", str(run.seed),
               "--pytorch-seed", str(run.seed), "--save-dir", str(out), "--num-workers", "0",
               "--accelerator", "cpu", "--devices", "1"]
    usage = run_child(command + list(tool.settings["args"]), run.work / "train.log")
    found = sorted(out.rglob("test_predictions.csv"))
    if len(found) != 1:
        raise RuntimeError(f"expected one test_predictions.csv under {out}, found {len(found)}")
    predicted = pd.read_csv(found[0])
    table = _table(run)
    test = table.index[table["split"] == "test"]
    if list(predicted["smiles"]) != list(table.loc[test, "smiles"]):
        raise RuntimeError(f"{found[0]}: the SMILES are not the test rows of {run.files.csv} in file order")
    return ToolOutput(dict(zip(test, predicted["target"].astype(float))), usage)


def morgan_counts(smiles: List[str], radius: int, bits: int) -> np.ndarray:
    """Morgan count fingerprints ``[N, bits]`` (RDKit's generator)."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits)
    with rdBase.BlockLogs():
        return np.stack([generator.GetCountFingerprintAsNumPy(Chem.MolFromSmiles(s)) for s in smiles]).astype(np.float32)


def coulomb_eigenvalues(mol: Chem.Mol, size: int) -> np.ndarray:
    """Sorted (descending) eigenvalues of the Coulomb matrix of ``mol``'s conformer (all atoms,
    hydrogens included; distances in Bohr), zero-padded to ``size``.

    Example:
        >>> h2 = Chem.MolFromMolBlock("\\n\\n\\n  2  1  0  0  0  0  0  0  0  0999 V2000\\n"
        ...     "    0.0000    0.0000    0.0000 H   0  0\\n    0.7400    0.0000    0.0000 H   0  0\\n"
        ...     "  1  2  1  0\\nM  END\\n", removeHs=False)
        >>> coulomb_eigenvalues(h2, 3).round(3).tolist()
        [1.215, -0.215, 0.0]
    """
    numbers = np.array([a.GetAtomicNum() for a in mol.GetAtoms()], dtype=float)
    coords = mol.GetConformer().GetPositions() / 0.529177210903
    distance = np.linalg.norm(coords[:, None] - coords[None], axis=-1)
    with np.errstate(divide="ignore"):
        matrix = np.outer(numbers, numbers) / distance
    np.fill_diagonal(matrix, 0.5 * numbers ** 2.4)
    values = np.sort(np.linalg.eigvalsh(matrix))[::-1]
    return np.pad(values, (0, size - len(values)))


def random_forest_predictions(x: np.ndarray, y: np.ndarray, fit_rows: Sequence[int], test_rows: Sequence[int],
                              task: str, seed: int, trees: int = 500) -> np.ndarray:
    """Test predictions of scikit-learn's random forest (``trees`` trees, one thread) fitted on
    ``fit_rows``: values for regression, the positive class's probability for classification."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    kind = RandomForestRegressor if task == "regression" else RandomForestClassifier
    forest = kind(n_estimators=trees, random_state=seed, n_jobs=1).fit(x[list(fit_rows)], y[list(fit_rows)])
    test = list(test_rows)
    return forest.predict(x[test]) if task == "regression" else forest.predict_proba(x[test])[:, 1]


def _forest(tool: ToolSpec, run: RunInput, features: Callable[[pd.DataFrame], np.ndarray]) -> ToolOutput:
    """A random forest on ``features`` of the rows, fitted on train + validation (it has no epochs)."""
    cpu, wall = self_cpu(), time.perf_counter()
    table = _table(run)
    x = features(table)
    fit = np.flatnonzero(table["split"] != "test")
    test = np.flatnonzero(table["split"] == "test")
    predicted = random_forest_predictions(x, table["target"].to_numpy(float), fit, test, run.spec.task, run.seed,
                                          trees=int(tool.settings["trees"]))
    usage = Usage(self_cpu() - cpu, time.perf_counter() - wall)
    return ToolOutput(dict(zip(test, predicted.astype(float))), usage)


def rf_morgan(tool: ToolSpec, run: RunInput) -> ToolOutput:
    radius, bits = int(tool.settings["radius"]), int(tool.settings["bits"])
    return _forest(tool, run, lambda table: morgan_counts(list(table["smiles"]), radius, bits))


def rf_coulomb(tool: ToolSpec, run: RunInput) -> ToolOutput:
    def features(table: pd.DataFrame) -> np.ndarray:
        molecules = list(Chem.SDMolSupplier(str(run.files.sdf), removeHs=False))
        size = max(m.GetNumAtoms() for m in molecules)
        return np.stack([coulomb_eigenvalues(m, size) for m in molecules])

    return _forest(tool, run, features)


def attentivefp(tool: ToolSpec, run: RunInput) -> ToolOutput:
    """dgllife's AttentiveFP with the default model's recipe, in a child (``attentivefp.py``)."""
    predictions = run.work / "test_predictions.csv"
    command = [sys.executable, "-m", "benchmarks.suite.attentivefp", str(run.files.csv), run.spec.task,
               str(run.epochs), str(run.seed), str(predictions)]
    usage = run_child(command, run.work / "train.log")
    table = pd.read_csv(predictions)
    return ToolOutput(dict(zip(table["row"].astype(int), table["prediction"].astype(float))), usage)


DRIVERS: Dict[str, Callable[[ToolSpec, RunInput], ToolOutput]] = {
    "ours": ours, "chemprop": chemprop, "rf_morgan": rf_morgan, "rf_coulomb": rf_coulomb, "attentivefp": attentivefp,
}


def run_tool(tool: ToolSpec, run: RunInput) -> ToolOutput:
    return DRIVERS[tool.kind](tool, run)
