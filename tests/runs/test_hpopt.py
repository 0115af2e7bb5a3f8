"""Hyperparameter search: spaces resolve, pruning hooks, resume, parallel trials, and the best
trial repeated exactly by ``train --config``."""
import json

import pandas as pd
import pytest

optuna = pytest.importorskip("optuna")

from cli_runner import assert_one_error_line, run_cli  # noqa: E402
from dgl_graphtx.models.variants import VARIANT_NAMES  # noqa: E402
from dgl_graphtx.runs import resolve_run_config  # noqa: E402
from dgl_graphtx.runs.hpopt import SearchSettings, as_overrides, hyperparameter_search, search_space  # noqa: E402
from dgl_graphtx.runs.hpopt.search import PruningHooks  # noqa: E402

TINY = ["--model", "vanilla", "--epochs", "3", "--device", "cpu", "--no-progress",
        "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


@pytest.mark.parametrize("variant", VARIANT_NAMES)
@pytest.mark.parametrize("end", ["low", "high"])
def test_every_search_space_resolves_at_its_ends(variant, end):
    values = {}
    for param in search_space(variant):
        if param.choices:
            values[param.key] = param.choices[0 if end == "low" else -1]
        else:
            value = param.low if end == "low" else param.high
            values[param.key] = int(value) if param.integer else value
    run = resolve_run_config(overrides=[f"preset.model={variant}", "data.targets=y", *as_overrides(values)])
    for key, value in values.items():
        section, *path = key.split(".")
        node = getattr(run, section)
        for part in path:
            node = getattr(node, part)
        assert node == value


class FakeTrial:
    def __init__(self, prune):
        self.prune, self.reports = prune, []

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return self.prune


def test_pruning_hooks_report_the_validation_metric_and_prune():
    keep = FakeTrial(prune=False)
    PruningHooks(keep, "rmse").end_epoch(2, {"epoch": 2, "train_loss": 1.0, "valid_rmse": 0.5})
    PruningHooks(keep, "rmse").end_epoch(3, {"epoch": 3, "valid_rmse": float("nan")})  # undefined: not reported
    assert keep.reports == [(2, 0.5)]
    with pytest.raises(optuna.TrialPruned):
        PruningHooks(FakeTrial(prune=True), "mae").end_epoch(1, {"valid_mae": 2.0})


def test_search_then_train_repeats_the_best_trial_exactly(search_csv, tmp_path):
    out = tmp_path / "search"
    code, stdout, stderr = run_cli(["hpopt", search_csv, "--targets", "expt", "--out", out, "--trials", "3",
                                    "--pruner", "none", *TINY])
    assert code == 0, stderr
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 3 and set(trials["state"]) == {"COMPLETE"}
    assert {"params_train.lr", "params_model.dropout", "params_relation.mode"} <= set(trials.columns)
    assert "params_model.num_layers" not in trials.columns  # fixed with --set, so not searched
    best = json.loads((out / "best_trial.json").read_text())
    assert best["valid"] == trials["value"].min()
    trial_metrics = json.loads((out / "trials" / f"trial_{best['trial']}" / "metrics.json").read_text())
    code, _, stderr = run_cli(["train", "--config", out / "config.yaml", "--out", tmp_path / "again"])
    assert code == 0, stderr
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["valid"] == trial_metrics["valid"] and again["test"] == trial_metrics["test"]
    assert again["valid"]["rmse"] == best["valid"]
    # the same folder again: refused without --resume; with it, the search continues to 4 trials
    assert_one_error_line(run_cli(["hpopt", search_csv, "--targets", "expt", "--out", out, "--trials", "4", *TINY]),
                          "--resume")
    code, _, stderr = run_cli(["hpopt", search_csv, "--targets", "expt", "--out", out, "--trials", "4", "--resume",
                               "--pruner", "none", *TINY])
    assert code == 0, stderr
    assert sorted(pd.read_csv(out / "trials.csv")["number"]) == [0, 1, 2, 3]


def test_parallel_trials_in_processes(search_csv, tmp_path):
    base = resolve_run_config(overrides=["preset.model=vanilla", "model.num_layers=1", "model.hidden_dim=16",
                                         "model.num_heads=2", "train.epochs=2", "train.device=cpu", "data.targets=expt",
                                         f"data.path={search_csv}"])
    space = [p for p in search_space("vanilla") if p.key in ("train.lr", "model.dropout")]
    result = hyperparameter_search(base, tmp_path / "par", SearchSettings(trials=2, jobs=2, pruner="none"), space=space)
    assert sorted(result.trials["number"]) == [0, 1] and set(result.trials["state"]) == {"COMPLETE"}
    assert result.best_config.train.lr == result.trials.loc[result.trials["value"].idxmin(), "params_train.lr"]


def test_a_trial_trains_as_train_does_with_its_uncertainty_and_pretrained_backbone(search_csv, tmp_path):
    """Trials used to drop uncertainty settings (coverage back to 0.9) and not resolve
    train.from_pretrained (the backbone did not fit the preset's model: every trial failed)."""
    from dgl_graphtx.checkpoint import load_checkpoint
    base = resolve_run_config(overrides=["preset.model=gradformer", "train.epochs=1", "train.device=cpu", "data.targets=expt",
                                         f"data.path={search_csv}", "uncertainty.method=mve", "uncertainty.coverage=0.8",
                                         "train.from_pretrained=gradformer-tiny-moses3k"])
    space = [p for p in search_space("gradformer") if p.key == "train.lr"]
    hyperparameter_search(base, tmp_path / "s", SearchSettings(trials=1, pruner="none"), space=space)
    best = load_checkpoint(tmp_path / "s" / "trials" / "trial_0" / "best.pt")
    assert best.meta.extra.uncertainty["coverage"] == 0.8
    assert best.meta.extra.pretrained["name"] == "gradformer-tiny-moses3k"


@pytest.mark.parametrize("resume", [False, True])
def test_a_folder_holding_something_else_is_refused(search_csv, tmp_path, resume):
    """A finished training run (or a store, or any other files) is not a search: neither --resume
    nor a new search writes into it, and the folder is left exactly as it was."""
    run = tmp_path / "run"
    code, _, stderr = run_cli(["train", search_csv, "--targets", "expt", "--out", run, "--no-cache", *TINY])
    assert code == 0, stderr
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    flag = ["--resume"] if resume else []
    line = assert_one_error_line(run_cli(["hpopt", search_csv, "--targets", "expt", "--out", run, "--trials", "1", *flag, *TINY]),
                                 str(run), "not an hpopt search")
    assert "best.pt" in line and "run.json" in line
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in run.iterdir() if p.is_dir()) == []
