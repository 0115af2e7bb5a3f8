"""The cached, resumable runner: plans (set, seed, tool) runs, prepares the split files, runs each
missing run once and adds its scored row to the ledger.

A run's key hashes the set, seed, tool, the tool's settings, the epochs and the split files'
SHA-256 digests; a run whose key is in the ledger is never redone. A run's working folder is
emptied when it starts, and its row is written (atomically) only when it finished, so an
interrupted suite restarts cleanly where it stopped. Nothing here touches git: the ledger is
committed by hand.
"""
from __future__ import annotations

import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from .children import ChildFailed
from .config import SuiteSet, ToolSpec
from .metrics import score
from .sets import SetData, read_set
from .splits import SplitFiles, check_recorded, write_split_files
from .tools import RunInput, run_tool


@dataclass(frozen=True)
class PlannedRun:
    """One (set, seed, tool) of the plan, with its split files and cache key."""

    spec: SuiteSet
    seed: int
    tool: ToolSpec
    files: SplitFiles
    n_train: int

    @property
    def epochs(self) -> int:
        return self.spec.epochs

    @property
    def key(self) -> str:
        content = {"set": self.spec.name, "seed": self.seed, "tool": self.tool.name, "kind": self.tool.kind,
                   "settings": self.tool.settings, "epochs": self.epochs, "split_sha256": self.files.hashes}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def work_units(self) -> float:
        """Training molecules times epochs (the forests have no epochs): the ETA's scale."""
        return self.n_train * (1 if self.tool.kind.startswith("rf_") else self.epochs)

    def label(self) -> str:
        return f"{self.spec.name} seed {self.seed} {self.tool.name}"


#: The ledger's columns: one row per finished run, the report's only input.
LEDGER_COLUMNS = ("set", "half", "seed", "tool", "key", "metric", "value", "cliff_rmse", "missing_predictions", "cpu_s",
                  "wall_s", "work_units", "epochs", "settings", "finished")


