"""Why MoiréGT's 3-D preset lost on QM9 atomization energies, and what ``3d-energy`` changes: the
suite's development quantum set (QM9-U0, seed 0, its own split files and epochs), the old ``3d``
preset, ``3d-energy`` with one of its parts taken out, and the 2-D default given the same
per-element reference values, beside the formula baseline alone.

    python benchmarks/qm9_energy.py              # QM9-U0 seed 0, 50 epochs (~15 CPU-minutes)
    python benchmarks/qm9_energy.py --smoke      # 150 molecules, 2 epochs: a minute

The runs go through the suite's runner (``benchmarks/_suite``): the same split files, the same
``dgl-graphtx train data.sdf`` command as the suite's ``moire-3d`` tool with other arguments, the
same cached results (``benchmarks/qm9_energy/runs/``). The ``3d-energy`` run itself is the suite's
``moire-3d`` result, reused when the suite has it; the report quotes the suite's 2-D default and
Coulomb-matrix forest of the same split beside them. ``dressed atoms`` is the least-squares fit of
the target on the molecular formula over the training part: the per-element reference values the
``3d-energy`` model starts from, with nothing learned on top.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import update_section  # noqa: E402
from _suite.config import CACHE, RESULTS, SETS_BY_NAME, TOOLS_BY_NAME, Quick, ToolSpec  # noqa: E402
from _suite.runner import PlannedRun, Store, plan, quick_sets, run_all  # noqa: E402
from _suite.splits import SplitFiles  # noqa: E402

from dgl_graphtx.models.atom_reference import fit_atom_references  # noqa: E402

HERE = Path(__file__).resolve().parent / "qm9_energy"
SET = "QM9-U0"
SEED = 0
ENERGY = TOOLS_BY_NAME["moire-3d"]
ELEMENTS = ("H", "C", "N", "O", "F")


def _variant(name: str, *extra: str) -> ToolSpec:
    return dataclasses.replace(ENERGY, name=name, settings={**ENERGY.settings, "args": [*ENERGY.settings["args"], *extra]})


#: The runs and what each is (``moire-3d`` is the suite's tool: ``3d-energy`` on the DFT geometry).
STEPS: Tuple[Tuple[ToolSpec, str], ...] = (
    (ToolSpec("moire-3d-plain", "ours", {"args": ["--model", "moire", "--preset", "3d"], "input": "sdf"}, three_d_only=True),
     "the `3d` preset (the suite's `moire-3d` before): max pool over heavy atoms, distances in the focus only"),
    (_variant("3d-energy-no-ref", "--set", "model.atom_reference=false"), "`3d-energy` without the per-element reference values"),
    (_variant("3d-energy-no-H", "--set", "featurizer.explicit_hydrogens=false"),
     "`3d-energy` on heavy atoms only (hydrogens as atom features, as the `3d` preset)"),
    (ENERGY, "`3d-energy`: hydrogens as nodes, reference values, atomwise readout, 32 distance basis functions"),
    (TOOLS_BY_NAME["default+ref"],
     "the 2-D default (Gradformer, SMILES) with the same per-element reference values: is it 3-D or the references?"),
)
#: The suite's tools of the same split quoted beside the ladder.
PEERS = ("default", "RF-coulomb")


def dressed_atoms_mae(files: SplitFiles) -> float:
    """Test MAE of the least-squares formula baseline (H, C, N, O, F counts) fitted on the training part."""
    molecules = Chem.SDMolSupplier(str(files.sdf), removeHs=False)
    counts = np.array([[sum(a.GetSymbol() == e for a in mol.GetAtoms()) for e in ELEMENTS] for mol in molecules], float)
    table = pd.read_csv(files.csv)
    train, test = (table["split"] == "train").to_numpy(), (table["split"] == "test").to_numpy()
    y = table["target"].to_numpy(float)
    values = fit_atom_references(torch.from_numpy(counts[train]), torch.from_numpy(y[train, None])).numpy()[:, 0]
    return float(np.mean(np.abs(counts[test] @ values - y[test])))


def _result(stores: Sequence[Store], run: PlannedRun) -> Optional[Dict[str, object]]:
    return next((r for r in (store.finished(run) for store in stores) if r is not None), None)


def markdown(rows: List[Tuple[str, str, Optional[Dict[str, object]]]], baseline: float, run: PlannedRun) -> str:
    lines = [
        "## QM9 atomization energy: what the 3-D model needs (MAE, kcal/mol)", "",
        f"`benchmarks/qm9_energy.py`: the suite's development quantum set {run.spec.name} (seed {run.seed}, its split "
        f"files: {run.files.counts()['train']:,} training, {run.files.counts()['test']:,} test molecules, DFT geometries "
        f"from `data.sdf`), {run.epochs} epochs, every network through `dgl-graphtx train` as the suite runs it (one "
        "thread; CPU-s includes featurization). One seed: differences of a few kcal/mol are within what another "
        "seed could move.", "",
        "| run | what it is | test MAE | CPU-s |", "|---|---|---|---|",
        f"| dressed atoms | least squares on the molecular formula (training part): the reference values alone | "
        f"{baseline:.2f} | - |",
    ]
    for name, what, result in rows:
        value = f"{result['value']:.2f}" if result else "not run"
        cpu = f"{result['cpu_s']:.0f}" if result else "-"
        lines.append(f"| `{name}` | {what} | {value} | {cpu} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="150 molecules, 2 epochs, results under the cache")
    parser.add_argument("--results", type=Path, help=f"results folder (default: {HERE}; with --smoke {CACHE / 'qm9_energy-smoke'})")
    parser.add_argument("--cache", type=Path, help=f"split files and working folders (default: {CACHE})")
    parser.add_argument("--no-docs", action="store_true", help="print the table, leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    spec = SETS_BY_NAME[SET]
    if args.smoke:
        spec = quick_sets([spec], Quick.size, Quick.epochs)[0]
    results = args.results or (CACHE / "qm9_energy-smoke" if args.smoke else HERE)
    cache = args.cache or (CACHE / "qm9_energy-smoke" if args.smoke else CACHE)
    store, suite = Store(results, cache), Store(RESULTS, CACHE)
    peers = [TOOLS_BY_NAME[name] for name in PEERS]
    runs = plan(store, [spec], [SEED], [tool for tool, _ in STEPS] + peers)
    ladder, quoted = runs[:len(STEPS)], runs[len(STEPS):]
    failed = run_all(store, [run for run in ladder if _result([suite, store], run) is None])
    rows = [(run.tool.name, what, _result([suite, store], run)) for run, (_, what) in zip(ladder, STEPS)]
    rows += [(run.tool.name, f"the suite's `{run.tool.name}` on the same split", _result([suite, store], run)) for run in quoted]
    text = markdown(rows, dressed_atoms_mae(ladder[0].files), ladder[0])
    print(text)
    if not (args.no_docs or args.smoke):
        print(f"updated {update_section('qm9_energy', text)}")
    print(json.dumps({name: (r or {}).get("value") for name, _, r in rows}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
