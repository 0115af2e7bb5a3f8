"""Ensembles and replicates: seeds, splits, mean and std against the members' own predictions,
replicate statistics, Spearman rho against scipy-free ranks, and the CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest_models import freesolv_rows, tiny_preset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets import make_split
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import ensemble_predict
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs import train_ensemble
from dgl_graphtx.training import TrainConfig, regression_metrics
from cli_runner import assert_one_error_line, run_cli


def _ranks(values):
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    return ranks


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    preset = tiny_preset("vanilla")
    dataset = MoleculeDataset.from_dataframe(freesolv_rows(0, 60), target_cols=["expt"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    out = tmp_path_factory.mktemp("ensemble")
    config = TrainConfig(epochs=2, batch_size=16, progress=False, seed=5)
    return dataset, train_ensemble(dataset, preset, config, ensemble_size=3, replicates=2, out_dir=out), out


def test_members_seeds_and_splits(ensemble):
    dataset, result, out = ensemble
    assert [len(r) for r in result.members] == [3, 3]
    for replicate, runs in enumerate(result.members):
        expected = make_split(dataset, "random", (0.8, 0.1, 0.1), 5 + replicate)
        assert all(run.split == expected for run in runs)  # same split within a replicate
        tested = [tuple(run.test_predictions["expt_pred"]) for run in runs]
        assert len(set(tested)) == 3  # different seeds, different models
        for member in range(3):
            assert Predictor(out / f"replicate_{replicate}" / f"member_{member}" / "best.pt").target_names == ["expt"]
    assert result.members[0][0].split != result.members[1][0].split


def test_mean_std_metrics_and_spearman_against_the_members(ensemble):
    dataset, result, out = ensemble
    for replicate, runs in enumerate(result.members):
        part = result.predictions[result.predictions["replicate"] == replicate]
        stack = np.stack([run.test_predictions["expt_pred"].to_numpy() for run in runs])
        np.testing.assert_allclose(part["expt_pred"], stack.mean(0))
        np.testing.assert_allclose(part["expt_std"], np.sqrt(((stack - stack.mean(0)) ** 2).mean(0)))
        np.testing.assert_allclose(part["expt"], runs[0].test_predictions["expt"])
        manual = regression_metrics(part[["expt"]].to_numpy(), part[["expt_pred"]].to_numpy())
        assert result.metrics.loc[replicate, "rmse"] == pytest.approx(manual["rmse"])
        assert result.metrics.loc[replicate, "member_rmse"] == pytest.approx(np.mean([r.test_metrics["rmse"] for r in runs]))
    rmse = result.metrics["rmse"].to_numpy()
    assert result.summary["rmse"] == pytest.approx({"mean": rmse.mean(), "std": rmse.std()})
    error = (result.predictions["expt_pred"] - result.predictions["expt"]).abs().to_numpy()
    rho = np.corrcoef(_ranks(result.predictions["expt_std"].to_numpy()), _ranks(error))[0, 1]
    assert result.spearman == pytest.approx(rho, abs=1e-9)
    report = json.loads((out / "ensemble_metrics.json").read_text())
    assert report["spearman_std_vs_abs_error"] == pytest.approx(rho) and report["replicates"] == 2
    saved = pd.read_csv(out / "ensemble_test_predictions.csv")
    np.testing.assert_allclose(saved["expt_std"], result.predictions["expt_std"])


def test_ensemble_predict_is_the_members_mean(ensemble):
    _, _, out = ensemble
    paths = sorted((out / "replicate_0").rglob("best.pt"))
    smiles = ["CCO", "C1CC", "c1ccccc1O"]
    table = ensemble_predict([Predictor(p) for p in paths], smiles)
    members = np.stack([Predictor(p).predict(smiles)["expt_pred"].to_numpy() for p in paths])
    np.testing.assert_allclose(table["expt_pred"], members.mean(0))
    np.testing.assert_allclose(table["expt_std"], members.std(0))
    assert table["error"].notna().tolist() == [False, True, False]


def test_replicates_need_a_random_or_scaffold_split(ensemble):
    dataset, result, _ = ensemble
    with pytest.raises(ConfigError, match="replicates need a split kind"):
        train_ensemble(dataset, tiny_preset("vanilla"), split=result.members[0][0].split, replicates=2)




def test_cli_ensemble_train_and_predict_with_a_folder(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(data, index=False)
    code, stdout, err = run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "ens", "--model", "vanilla",
                              "--epochs", "1", "--device", "cpu", "--no-progress", "--ensemble-size", "2", "--replicates", "2",
                              "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 0, err
    report = json.loads((tmp_path / "ens" / "ensemble_metrics.json").read_text())
    assert f"rmse {report['summary']['rmse']['mean']:.4f} +/- {report['summary']['rmse']['std']:.4f}" in stdout
    assert "Spearman rho" in stdout
    assert (tmp_path / "ens" / "config.yaml").read_text().count("size: 2") == 1
    code, stdout, err = run_cli(["predict", "--checkpoint", tmp_path / "ens" / "replicate_1", "CCO", "c1ccccc1"])
    assert code == 0, err
    assert stdout.splitlines()[0].split()[:4] == ["smiles", "canonical_smiles", "expt_pred", "expt_std"]


def test_two_target_ensemble_reports_each_target_over_replicates(tmp_path):
    preset = tiny_preset("vanilla", num_tasks=2)
    frame = freesolv_rows(0, 50)[["smiles", "expt", "calc"]]
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["expt", "calc"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    result = train_ensemble(dataset, preset, TrainConfig(epochs=1, batch_size=16, progress=False), ensemble_size=2,
                            replicates=2, out_dir=tmp_path)
    written = pd.read_csv(tmp_path / "ensemble_test_predictions.csv")
    for name in ("expt", "calc"):
        # each replicate's test part scored on this target alone, by hand from the written predictions
        per_replicate = [regression_metrics(part[[name]].to_numpy(), part[[f"{name}_pred"]].to_numpy())
                         for _, part in written.groupby("replicate")]
        for metric in ("rmse", "mae"):
            values = np.array([m[metric] for m in per_replicate])
            assert result.per_target[name][metric]["mean"] == pytest.approx(values.mean())
            assert result.per_target[name][metric]["std"] == pytest.approx(values.std())
    report = json.loads((tmp_path / "ensemble_metrics.json").read_text())
    assert report["per_target"]["calc"]["rmse"]["mean"] == pytest.approx(result.per_target["calc"]["rmse"]["mean"])


SMALL = ["--model", "vanilla", "--epochs", "1", "--device", "cpu", "--no-progress",
         "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


def test_an_ensemble_is_replaced_with_overwrite(tmp_path):
    """An ensemble folder could not be replaced even with --overwrite (which its message asked
    for), after featurizing; a smaller one written over a larger one would have left the old
    members to be averaged with the new (the folds of a cross-validation: tests/runs/test_run_folder.py)."""
    data = tmp_path / "d.csv"
    freesolv_rows(0, 24)[["smiles", "expt"]].to_csv(data, index=False)
    out = tmp_path / "ens"
    assert run_cli(["train", data, "--targets", "expt", "--out", out, "--ensemble-size", "3", *SMALL])[0] == 0
    before = sorted(p.name for p in (out / "replicate_0").iterdir())
    assert_one_error_line(run_cli(["train", data, "--targets", "expt", "--out", out, "--ensemble-size", "2", *SMALL]),
                          str(out), "already holds a run", "--overwrite")
    assert sorted(p.name for p in (out / "replicate_0").iterdir()) == before
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", out, "--ensemble-size", "2", "--overwrite", *SMALL])
    assert code == 0, err
    assert sorted(p.name for p in (out / "replicate_0").iterdir() if p.is_dir()) == ["member_0", "member_1"]
    smiles = ["CCO", "c1ccccc1O"]
    members = np.stack([Predictor(out / "replicate_0" / f"member_{k}").predict(smiles)["expt_pred"] for k in range(2)])
    # the two new members, and no other, are what the folder holds
    code, out, err = run_cli(["predict", "--checkpoint", out, *smiles, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(tmp_path / "p.csv")["expt_pred"], members.mean(0), rtol=1e-6)


def test_members_with_and_without_their_own_std_are_combined_on_what_they_share(tmp_path, caplog):
    """One member with a variance head and one without: KeyError 'expt_std'. They are combined on
    what they share: the mean and the members' spread, with a warning saying so."""
    import logging

    data = tmp_path / "d.csv"
    freesolv_rows(0, 24)[["smiles", "expt"]].to_csv(data, index=False)
    with_head, without = tmp_path / "mve", tmp_path / "plain"
    assert run_cli(["train", data, "--targets", "expt", "--out", with_head, "--uncertainty", "mve", *SMALL])[0] == 0
    assert run_cli(["train", data, "--targets", "expt", "--out", without, "--seed", "1", *SMALL])[0] == 0
    smiles = ["CCO", "c1ccccc1O", "CC(=O)N"]
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        code, _, err = run_cli(["predict", "--checkpoint", with_head, "--checkpoint", without, *smiles, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    assert any("different uncertainty methods (mve for 1, none for 1)" in r.getMessage() for r in caplog.records)
    means = np.stack([Predictor(path).predict(smiles)["expt_pred"].to_numpy() for path in (with_head, without)])
    table = pd.read_csv(tmp_path / "p.csv")
    np.testing.assert_allclose(table["expt_pred"], means.mean(0), rtol=1e-6)
    np.testing.assert_allclose(table["expt_std"], means.std(0), rtol=1e-5)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_members_that_agree_everywhere_give_no_spearman_and_a_warning(caplog, task):
    """Members whose predictions are equal (the kernel carries each one) have std 0 everywhere:
    the rank correlation of std and error is undefined, reported as none with one warning saying
    why (scipy's ConstantInputWarning leaked with a source line), and a fix the task allows (the
    mve head is refused for classification)."""
    import warnings
    from types import SimpleNamespace
    from dgl_graphtx.runs.ensemble import ReplicateResult, _ensemble_result
    table = pd.DataFrame({"y": [1.0, 2.0, 3.0, 4.0], "y_pred": [1.5, 1.5, 2.5, 4.5], "y_std": [0.0] * 4, "replicate": 0})
    done = [ReplicateResult([], table, {"replicate": 0, "rmse": 0.5}, {"y": {"rmse": 0.5}})]
    run = SimpleNamespace(names=["y"], plan=SimpleNamespace(ensemble=SimpleNamespace(size=2),
                                                            preset=SimpleNamespace(model=SimpleNamespace(task=task))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning of scipy's escapes
        with caplog.at_level("WARNING", logger="dgl_graphtx"):
            result = _ensemble_result(run, done)
    assert np.isnan(result.spearman)
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["the ensemble's members agree on every test molecule of 'y'"]
    assert ("--uncertainty mve" in caplog.records[0].getMessage()) == (task == "regression")


def test_multiclass_members_average_their_probabilities(tmp_path):
    """Two multiclass models of a cross-validation or of `predict --checkpoint A --checkpoint B`:
    `<t>_pred` was the mean of the members' classes (1.5), `<t>_std` their spread, and the
    probabilities the first member's. Now the mean probabilities and their most probable class."""
    import torch

    from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
    from dgl_graphtx.models import build_model

    preset = tiny_preset("vanilla", task="multiclass", num_classes=3, num_tasks=2)
    paths = []
    for seed in range(3):
        torch.manual_seed(seed)
        paths.append(save_checkpoint(tmp_path / f"m{seed}.pt", build_model(preset.model),
                                     CheckpointMeta(preset.featurizer, preset.relation, ["a", "b"])))
    smiles = ["CCO", "C1CC", "c1ccccc1O", "CC(=O)N", "ClCCl"]
    table = ensemble_predict([Predictor(p) for p in paths], smiles)
    members = [Predictor(p).predict(smiles) for p in paths]
    for name in ("a", "b"):
        columns = [f"{name}_prob_{k}" for k in range(3)]
        mean = np.mean([m[columns].to_numpy(float) for m in members], axis=0)
        np.testing.assert_allclose(table[columns], mean, rtol=1e-6)
        valid = ~np.isnan(mean).any(1)
        assert table[f"{name}_pred"][valid].tolist() == mean[valid].argmax(1).tolist()
        assert table[f"{name}_pred"].isna().tolist() == (~valid).tolist()
        assert f"{name}_std" not in table
    assert list(table.columns[2:10]) == ["a_pred", "a_prob_0", "a_prob_1", "a_prob_2", "b_pred", "b_prob_0", "b_prob_1", "b_prob_2"]