@dataclass
class Store:
    """Where results live: one row per finished run in the ledger ``<results>/runs.csv`` (the
    report's only input, and what a resumed suite skips; committed by hand on the results branch);
    the split files' digests in ``digests_file`` (default ``<results>/splits.json``); each run's
    test predictions under ``<cache>/predictions/``; split files and working folders under
    ``<cache>``."""

    results: Path
    cache: Path
    digests_file: Optional[Path] = None

    @property
    def ledger(self) -> Path:
        return self.results / "runs.csv"

    @property
    def digests(self) -> Path:
        return self.digests_file or self.results / "splits.json"

    def rows(self) -> pd.DataFrame:
        """Every run in the ledger (no rows before the first)."""
        if not self.ledger.exists():
            return pd.DataFrame(columns=list(LEDGER_COLUMNS))
        return pd.read_csv(self.ledger, dtype={"key": str, "settings": str})

    def finished(self) -> Dict[str, Dict[str, object]]:
        """The ledger's rows by run key."""
        return {str(row["key"]): row for row in self.rows().to_dict("records")}

    def record(self, row: Dict[str, object]) -> None:
        """Add ``row`` to the ledger, replacing an older row of the same set, seed and tool, under a
        lock, so that two suites running side by side never lose each other's rows."""
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        with open(self.ledger.with_name(self.ledger.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            frame = self.rows()
            same = (frame["set"] == row["set"]) & (frame["seed"] == row["seed"]) & (frame["tool"] == row["tool"])
            frame = pd.concat([frame[~same], pd.DataFrame([row], columns=list(LEDGER_COLUMNS))], ignore_index=True)
            frame = frame.assign(order=frame["half"].map({"dev": 0, "test": 1})).sort_values(["order", "set", "seed", "tool"])
            _atomic_write(self.ledger, frame.drop(columns="order").to_csv(index=False, lineterminator="\n"))

    def predictions(self, run: PlannedRun) -> Path:
        return self.cache / "predictions" / run.spec.name / f"seed{run.seed}" / f"{run.tool.name}.csv"

    def work(self, run: PlannedRun) -> Path:
        return self.cache / "work" / run.spec.name / f"seed{run.seed}" / run.tool.name

    def split_folder(self, spec: SuiteSet, seed: int) -> Path:
        return self.cache / "splits" / spec.name / f"seed{seed}"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def plan(store: Store, sets: Sequence[SuiteSet], seeds: Optional[Sequence[int]], tools: Sequence[ToolSpec],
         named_tools: bool = True) -> List[PlannedRun]:
    """Every applicable (set, seed, tool), seed by seed (a partial suite holds whole seeds), writing
    each set's split files (checked against the digests recorded in ``splits.json``); ``seeds``
    None: each set's own seeds; ``named_tools`` False: a set with default tools runs only those."""
    runs = []
    for spec in sets:
        data: SetData = read_set(spec)
        for seed in spec.seeds if seeds is None else seeds:
            files = write_split_files(spec, data, seed, store.split_folder(spec, seed))
            check_recorded(store.digests, (spec.name, seed), files)
            n_train = files.counts()["train"]
            runs += [PlannedRun(spec, seed, tool, files, n_train) for tool in tools if tool.runs_on(spec)
                     and (named_tools or spec.default_tools is None or tool.name in spec.default_tools)]
    return sorted(runs, key=lambda run: run.spec.seeds.index(run.seed) if run.seed in run.spec.seeds else run.seed)


def execute(store: Store, run: PlannedRun) -> Dict[str, object]:
    """Run one tool on one split from an empty working folder, keep its test predictions and add
    its scored row to the ledger."""
    work = store.work(run)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    output = run_tool(run.tool, RunInput(run.spec, run.seed, run.files, run.epochs, work))
    table = pd.read_csv(run.files.csv)
    test = table.index[table["split"] == "test"]
    fill = float(table.loc[table["split"] == "train", "target"].mean())
    predicted = np.array([output.predictions.get(int(row), np.nan) for row in test], dtype=float)
    missing = int(np.isnan(predicted).sum())
    predicted[np.isnan(predicted)] = fill  # a molecule a tool could not predict gets the training mean
    labels = table.loc[test, "target"].to_numpy(float)
    predictions = pd.DataFrame({"row": test, "label": labels, "prediction": predicted})
    _atomic_write(store.predictions(run), predictions.to_csv(index=False, float_format="%.6g"))
    cliffs = table.loc[test, "cliff"].to_numpy(bool) if "cliff" in table else np.zeros(len(test), bool)
    row: Dict[str, object] = {
        "set": run.spec.name, "half": run.spec.half, "seed": run.seed, "tool": run.tool.name, "key": run.key,
        "metric": run.spec.metric, "value": score(run.spec.metric, labels, predicted),
        "cliff_rmse": score("rmse", labels[cliffs], predicted[cliffs]) if cliffs.any() else None,
        "missing_predictions": missing, "cpu_s": round(output.usage.cpu_s, 2), "wall_s": round(output.usage.wall_s, 2),
        "work_units": run.work_units, "epochs": run.epochs, "settings": json.dumps(run.tool.settings, sort_keys=True),
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    store.record(row)
    return row


def eta_seconds(done: Sequence[Dict[str, object]], remaining: Sequence[PlannedRun]) -> Optional[float]:
    """Wall seconds left, from the finished runs' seconds per work unit (per tool, else overall).

    Example:
        >>> from types import SimpleNamespace as N
        >>> done = [{"tool": "a", "wall_s": 10.0, "work_units": 100}]
        >>> eta_seconds(done, [N(tool=N(name="a"), work_units=50), N(tool=N(name="b"), work_units=200)])
        25.0
    """
    if not done:
        return None
    rates: Dict[str, List[float]] = {}
    for result in done:
        rates.setdefault(str(result["tool"]), []).append(float(result["wall_s"]) / max(float(result["work_units"]), 1.0))
    overall = float(np.mean([r for values in rates.values() for r in values]))
    return sum(float(np.mean(rates.get(run.tool.name, [overall]))) * run.work_units for run in remaining)


def _clock(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}"


def run_all(store: Store, runs: Sequence[PlannedRun]) -> int:
    """Run every run not yet in the ledger, in order, with progress lines; the number of failed runs."""
    finished = store.finished()
    done = [finished[run.key] for run in runs if run.key in finished]
    todo = [run for run in runs if run.key not in finished]
    print(f"{len(runs)} runs planned, {len(runs) - len(todo)} already finished, {len(todo)} to run; "
          f"ETA {_clock(eta_seconds(done, todo))} (h:mm)", flush=True)
    failed = 0
    for index, run in enumerate(todo, 1):
        budget = "" if run.tool.kind.startswith("rf_") else f", {run.epochs} epochs"
        print(f"[{index}/{len(todo)}] {run.label()} ({run.n_train} training molecules{budget}) ...", flush=True)
        try:
            result = execute(store, run)
        except (ChildFailed, RuntimeError) as err:
            failed += 1
            print(f"    FAILED: {err}", flush=True)
            continue
        done.append(result)
        cliff = f" (cliffs {result['cliff_rmse']:.4f})" if result["cliff_rmse"] is not None else ""
        print(f"    {run.spec.metric} {result['value']:.4f}{cliff}; {result['cpu_s']:.0f} CPU-s, {result['wall_s']:.0f} s wall"
              + (f"; {result['missing_predictions']} test molecules unpredicted" if result["missing_predictions"] else "")
              + f"; ETA {_clock(eta_seconds(done, todo[index:]))}", flush=True)
    return failed


def quick_sets(sets: Sequence[SuiteSet], size: int, epochs: int) -> List[SuiteSet]:
    """The sets cut to ``size`` molecules and ``epochs`` epochs (``--quick``)."""
    return [dataclasses.replace(spec, subsample=size, epochs=epochs) for spec in sets]
