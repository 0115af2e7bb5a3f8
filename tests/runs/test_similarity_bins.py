"""``train --calibration-bins similarity``: the checkpoint stores the training part's fingerprints
and per-bin quantiles, and ``predict`` gives each molecule the interval of its similarity bin,
equal to a naive recomputation from RDKit similarities and the calibration molecules' own scores;
a checkpoint without the record predicts the plain intervals."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem, DataStructs
from rdkit.Chem import rdFingerprintGenerator

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_rows
from dgl_graphtx.checkpoint import load_checkpoint, save_checkpoint
from dgl_graphtx.inference import Predictor, ensemble_predict

SMALL = ["--model", "vanilla", "--epochs", "2", "--batch-size", "16", "--device", "cpu", "--no-progress",
         "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]
NEW = freesolv_rows(300, 330)["smiles"].tolist()


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("bins") / "d.csv"
    freesolv_rows(0, 150)[["smiles", "expt"]].to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def run(data_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("bins") / "run"
    code, _, err = run_cli(["train", data_csv, "--targets", "expt", "--out", out, "--uncertainty", "mve",
                            "--calibration-share", "0.25", "--calibration-bins", "similarity", *SMALL])
    assert code == 0, err
    return out


def _nearest(smiles, reference):
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    fps = [generator.GetFingerprint(Chem.MolFromSmiles(s)) for s in reference]
    return np.array([max(DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(Chem.MolFromSmiles(s)), fps)) for s in smiles])


def _naive_quantile(scores, coverage=0.9):
    ordered = sorted(scores)
    rank = math.ceil((len(ordered) + 1) * coverage - 1e-9)
    return ordered[rank - 1] if rank <= len(ordered) else math.inf


def test_predict_intervals_equal_a_naive_recomputation(run, data_csv, tmp_path):
    data = pd.read_csv(data_csv)
    extra = load_checkpoint(run / "best.pt").meta.extra
    training = data["smiles"][extra.data["split"]["train"].numpy()].tolist()
    assert tuple(extra.training_fingerprints.shape) == (len(training), 256)
    # the calibration molecules: similarity to the training part as RDKit gives it, terciles, per-bin scores
    calibration = pd.read_csv(run / "calibration_predictions.csv")
    similarity = _nearest(calibration["smiles"], training)
    assert calibration["similarity_to_training"].to_numpy() == pytest.approx(similarity, abs=1e-9)
    edges = np.quantile(similarity, [1 / 3, 2 / 3])
    scores = (np.abs(calibration["expt"] - calibration["expt_pred"]) / calibration["expt_std"]).to_numpy()
    where = np.digitize(similarity, edges)
    quantiles = [_naive_quantile(scores[where == b]) for b in range(3)]
    assert all(np.isfinite(quantiles))
    # predict on new molecules: each takes its bin's quantile
    code, _, err = run_cli(["predict", "--checkpoint", run, *NEW, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    near = _nearest(NEW, training)
    assert predicted["similarity_to_training"].to_numpy() == pytest.approx(near, abs=1e-9)
    half = np.array(quantiles)[np.digitize(near, edges)] * predicted["expt_std"]
    assert predicted["expt_hi"].to_numpy() == pytest.approx((predicted["expt_pred"] + half).to_numpy(), rel=1e-5)
    assert predicted["expt_lo"].to_numpy() == pytest.approx((predicted["expt_pred"] - half).to_numpy(), rel=1e-5)
    assert len(set(np.digitize(near, edges))) > 1  # the new molecules span bins, so the check sees more than one quantile
    # metrics.json: the bins and the test coverage per bin
    report = json.loads((run / "metrics.json").read_text())["uncertainty"]
    assert report["calibration"]["similarity_bins"]["edges"] == pytest.approx(list(edges))
    assert report["calibration"]["similarity_bins"]["conformal"] == [[pytest.approx(q, rel=1e-6)] for q in quantiles]
    test = pd.read_csv(run / "test_predictions.csv")
    per_bin = report["test_by_similarity_bin"]["expt"]
    test_bin = np.digitize(test["similarity_to_training"], edges)
    covered = (test["expt"] >= test["expt_lo"]) & (test["expt"] <= test["expt_hi"])
    assert [r["molecules"] for r in per_bin] == [int(np.sum(test_bin == b)) for b in range(3)]
    for b, row in enumerate(per_bin):
        if row["molecules"]:
            assert row["coverage"] == pytest.approx(covered[test_bin == b].mean())


def test_a_checkpoint_without_the_record_predicts_plain_intervals(run, tmp_path):
    loaded = load_checkpoint(run / "best.pt")
    stored = loaded.meta.extra.uncertainty
    calibration = {k: v for k, v in stored["calibration"].items() if k != "similarity_bins"}  # as before the option
    extra = dataclasses.replace(loaded.meta.extra, training_fingerprints=None,
                                uncertainty={k: v for k, v in stored.items() if k != "calibration_bins"} | {"calibration": calibration})
    old = save_checkpoint(tmp_path / "old.pt", loaded.model, dataclasses.replace(loaded.meta, extra=extra))
    table = Predictor(old).predict(NEW)
    assert "similarity_to_training" not in table.columns
    half = calibration["conformal"][0] * table["expt_std"]
    assert table["expt_hi"].to_numpy() == pytest.approx((table["expt_pred"] + half).to_numpy(), rel=1e-6)
    binned = Predictor(run / "best.pt").predict(NEW)
    assert "similarity_to_training" in binned.columns and not np.allclose(binned["expt_hi"], table["expt_hi"])


def test_the_option_is_refused_where_it_is_not_defined(data_csv, tmp_path):
    bins = ["--calibration-bins", "similarity"]
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "a", *bins, *SMALL]),
                          "--calibration-bins", "--uncertainty")
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "b", "--uncertainty", "mve",
                                   *bins, *SMALL]), "--calibration-bins similarity", "needs at least 27", "got 15")
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "c", "--uncertainty", "mve",
                                   "--cv", "3", *bins, *SMALL]), "--calibration-bins", "CV+")
    assert_one_error_line(run_cli(["train", data_csv, "--targets", "expt", "--out", tmp_path / "d", "--uncertainty", "mve",
                                   "--ensemble-size", "2", *bins, *SMALL]), "--calibration-bins", "--ensemble-size 1")


def test_an_ensemble_of_such_checkpoints_drops_the_similarity(run):
    table = ensemble_predict([Predictor(run / "best.pt")] * 2, NEW[:3])
    assert "similarity_to_training" not in table.columns and "expt_lo" not in table.columns
    assert table["expt_pred"].to_numpy() == pytest.approx(Predictor(run / "best.pt").predict(NEW[:3])["expt_pred"].to_numpy())
