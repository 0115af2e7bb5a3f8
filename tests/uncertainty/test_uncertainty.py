"""Uncertainty: distribution heads and their losses against scipy's densities, calibration
(conformal coverage, z-scaling, temperature scaling) on synthetic data with known answers, the
miscalibration area against a numeric integral, MC dropout, and training / prediction end to end."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import integrate, stats
from scipy.optimize import minimize_scalar

from conftest_models import batch_of, dataset_for, freesolv_rows, tiny_preset
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.checkpoint import CheckpointExtras, CheckpointMeta, load_checkpoint, save_checkpoint
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.inference import ensemble_predict, stored_calibration
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import build_model
from dgl_graphtx.runs import train_ensemble
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.runs import resolve_run_config
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import (
    Calibration,
    UncertaintyConfig,
    conformal_quantile,
    fit_regression_calibration,
    fit_temperature,
    fit_z_scale,
    head_loss,
    miscalibration_area,
)
from dgl_graphtx.uncertainty.heads import (
    NormalInverseGamma,
    evidential_nll,
    evidential_parameters,
    evidential_regulariser,
    gaussian_nll,
)
from dgl_graphtx.uncertainty.methods import predictive_moments
from dgl_graphtx.uncertainty.inference import predict_with_uncertainty


def inverse_softplus(x: float) -> float:
    return math.log(math.expm1(x))


def binomial_tolerance(p: float, n: int, sigmas: float = 4.0) -> float:
    return sigmas * math.sqrt(p * (1 - p) / n)


# --------------------------------------------------------------------------------------------
# split-conformal intervals
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, coverage", [(19, 0.9), (18, 0.9), (49, 0.8), (7, 0.5)])
def test_conformal_quantile_is_the_finite_sample_order_statistic(n, coverage):
    scores = np.random.default_rng(n).permutation(np.arange(1.0, n + 1))  # the k-th smallest is k
    k = math.ceil((n + 1) * coverage)
    assert conformal_quantile(scores, coverage) == float(k)


def test_conformal_quantile_is_infinite_with_too_few_scores():
    assert conformal_quantile(np.arange(5.0), 0.9) == math.inf  # ceil(6 * 0.9) = 6 > 5


@pytest.mark.parametrize("n, coverage", [(19, 0.9), (18, 0.9), (9, 0.8)])
def test_conformal_coverage_equals_the_exact_finite_sample_value(n, coverage):
    # Exchangeable Gaussian residuals: P(new score <= k-th smallest of n) = k / (n + 1) exactly,
    # k = ceil((n + 1) coverage). 40,000 independent calibration sets, one test point each.
    trials = 40_000
    rng = np.random.default_rng(7)
    calib = np.abs(rng.normal(size=(trials, n)))
    test = np.abs(rng.normal(size=trials))
    quantiles = np.array([conformal_quantile(row, coverage) for row in calib])
    expected = math.ceil((n + 1) * coverage) / (n + 1)
    assert abs(np.mean(test <= quantiles) - expected) < binomial_tolerance(expected, trials)


def test_normalised_conformal_intervals_cover_heteroscedastic_labels_in_every_noise_group():
    rng = np.random.default_rng(0)

    def sample(m):
        std = rng.choice([0.2, 1.0, 5.0], size=(m, 1))
        mean = rng.normal(size=(m, 1))
        return mean + std * rng.normal(size=(m, 1)), mean, std

    y, mean, std = sample(4000)
    calibration = fit_regression_calibration("mve", y, mean, std, 0.9)
    assert calibration.normalised and calibration.z_scale == pytest.approx([1.0], abs=0.05)
    y, mean, std = sample(60_000)
    _, lo, hi = calibration.apply(mean, std)
    inside = (y >= lo) & (y <= hi)
    for level in (0.2, 1.0, 5.0):
        group = inside[std == level]
        assert abs(group.mean() - 0.9) < binomial_tolerance(0.9, len(group)) + 0.01, level
    # absolute residuals (no std) give the same marginal coverage but one width for all
    absolute = fit_regression_calibration("none", y[:4000], mean[:4000], None, 0.9)
    _, lo, hi = absolute.apply(mean, None)
    assert not absolute.normalised and abs(((y >= lo) & (y <= hi)).mean() - 0.9) < 0.015
    assert np.ptp(hi - lo) == pytest.approx(0.0, abs=1e-9)


# --------------------------------------------------------------------------------------------
# z-scaling and temperature scaling
# --------------------------------------------------------------------------------------------
def test_z_scaling_recovers_a_known_scale_and_minimises_the_nll():
    rng = np.random.default_rng(1)
    std = rng.uniform(0.1, 3.0, size=50_000)
    residuals = 2.5 * std * rng.normal(size=std.size)
    scale = fit_z_scale(residuals, std)
    assert scale == pytest.approx(2.5, rel=0.02)
    nll = lambda s: np.mean(np.log(s * std) + residuals ** 2 / (2 * (s * std) ** 2))  # noqa: E731
    numeric = minimize_scalar(nll, bounds=(0.1, 10), method="bounded").x
    assert scale == pytest.approx(numeric, rel=1e-4)


def test_temperature_scaling_recovers_a_known_temperature():
    rng = np.random.default_rng(2)
    true_logits = rng.normal(scale=3.0, size=60_000)
    labels = (rng.uniform(size=true_logits.size) < 1 / (1 + np.exp(-true_logits))).astype(float)
    overconfident = 2.0 * true_logits
    assert fit_temperature(overconfident, labels) == pytest.approx(2.0, rel=0.05)
    labels[::7] = np.nan  # missing labels are ignored
    assert fit_temperature(overconfident, labels) == pytest.approx(2.0, rel=0.05)


# --------------------------------------------------------------------------------------------
# miscalibration area
# --------------------------------------------------------------------------------------------
def test_miscalibration_area_of_a_calibrated_gaussian_is_near_zero():
    rng = np.random.default_rng(3)
    std = rng.uniform(0.5, 2.0, size=50_000)
    assert miscalibration_area(std * rng.normal(size=std.size), std) < 0.01


@pytest.mark.parametrize("true_scale", [0.5, 2.0])
def test_miscalibration_area_of_a_misscaled_gaussian_matches_the_integral(true_scale):
    # residuals ~ N(0, (s std)^2) judged with std: observed(p) = 2 Phi(Phi^-1((1 + p) / 2) / s) - 1
    rng = np.random.default_rng(4)
    std = rng.uniform(0.5, 2.0, size=100_000)
    residuals = true_scale * std * rng.normal(size=std.size)

    def gap(p):
        return abs(2 * stats.norm.cdf(stats.norm.ppf((1 + p) / 2) / true_scale) - 1 - p)

    exact, _ = integrate.quad(gap, 0, 1, limit=200)
    assert miscalibration_area(residuals, std) == pytest.approx(exact, abs=0.006)


# --------------------------------------------------------------------------------------------
# heads and losses
# --------------------------------------------------------------------------------------------
def test_gaussian_nll_matches_scipy():
    mean, var, y = torch.tensor([1.0, -2.0]), torch.tensor([4.0, 0.25]), torch.tensor([3.0, -2.5])
    expected = -stats.norm.logpdf(y.numpy(), mean.numpy(), np.sqrt(var.numpy()))
    assert gaussian_nll(mean, var, y).numpy() == pytest.approx(expected, rel=1e-6)
    # by hand: 0.5 * (log(2 pi 4) + (3 - 1)^2 / 4)
    assert float(gaussian_nll(mean, var, y)[0]) == pytest.approx(0.5 * (math.log(8 * math.pi) + 1.0), rel=1e-6)


def test_evidential_nll_is_the_student_t_marginal():
    # The NIG marginal is Student-t: df 2 alpha, location gamma, scale^2 beta (1 + nu) / (nu alpha).
    gamma, nu, alpha, beta, y = 0.3, 0.7, 2.5, 1.4, 1.9
    p = NormalInverseGamma(*(torch.tensor(v, dtype=torch.float64) for v in (gamma, nu, alpha, beta)))
    scale = math.sqrt(beta * (1 + nu) / (nu * alpha))
    expected = -stats.t.logpdf(y, df=2 * alpha, loc=gamma, scale=scale)
    assert float(evidential_nll(p, torch.tensor(y, dtype=torch.float64))) == pytest.approx(expected, rel=1e-9)
    assert float(evidential_regulariser(p, torch.tensor(y))) == pytest.approx(abs(y - gamma) * (2 * nu + alpha), rel=1e-6)
    variance = predictive_moments("evidential", torch.tensor([[gamma, inverse_softplus(nu), inverse_softplus(alpha - 1),
                                                                inverse_softplus(beta)]], dtype=torch.float64)).variance
    assert float(variance) == pytest.approx(stats.t.var(df=2 * alpha, scale=scale), rel=1e-4)


def test_head_losses_average_observed_labels_only():
    # two molecules, one target; the second label is missing (NaN) and must not count
    target = torch.tensor([[2.0], [float("nan")]])
    mask = torch.tensor([[True], [False]])
    raw = torch.tensor([[0.5, inverse_softplus(4.0)], [100.0, -50.0]])  # [B, (mean, variance) x T], T = 1
    expected = 0.5 * (math.log(2 * math.pi * 4.0) + 1.5 ** 2 / 4.0)
    assert float(head_loss("mve", raw, target, mask, UncertaintyConfig("mve"))) == pytest.approx(expected, rel=1e-4)
    nig = torch.tensor([[0.5, inverse_softplus(1.0), inverse_softplus(1.0), inverse_softplus(2.0)], [9.0, 0.0, 0.0, 0.0]])
    p = evidential_parameters(nig[:1])
    one = float(evidential_nll(p, torch.tensor([[2.0]])) + 0.1 * evidential_regulariser(p, torch.tensor([[2.0]])))
    settings = UncertaintyConfig("evidential", evidential_reg=0.1)
    assert float(head_loss("evidential", nig, target, mask, settings)) == pytest.approx(one, rel=1e-5)


def test_head_loss_trains_a_variance():
    # a free mean and log-variance fitted by the MVE loss reach the sample mean and variance
    rng = np.random.default_rng(5)
    y = torch.tensor(rng.normal(3.0, 2.0, size=(4000, 1)), dtype=torch.float32)
    params = torch.zeros(2, requires_grad=True)
    optimizer = torch.optim.LBFGS([params], lr=0.5, max_iter=200, tolerance_grad=1e-9, tolerance_change=1e-12)
    mask = torch.ones_like(y, dtype=torch.bool)

    def closure():
        optimizer.zero_grad()
        loss = head_loss("mve", params.expand(len(y), 2), y, mask, UncertaintyConfig("mve"))
        loss.backward()
        return loss

    optimizer.step(closure)
    moments = predictive_moments("mve", params.detach()[None])
    assert float(moments.mean) == pytest.approx(float(y.mean()), abs=0.02)
    assert float(moments.variance) == pytest.approx(float(y.var(unbiased=False)), rel=1e-3)


# --------------------------------------------------------------------------------------------
# MC dropout
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dropout, spread", [(0.0, False), (0.3, True)])
def test_mc_dropout_std_is_zero_without_dropout(dropout, spread):
    preset = tiny_preset("vanilla", dropout=dropout, attn_dropout=dropout)
    torch.manual_seed(0)
    model = build_model(preset.model).eval()
    batch = batch_of(dataset_for(preset.featurizer, preset.relation, 0, 8))
    out = predict_with_uncertainty(model, batch.graph, batch.relation_graph, "mc_dropout", mc_samples=8)
    if spread:
        assert bool((out.std > 0).all())
    else:
        assert torch.count_nonzero(out.std) == 0
        assert torch.allclose(out.mean, model.predict(batch.graph, batch.relation_graph), atol=1e-6)
    again = predict_with_uncertainty(model, batch.graph, batch.relation_graph, "mc_dropout", mc_samples=8)
    assert torch.equal(out.std, again.std) and not model.training  # seeded masks; mode restored


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------
def test_uncertainty_method_sets_the_model_head_and_is_saved(tmp_path):
    run = resolve_run_config(overrides=["data.targets=y", "uncertainty.method=evidential", "uncertainty.coverage=0.8"])
    assert run.model.uncertainty_head == "evidential" and run.uncertainty.coverage == 0.8
    assert resolve_run_config(run.save(tmp_path / "config.yaml")) == run
    with pytest.raises(ConfigError, match="derived from uncertainty.method"):
        resolve_run_config(overrides=["model.uncertainty_head=mve"])
    with pytest.raises(ConfigError, match="uncertainty.method must be one of"):
        UncertaintyConfig("bayes")
    with pytest.raises(ConfigError, match="for regression"):
        resolve_run_config(overrides=["data.targets=y", "model.task=classification", "uncertainty.method=mve"])


# --------------------------------------------------------------------------------------------
# prediction with a stored calibration
# --------------------------------------------------------------------------------------------
def test_predictor_applies_a_stored_regression_calibration(tmp_path):
    preset = tiny_preset("vanilla")
    model = build_model(dataclasses.replace(preset.model, uncertainty_head="mve"))
    calibration = Calibration("mve", 0.9, z_scale=[2.0], conformal=[1.5], normalised=True)
    extra = CheckpointExtras(uncertainty={**dataclasses.asdict(UncertaintyConfig("mve")), "calibration": calibration.to_dict()})
    path = save_checkpoint(tmp_path / "best.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y"], extra))
    table = Predictor(path).predict(["CCO", "c1ccccc1", "not a smiles"])
    assert list(table.columns) == ["smiles", "canonical_smiles", "y_pred", "y_std", "y_lo", "y_hi", "error", "warning"]
    g, rel = smiles_to_graphs("CCO", preset.featurizer, preset.relation)
    with torch.no_grad():
        raw = model.eval()(g, rel, distribution=True)
    std = float(torch.nn.functional.softplus(raw[0, 1]) + 1e-6) ** 0.5 * float(model.target_std[0])
    assert table["y_std"][0] == pytest.approx(2.0 * std, rel=1e-5)
    assert table["y_hi"][0] - table["y_pred"][0] == pytest.approx(1.5 * 2.0 * std, rel=1e-5)
    assert table["y_lo"][0] == pytest.approx(2 * table["y_pred"][0] - table["y_hi"][0], rel=1e-6)
    assert np.isnan(table.loc[2, ["y_pred", "y_std", "y_lo", "y_hi"]].astype(float)).all()
    plain = Predictor(path, uncertainty="none").predict(["CCO"])
    assert list(plain.columns) == ["smiles", "canonical_smiles", "y_pred", "error",
                                   "warning"] and plain["y_pred"][0] == pytest.approx(table["y_pred"][0])


def test_predictor_applies_a_stored_temperature(tmp_path):
    preset = tiny_preset("vanilla", task="classification")
    model = build_model(preset.model)
    calibration = Calibration("mc_dropout", 0.9, temperature=[3.0])
    settings = dataclasses.asdict(UncertaintyConfig("mc_dropout", mc_samples=4))
    extra = CheckpointExtras(uncertainty={**settings, "calibration": calibration.to_dict()})
    path = save_checkpoint(tmp_path / "best.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["active"], extra))
    table = Predictor(path).predict(["CCO"])
    assert list(table.columns) == ["smiles", "canonical_smiles", "active_pred", "active_std", "error", "warning"]
    g, rel = smiles_to_graphs("CCO", preset.featurizer, preset.relation)
    logit = float(model.eval()(g, rel).detach()[0, 0])  # no dropout in the tiny preset: every pass is the same
    assert table["active_pred"][0] == pytest.approx(1 / (1 + math.exp(-logit / 3.0)), rel=1e-5)
    assert table["active_std"][0] == pytest.approx(0.0, abs=1e-7)


def test_ensemble_predict_combines_spreads_and_applies_a_calibration(tmp_path):
    preset = tiny_preset("vanilla")
    paths = []
    for seed in range(2):
        torch.manual_seed(seed)
        paths.append(save_checkpoint(tmp_path / f"m{seed}.pt", build_model(preset.model),
                                     CheckpointMeta(preset.featurizer, preset.relation, ["y"])))
    predictors = [Predictor(p) for p in paths]
    members = [p.predict(["CCO", "CCN"])["y_pred"].to_numpy() for p in predictors]
    calibration = Calibration("ensemble", 0.9, z_scale=[3.0], conformal=[2.0], normalised=True)
    table = ensemble_predict(predictors, ["CCO", "CCN"], calibration=calibration)
    spread = np.std(members, axis=0)
    assert table["y_std"].to_numpy() == pytest.approx(3.0 * spread, rel=1e-6)
    assert (table["y_hi"] - table["y_pred"]).to_numpy() == pytest.approx(6.0 * spread, rel=1e-6)
    kept = ensemble_predict(predictors, pd.Series(["CCO", "CCN"], index=[7, 3]))  # a Series keeps its index
    assert kept.index.tolist() == [7, 3] and kept["y_pred"].tolist() == pytest.approx(np.mean(members, axis=0).tolist(), rel=1e-6)


# --------------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------------
def test_train_with_mve_then_predict_writes_calibrated_columns(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 60)[["smiles", "expt"]].to_csv(data, index=False)
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "2",
                                 "--batch-size", "16", "--device", "cpu", "--no-progress", "--uncertainty", "mve",
                                 "--coverage", "0.8", "--set", "data.fractions=0.6,0.2,0.2"])
    assert code == 0, err
    assert "interval coverage" in stdout
    saved = load_checkpoint(out / "best.pt")
    assert saved.model.config.uncertainty_head == "mve"
    calibration = saved.meta.extra.uncertainty["calibration"]
    assert calibration["method"] == "mve" and calibration["coverage"] == 0.8 and math.isfinite(calibration["conformal"][0])
    metrics = json.loads((out / "metrics.json").read_text())["uncertainty"]["test"]["expt"]
    assert set(metrics) == {"nll", "miscalibration_area", "spearman", "coverage", "width"}
    test = pd.read_csv(out / "test_predictions.csv")
    assert list(test.columns) == ["row", "smiles", "expt", "expt_pred", "expt_std", "expt_lo", "expt_hi"]
    inside = ((test["expt"] >= test["expt_lo"]) & (test["expt"] <= test["expt_hi"])).mean()
    assert metrics["coverage"] == pytest.approx(inside)
    assert "method: mve" in (out / "config.yaml").read_text()

    code, stdout, err = run_cli(["predict", "--checkpoint", out / "best.pt", "--input", data, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    assert {"expt_pred", "expt_std", "expt_lo", "expt_hi"} <= set(predicted.columns)
    q, scale = calibration["conformal"][0], calibration["z_scale"][0]
    assert (predicted["expt_hi"] - predicted["expt_pred"]).to_numpy() == pytest.approx(q * predicted["expt_std"].to_numpy(), rel=1e-6)
    row = test["row"][0]  # a test molecule gets the same prediction and std from both paths
    assert predicted["expt_pred"][row] == pytest.approx(test["expt_pred"][0], rel=1e-5)
    assert predicted["expt_std"][row] == pytest.approx(test["expt_std"][0], rel=1e-5)
    assert scale > 0


def test_evidential_and_mc_dropout_training_in_python(tmp_path):
    preset = tiny_preset("vanilla", dropout=0.2)
    dataset = dataset_for(preset.featurizer, preset.relation, 0, 40)
    config = TrainConfig(epochs=1, batch_size=16, progress=False, device="cpu")
    for method in ("evidential", "mc_dropout"):
        result = train_and_evaluate(dataset, preset, config, fractions=(0.5, 0.25, 0.25),
                                    uncertainty=UncertaintyConfig(method, coverage=0.8, mc_samples=4))
        assert result.model.config.uncertainty_head == ("evidential" if method == "evidential" else "none")
        assert result.calibration is not None and result.calibration.method == method
        table = result.test_predictions
        assert (table["expt_std"] > 0).all() and (table["expt_hi"] > table["expt_lo"]).all()


def test_mc_dropout_training_needs_dropout():
    preset = tiny_preset("vanilla")  # dropout 0
    dataset = dataset_for(preset.featurizer, preset.relation, 0, 24)
    with pytest.raises(ConfigError, match="dropout=0"):
        train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False), uncertainty=UncertaintyConfig("mc_dropout"))


def test_ensemble_method_needs_several_members(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 30)[["smiles", "expt"]].to_csv(data, index=False)
    assert_one_error_line(run_cli(["train", data, "--targets", "expt", "--out", tmp_path / "r", "--epochs", "1",
                                   "--uncertainty", "ensemble", "--no-progress"]), "--ensemble-size")


def test_ensemble_spread_is_calibrated_and_reloaded_for_predict(tmp_path):
    preset = tiny_preset("vanilla")
    dataset = dataset_for(preset.featurizer, preset.relation, 0, 40)
    config = TrainConfig(epochs=1, batch_size=16, progress=False, device="cpu")
    result = train_ensemble(dataset, preset, config, fractions=(0.5, 0.25, 0.25), ensemble_size=2, out_dir=tmp_path,
                            uncertainty=UncertaintyConfig("ensemble", coverage=0.8))
    (calibration,) = result.calibrations
    table = result.predictions
    members = np.stack([r.test_predictions["expt_pred"].to_numpy() for r in result.members[0]])
    assert table["expt_std"].to_numpy() == pytest.approx(calibration.z_scale[0] * members.std(0), rel=1e-6)
    half = calibration.conformal[0] * table["expt_std"].to_numpy()
    assert (table["expt_hi"] - table["expt_pred"]).to_numpy() == pytest.approx(half, rel=1e-6)
    report = json.loads((tmp_path / "ensemble_metrics.json").read_text())["uncertainty"][0]
    assert report["test"]["expt"]["coverage"] == pytest.approx(
        ((table["expt"] >= table["expt_lo"]) & (table["expt"] <= table["expt_hi"])).mean())
    assert stored_calibration([tmp_path / "replicate_0"]) == calibration
    # the ensemble's folder holds the same members: the same calibration (it gave their raw spread as the std, no interval)
    assert stored_calibration([tmp_path]) == calibration
    top, replicate = (run_cli(["predict", "--checkpoint", folder, "CCO", "c1ccccc1O"]) for folder in (tmp_path, tmp_path / "replicate_0"))
    assert top[0] == 0 and top[1] == replicate[1] and "expt_lo" in top[1]


def test_an_ensemble_of_several_replicates_is_predicted_without_a_calibration_and_says_so(tmp_path, caplog):
    folder = tmp_path / "ens"
    for replicate in (0, 1):
        (folder / f"replicate_{replicate}").mkdir(parents=True)
        calibration = Calibration("ensemble", 0.9, z_scale=[3.0 + replicate], conformal=[2.0], normalised=True)
        (folder / f"replicate_{replicate}" / "calibration.json").write_text(json.dumps(calibration.to_dict()))
    assert stored_calibration([folder]) is None
    assert "holds 2 replicates, each calibrated for its own members" in caplog.text and str(folder / "replicate_0") in caplog.text


def test_classification_gets_a_temperature_and_mc_dropout_std():
    preset = tiny_preset("vanilla", task="classification", dropout=0.2)
    frame = freesolv_rows(0, 48).assign(soluble=lambda f: (f["expt"] < -4).astype(float))
    dataset = MoleculeDataset.from_dataframe(frame, "smiles", ["soluble"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    result = train_and_evaluate(dataset, preset, TrainConfig(epochs=1, batch_size=16, progress=False, device="cpu"),
                                fractions=(0.5, 0.25, 0.25), uncertainty=UncertaintyConfig("mc_dropout", mc_samples=4))
    (temperature,) = result.calibration.temperature
    assert 0.05 <= temperature <= 20 and result.calibration.conformal is None
    table = result.test_predictions
    assert list(table.columns) == ["row", "smiles", "soluble", "soluble_pred", "soluble_std"]
    assert table["soluble_pred"].between(0, 1).all() and (table["soluble_std"] > 0).all()


def test_a_method_without_spread_on_the_calibration_part_is_one_clear_error():
    """An ensemble whose members agree exactly (the fingerprint kernel carries every member when
    the blend gives the network weight 0) has std 0 everywhere: the error says why and what to do,
    instead of z-scaling's bare complaint; one label with spread is enough to calibrate."""
    labels, mean, std = np.array([[1.0], [2.0], [3.0]]), np.array([[1.5], [1.5], [2.5]]), np.zeros((3, 1))
    with pytest.raises(ConfigError, match=r"ensemble uncertainty predicts no spread .* target 0.*members agree exactly.*"
                                          r"--kernel none"):
        fit_regression_calibration("ensemble", labels, mean, std, 0.9)
    with pytest.raises(ConfigError, match=r"mve uncertainty predicts no spread .* target 0, so it cannot be calibrated$"):
        fit_regression_calibration("mve", labels, mean, std, 0.9)
    with pytest.raises(ConfigError, match=r"mc_dropout uncertainty predicts no spread .* target 'logS'.*dropout passes agree "
                                          r"exactly.*--kernel none, or use --uncertainty mve$"):  # it said "target 0", no fix
        fit_regression_calibration("mc_dropout", labels, mean, std, 0.9, names=["logS"])
    std[1, 0] = 0.5
    assert fit_regression_calibration("ensemble", labels, mean, std, 0.9).z_scale == [pytest.approx(1.0)]
