"""Atom-level targets and several molecules per row, on real data read offline.

Atom level, on the held-out test part of an 80/10/10 random split:

- ``gasteiger``: FreeSolv's 642 molecules with RDKit's Gasteiger charges (each atom's implicit
  hydrogens' charge added to it, so they sum to the formal charge: ``--atom-sums q=formal_charge``)
  and Wildman-Crippen logP contributions (hydrogens' added to their atom, summing to the molecule's
  logP, given as a column: ``--atom-sums crippen=logp``), a self-check set whose truth is exact;
- ``qm9-mulliken``: DFT (B3LYP/6-31G(2df,p)) Mulliken charges of every atom, hydrogens as nodes, of
  QM9 molecules read from the qm9pack package's CSV files (needs ``pip install "dgl_graphtx[qm9]"``;
  a random sample of ``qm9_part1.csv``), constrained to sum to the (zero) formal charge.

Each atom target is reported as the default model's test RMSE and MAE beside a per-element baseline (each
atom predicted as its element's mean over the training atoms) and the largest distance of a test
molecule's predicted sum from its total (the constraint, which must hold to float32 rounding).

Several molecules per row: FreeSolv's solutes, each paired with one of five solvents (water,
ethanol, octanol, chloroform, benzene) at random, labelled with a synthetic transfer score,
logP(solute) - logP(solvent) (RDKit's Crippen; no solvation set with many solvents ships in a
package: see docs/atoms_and_rows.md). A model that reads the solute alone cannot know the solvent's
part; the two-molecule models (one shared backbone, or one per molecule) can.

Run:  OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.checks.atoms_and_rows          (5-9 min on one thread; rewrites
                                                                                     docs/atoms_and_rows.md's tables)
      .venv/bin/python -m benchmarks.checks.atoms_and_rows --quick                    (smoke run, ~1 min)
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
from rdkit import Chem
from rdkit.Chem import AllChem, Crippen

from benchmarks.common import check
from benchmarks.common import molecules as M
from benchmarks.common import report as R
from benchmarks.common.attribution import crippen_atom_logp
from benchmarks.common.report import REPO

from dgl_graphtx.datasets import load_labelled
from dgl_graphtx.datasets.geometry import molecule_from_geometry
from dgl_graphtx.datasets.level_targets import LevelTargets
from dgl_graphtx.datasets.molecule_columns import MoleculeColumns
from dgl_graphtx.models import get_preset
from dgl_graphtx.models.levels import LevelOptions
from dgl_graphtx.models.molecule_sets import MoleculeSetOptions
from dgl_graphtx.runs import RunPlan, train_and_evaluate
from dgl_graphtx.training import TrainConfig

SOLVENTS = ["O", "CCO", "CCCCCCCCO", "ClC(Cl)Cl", "c1ccccc1"]


def _list(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.6f}" for v in values) + "]"


def gasteiger_file(folder: Path) -> Path:
    """FreeSolv with its Gasteiger group charges and Crippen contributions as list columns."""
    rows = []
    for smiles in M.freesolv_smiles()[0]:
        mol = Chem.MolFromSmiles(smiles)
        AllChem.ComputeGasteigerCharges(mol)
        rows.append({"smiles": smiles, "logp": Crippen.MolLogP(mol), "crippen": _list(crippen_atom_logp(smiles)),
                     "q": _list([a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge") for a in mol.GetAtoms()])})
    path = folder / "gasteiger.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def mulliken_file(folder: Path, count: int) -> Path:
    """``count`` QM9 molecules (a seeded sample of qm9pack's first part) with their DFT geometry and
    Mulliken charges as an SD atom property list."""
    data = Path(importlib.util.find_spec("qm9pack").submodule_search_locations[0]) / "data"
    frame = pd.read_csv(data / "qm9_part1.csv", usecols=["Index", "Elements", "XYZ_Ang", "Mulliken_pop"])
    frame = frame.sample(n=min(count, len(frame)), random_state=0)
    path = folder / "mulliken.sdf"
    writer = Chem.SDWriter(str(path))
    for row in frame.itertuples():
        try:
            mol = molecule_from_geometry(ast.literal_eval(row.Elements), np.array(ast.literal_eval(row.XYZ_Ang)))
        except ValueError:  # bonds not perceived (a handful of QM9's cages): left out
            continue
        mol.SetProp("_Name", f"qm9_{row.Index}")
        mol.SetProp("atom.dprop.mulliken", " ".join(f"{q:.6f}" for q in ast.literal_eval(row.Mulliken_pop)))
        writer.write(mol)
    writer.close()
    return path


def train_atoms(name: str, path: Path, spec: LevelTargets, featurizer: Dict[str, object], epochs: int,
                out: Path) -> List[Dict[str, object]]:
    """Train the default model (its featurizer with the ``featurizer`` settings) on ``spec``'s atom
    targets; one row per atom target."""
    base = get_preset("gradformer")
    preset = dataclasses.replace(base, featurizer=dataclasses.replace(base.featurizer, **featurizer))
    data, _ = load_labelled(path, [], level_targets=spec, featurizer=preset.featurizer, relation=preset.relation,
                            progress=False, cache_dir=None)
    model = dataclasses.replace(preset.model, num_tasks=0,
                                levels=LevelOptions(len(spec.atom_targets), len(spec.bond_targets), spec.constrained))
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=0, progress=False)
    start = time.perf_counter()
    result = train_and_evaluate(data, RunPlan(dataclasses.replace(preset, model=model), config), out_dir=out / name, overwrite=True)
    seconds = time.perf_counter() - start
    atoms = result.test_level_predictions["atom"]
    train_rows = set(data.rows[result.split.train].tolist())
    rows = []
    for target, source in [(t, dict(spec.sums).get(t)) for t in spec.atom_targets]:
        baseline, overall = _element_baseline(data, result.split.train, spec.atom_targets.index(target))
        predicted_sums = atoms.groupby("row")[f"{target}_pred"].sum()
        totals = atoms.groupby("row")[target].sum()  # the labels' own sums (formal charge, logP up to the lists' rounding)
        errors, baseline_errors = atoms[f"{target}_pred"] - atoms[target], atoms["element"].map(baseline).fillna(overall) - atoms[target]
        rows.append({"set": name, "target": target, "molecules": len(data), "test_atoms": len(atoms),
                     "rmse": float(np.sqrt((errors ** 2).mean())), "baseline_rmse": float(np.sqrt((baseline_errors ** 2).mean())),
                     "mae": float(errors.abs().mean()), "baseline_mae": float(baseline_errors.abs().mean()),
                     "constraint": source or "none", "max_sum_gap": float((predicted_sums - totals).abs().max()),
                     "epochs": epochs, "seconds": round(seconds, 1), "train_molecules": len(train_rows)})
    return rows


def _element_baseline(data, train: Sequence[int], column: int) -> Tuple[Dict[str, float], float]:
    """Each element's mean label over the training molecules' atoms, and the mean over all of
    them (for an element no training atom has)."""
    periodic = Chem.GetPeriodicTable()
    graphs = data.graphs
    parts = [slice(int(graphs.node_offsets[i]), int(graphs.node_offsets[i] + graphs.num_nodes[i])) for i in train]
    labels = np.concatenate([graphs.ndata["atom_targets"][p, column].numpy() for p in parts])
    elements = np.concatenate([graphs.ndata["atomic_number"][p].numpy() for p in parts])
    frame = pd.DataFrame({"element": [periodic.GetElementSymbol(int(z)) for z in elements], "label": labels}).dropna()
    return frame.groupby("element")["label"].mean().to_dict(), float(frame["label"].mean())


def pairs_file(folder: Path) -> Path:
    """FreeSolv's solutes, each with a solvent drawn at random, and logP(solute) - logP(solvent)."""
    rng = np.random.default_rng(0)
    rows = []
    for smiles in M.freesolv_smiles()[0]:
        solvent = SOLVENTS[int(rng.integers(len(SOLVENTS)))]
        rows.append({"solute": smiles, "solvent": solvent,
                     "transfer": Crippen.MolLogP(Chem.MolFromSmiles(smiles)) - Crippen.MolLogP(Chem.MolFromSmiles(solvent))})
    path = folder / "pairs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def train_rows(path: Path, epochs: int, out: Path) -> List[Dict[str, object]]:
    """The solute alone, and both molecules with one shared or two separate backbones, on the same split."""
    rows = []
    for name, columns, backbones in (("solute only", ("solute",), "shared"), ("solute + solvent, shared backbone",
                                                                              ("solute", "solvent"), "shared"),
                                     ("solute + solvent, separate backbones", ("solute", "solvent"), "separate")):
        preset = get_preset("gradformer")
        spec = MoleculeColumns(columns) if len(columns) > 1 else MoleculeColumns()
        data, _ = load_labelled(path, ["transfer"], smiles_col=columns[0], molecule_columns=spec, featurizer=preset.featurizer,
                                relation=preset.relation, progress=False, cache_dir=None)
        model = dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=len(columns), backbones=backbones))
        config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=0, progress=False)
        start = time.perf_counter()
        result = train_and_evaluate(data, RunPlan(dataclasses.replace(preset, model=model), config),
                                    out_dir=out / name.replace(" ", "_").replace(",", "").replace("+", "and"), overwrite=True)
        rows.append({"set": "freesolv-solvents", "model": name, "molecules": len(data), "test_rmse": result.test_metrics["rmse"],
                     "test_mae": result.test_metrics["mae"], "epochs": epochs, "seconds": round(time.perf_counter() - start, 1)})
    return rows


