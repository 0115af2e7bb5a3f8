"""The fingerprint kernel in a run (``data.kernel``, ``--kernel``): fitted after training when the
data is a molecule file with a regression or binary target, stored in ``best.pt`` and used by
``predict``; never for the runs it cannot serve (a store, QM9, multiclass, censored or weighted
labels); one line when asked for where it cannot run."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from cli_runner import assert_one_error_line, run_cli
from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import freesolv
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize.descriptors import feature_names, kernel_fingerprints, kernel_segments
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs.config import DEFAULT_KERNEL, resolve_run_config

COMMON = ["--model", "vanilla", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2", "--epochs", "2",
          "--no-progress", "--no-cache"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "fs.csv"
    freesolv().head(120).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def kernel_run(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "k"
    code, stdout, stderr = run_cli(["train", data, "--targets", "expt", "--out", out, *COMMON])
    assert code == 0, stderr
    return out, stdout


def test_a_default_run_fits_the_kernel_says_so_and_predict_reads_it(kernel_run, tmp_path):
    out, stdout = kernel_run
    summary = json.loads((out / "metrics.json").read_text())["fingerprint_kernel"]
    assert set(summary) == {"network_weight", "ridge", "valid_rmse_network", "valid_rmse_kernel", "valid_rmse_blend",
                            "valid_molecules"}
    assert summary["valid_molecules"] == [12]
    assert 0 <= summary["network_weight"][0] <= 1
    assert summary["valid_rmse_blend"][0] <= min(summary["valid_rmse_network"][0], summary["valid_rmse_kernel"][0]) + 1e-9
    assert "fingerprint kernel, expt: network weight" in stdout
    model = load_checkpoint(out / "best.pt").model
    assert model.config.kernel_references == 96 + 12  # training and validation molecules (80/10/10 of 120)
    assert model.config.kernel_segments == kernel_segments(DEFAULT_KERNEL) == (2048, 2048, 1024)  # Morgan, atom pairs, Avalon
    tested = pd.read_csv(out / "test_predictions.csv")
    code, _, stderr = run_cli(["predict", "--checkpoint", out / "best.pt", "--input", out / "test_predictions.csv",
                               "--output", tmp_path / "p.csv"])
    assert code == 0, stderr
    predicted = pd.read_csv(tmp_path / "p.csv")
    assert np.abs(predicted["expt_pred"].to_numpy() - tested["expt_pred"].to_numpy()).max() < 1e-5


def test_the_blend_is_what_the_test_predictions_hold(kernel_run):
    out, _ = kernel_run
    predictor = Predictor(out / "best.pt")
    kernel_model = predictor.model.kernel
    weight = float(kernel_model.weight[0])
    tested = pd.read_csv(out / "test_predictions.csv")
    kernel = kernel_model.predictions(torch.from_numpy(kernel_fingerprints(DEFAULT_KERNEL, list(tested.smiles)))).numpy()[:, 0]
    predictor.model.kernel = None  # the network alone
    network = predictor.predict(list(tested.smiles))["expt_pred"].to_numpy()
    assert np.abs(weight * network + (1 - weight) * kernel - tested["expt_pred"].to_numpy()).max() < 1e-4


def test_a_calibrated_run_stores_its_kernel_with_the_calibration(data, tmp_path):
    """With an uncertainty method, best.pt is written once after training, by the calibration,
    and holds the kernel too: predict gives the test predictions of the run."""
    out = tmp_path / "mve"
    code, _, stderr = run_cli(["train", data, "--targets", "expt", "--out", out, "--uncertainty", "mve", *COMMON])
    assert code == 0, stderr
    stored = load_checkpoint(out / "best.pt")
    assert stored.model.kernel is not None and stored.meta.extra.uncertainty["calibration"]
    tested = pd.read_csv(out / "test_predictions.csv")
    predicted = Predictor(out / "best.pt").predict(list(tested.smiles))
    assert np.abs(predicted["expt_pred"].to_numpy() - tested["expt_pred"].to_numpy()).max() < 1e-5


def test_kernel_none_trains_the_network_alone(data, tmp_path):
    code, stdout, stderr = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "n", "--kernel", "none", *COMMON])
    assert code == 0, stderr
    assert "fingerprint_kernel" not in json.loads((tmp_path / "n" / "metrics.json").read_text())
    assert load_checkpoint(tmp_path / "n" / "best.pt").model.kernel is None and "fingerprint kernel" not in stdout


@pytest.mark.parametrize("overrides,expected,descriptors", [
    ([], DEFAULT_KERNEL, True),
    (["data.kernel=morgan_counts:radius=3:size=1024"], "morgan_counts:radius=3:size=1024", True),
    (["data.kernel=none"], "", True),  # the kernel's setting leaves the auto extra features alone
    (["model.task=classification"], DEFAULT_KERNEL, True),
    (["model.task=multiclass"], "", False),
    (["train.loss=bounded_mse"], "", False),
    (["data.weight_col=w"], "", False),
    (["preset.model=moire", "preset.name=3d-energy"], DEFAULT_KERNEL, False),  # an atomwise readout reads no descriptors
])
def test_auto_resolves_for_the_runs_it_can_serve(overrides, expected, descriptors):
    config = resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", *overrides])
    assert config.kernel == expected and config.extra_features.kernel == expected
    # the auto extra features serve the runs the auto kernel serves: RDKit's descriptors there, none otherwise
    generators = ("rdkit2d",) if descriptors else ()
    assert config.extra_features.generators == generators
    assert config.model.molecule_features == len(feature_names(generators))


def test_qm9_gets_no_kernel_unless_asked_and_then_one_line(tmp_path):
    assert resolve_run_config(overrides=["data.path=qm9", "data.targets=homo"]).kernel == ""
    assert_one_error_line(run_cli(["train", "qm9", "--targets", "homo", "--subset", "20", "--kernel", "morgan_counts",
                                   "--out", tmp_path / "q", *COMMON]), "fingerprint kernel", "molecule file")


@pytest.mark.parametrize("overrides, why", [
    (["model.task=multiclass", "model.num_classes=3"], "not multiclass ones"),
    (["data.weight_col=w"], "would ignore the weights of --weight-col"),
    (["train.loss=bounded_mse"], "censored label"),
])
def test_a_kernel_spec_where_auto_leaves_the_kernel_out_is_refused(overrides, why):
    """The probe: an explicit spec was fitted without a word on weighted or censored labels (read as
    exact), and on multiclass targets recorded but never fitted."""
    with pytest.raises(ConfigError, match=f"the fingerprint kernel \\(--kernel morgan_counts\\) .*{why}.*drop --kernel"):
        resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "data.kernel=morgan_counts", *overrides])
    assert resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "data.kernel=none", *overrides]).kernel == ""


def test_a_kernel_spec_that_is_no_count_fingerprint_is_one_line(data, tmp_path):
    assert_one_error_line(run_cli(["train", data, "--targets", "expt", "--kernel", "rdkit2d", "--out", tmp_path / "r", *COMMON]),
                          "count fingerprints", "morgan_counts")


def test_a_default_run_reads_descriptors_and_predicts_them_in_worker_processes(kernel_run, data):
    """The default run's head reads RDKit's 2-D descriptors (data.features_generators=auto); a
    prediction with two featurizing processes computes them (and the kernel's counts) there, with
    the same result as one process, failures in place."""
    out, _ = kernel_run
    extras = load_checkpoint(out / "best.pt").meta.extra.extra_features
    assert extras["spec"]["generators"] == ["rdkit2d"] and extras["spec"]["kernel"] == DEFAULT_KERNEL
    smiles = list(freesolv().smiles[:150]) + ["C1CC("]
    one = Predictor(out / "best.pt", device="cpu").predict(smiles)
    two = Predictor(out / "best.pt", device="cpu", workers=2).predict(smiles)
    pd.testing.assert_frame_equal(two, one)
    assert one["expt_pred"].notna().sum() == 150 and one["error"].notna().tolist()[-1]


@pytest.mark.parametrize("edit, said", [
    (lambda state: state.__setitem__("kernel.references", state["kernel.references"].float() * 300), "is stored as torch.float32"),
    (lambda state: state.__setitem__("kernel.references", state["kernel.references"].long()), "is stored as torch.int64"),
    (lambda state: state["kernel.weight"].fill_(2.0), "network weights must lie in [0, 1]"),
    (lambda state: state["kernel.coefficients"].view(-1)[0].fill_(float("nan")), "coefficients and intercepts must be finite"),
])
def test_an_edited_kernel_with_a_fresh_checksum_is_refused(kernel_run, edit, said, tmp_path):
    """The probe: edits of the kernel saved with a recomputed checksum were accepted (references
    cast to uint8 without a word: 300 -> 44; a weight of 2 or a NaN coefficient predicted nonsense)."""
    from dgl_graphtx.checkpoint import content_checksum
    from dgl_graphtx.errors import CheckpointError
    payload = torch.load(kernel_run[0] / "best.pt", weights_only=True)
    edit(payload["state_dict"])
    payload["checksum"] = content_checksum(payload)
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match=re.escape(said)):
        load_checkpoint(tmp_path / "edited.pt")
