"""The cached, resumable runner: plans (set, seed, tool) runs, prepares the split files, runs each
missing run once and stores its result JSON and predictions CSV.

A run's key hashes the set, seed, tool, the tool's settings, the epochs and the split files'
SHA-256 digests; a stored result with the same key is never redone. A run's working folder is
emptied when it starts, and its result is written (atomically) only when it finished, so an
interrupted suite restarts cleanly where it stopped.
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

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


@dataclass
class Store:
    """Where results live: ``<results>/runs/<set>/seed<k>/<tool>.json`` and ``.predictions.csv``,
    ``<results>/splits.json``; split files and working folders under ``<cache>``."""

    results: Path
    cache: Path

    def result_path(self, run: PlannedRun) -> Path:
        return self.results / "runs" / run.spec.name / f"seed{run.seed}" / f"{run.tool.name}.json"

    def finished(self, run: PlannedRun) -> Optional[Dict[str, object]]:
        path = self.result_path(run)
        if not path.exists():
            return None
        result = json.loads(path.read_text())
        return result if result.get("key") == run.key else None

    def work(self, run: PlannedRun) -> Path:
        return self.cache / "work" / run.spec.name / f"seed{run.seed}" / run.tool.name

    def split_folder(self, spec: SuiteSet, seed: int) -> Path:
        return self.cache / "splits" / spec.name / f"seed{seed}"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    os.replace(partial, path)


def plan(store: Store, sets: Sequence[SuiteSet], seeds: Sequence[int], tools: Sequence[ToolSpec]) -> List[PlannedRun]:
    """Every applicable (set, seed, tool), seed by seed (a partial suite holds whole seeds), writing
    each set's split files (checked against the digests recorded in ``splits.json``)."""
    runs = []
    for spec in sets:
        data: SetData = read_set(spec)
        for seed in seeds:
            files = write_split_files(spec, data, seed, store.split_folder(spec, seed))
            check_recorded(store.results / "splits.json", (spec.name, seed), files)
            n_train = files.counts()["train"]
            runs += [PlannedRun(spec, seed, tool, files, n_train) for tool in tools if tool.runs_on(spec)]
    return sorted(runs, key=lambda run: seeds.index(run.seed))


def execute(store: Store, run: PlannedRun) -> Dict[str, object]:
    """Run one tool on one split from an empty working folder and store its scored result."""
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
    path = store.result_path(run)
    _atomic_write(path.with_suffix(".predictions.csv"), predictions.to_csv(index=False, float_format="%.6g"))
    result = {
        "set": run.spec.name, "half": run.spec.half, "task": run.spec.task, "seed": run.seed, "tool": run.tool.name,
        "kind": run.tool.kind, "settings": run.tool.settings, "epochs": run.epochs, "key": run.key,
        "split_sha256": run.files.hashes, "rows": run.files.counts(), "metric": run.spec.metric,
        "value": score(run.spec.metric, labels, predicted), "missing_predictions": missing,
        "cpu_s": round(output.usage.cpu_s, 2), "wall_s": round(output.usage.wall_s, 2), "work_units": run.work_units,
        "notes": output.notes, "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    _atomic_write(path, json.dumps(result, indent=1) + "\n")
    return result


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


def run_all(store: Store, runs: Sequence[PlannedRun], on_result: Optional[Callable[[List[Path], str], None]] = None) -> int:
    """Run every unfinished run in order with progress lines, handing each finished run's files
    and a one-line summary to ``on_result``; the number of failed runs."""
    done = [r for r in map(store.finished, runs) if r is not None]
    todo = [run for run in runs if store.finished(run) is None]
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
        if on_result is not None:
            path = store.result_path(run)
            on_result([path, path.with_suffix(".predictions.csv"), store.results / "splits.json"],
                      f"suite results: {run.label()}, {run.spec.metric} {result['value']:.4f}")
        print(f"    {run.spec.metric} {result['value']:.4f}; {result['cpu_s']:.0f} CPU-s, {result['wall_s']:.0f} s wall"
              + (f"; {result['missing_predictions']} test molecules unpredicted" if result["missing_predictions"] else "")
              + f"; ETA {_clock(eta_seconds(done, todo[index:]))}", flush=True)
    return failed


def quick_sets(sets: Sequence[SuiteSet], size: int, epochs: int) -> List[SuiteSet]:
    """The sets cut to ``size`` molecules and ``epochs`` epochs (``--quick``)."""
    return [dataclasses.replace(spec, subsample=size, epochs=epochs) for spec in sets]