ATOM_COLUMNS = [("set", "set"), ("target", "atom target"), ("molecules", "molecules"), ("test_atoms", "test atoms"),
                ("rmse", "test RMSE"), ("baseline_rmse", "per-element mean, RMSE"), ("mae", "test MAE"),
                ("baseline_mae", "per-element mean, MAE"), ("constraint", "sums to"),
                ("max_sum_gap", "largest gap of a sum"), ("seconds", "s")]
ROW_COLUMNS = [("model", "model"), ("molecules", "rows"), ("test_rmse", "test RMSE"), ("test_mae", "test MAE"), ("seconds", "s")]
DOCS = REPO / "docs" / "atoms_and_rows.md"


def _shown(rows: List[Dict[str, object]], keys: Sequence[str]) -> List[Dict[str, object]]:
    """``rows`` with the values of ``keys`` as three significant digits (the CSV keeps them whole)."""
    return [{**row, **{k: f"{row[k]:.3g}" for k in keys}} for row in rows]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = check.parser(__doc__, threads=1)
    parser.add_argument("--epochs", type=int, default=60, help="epochs of every model")
    parser.add_argument("--qm9", type=int, default=3000, help="QM9 molecules sampled for the Mulliken charges (0: skip them)")
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "atoms_and_rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.qm9, args.out = 3, min(args.qm9, 200), args.out / "quick"
    args.out.mkdir(parents=True, exist_ok=True)
    env = check.start(args, "atom-level targets and several molecules per row")
    atoms = train_atoms("freesolv-gasteiger-crippen", gasteiger_file(args.out), LevelTargets(("q", "crippen"),
                        atom_sums=("q=formal_charge", "crippen=logp")), {}, args.epochs, args.out)
    if args.qm9 and importlib.util.find_spec("qm9pack") is not None:
        atoms += train_atoms("qm9-mulliken", mulliken_file(args.out, args.qm9),
                             LevelTargets(("mulliken",), atom_sums=("mulliken=formal_charge",)), {"explicit_hydrogens": True},
                             args.epochs, args.out)
    elif args.qm9:
        print('QM9 left out: pip install "dgl_graphtx[qm9]" (qm9pack) to read its Mulliken charges')
    rows = train_rows(pairs_file(args.out), args.epochs, args.out)
    intro = [R.environment_line(env)]
    shown = _shown(atoms, ("rmse", "baseline_rmse", "mae", "baseline_mae"))
    check.finish("atoms_and_rows", args, env, shown, ATOM_COLUMNS, intro, section="atoms-and-rows", path=DOCS)
    csv = args.csv.with_name(args.csv.stem + "-rows.csv") if args.csv else None
    check.finish("atoms_and_rows-rows", argparse.Namespace(**{**vars(args), "csv": csv}), env,
                 _shown(rows, ("test_rmse", "test_mae")), ROW_COLUMNS, intro, section="atoms-and-rows-pairs", path=DOCS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
