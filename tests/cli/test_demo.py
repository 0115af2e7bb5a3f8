"""``dgl-graphtx demo`` is ``dgl-graphtx train`` with its defaults: the run it writes has exactly the
configuration that ``train`` resolves when given only the data, the target and the output."""
from __future__ import annotations

import dataclasses

from cli_runner import run_cli

from dgl_graphtx.datasets import freesolv_path
from dgl_graphtx.runs import resolve_run_config
from dgl_graphtx.threads import resolve_threads


def test_demo_runs_train_with_its_defaults(tmp_path):
    out = tmp_path / "demo"
    code, stdout, _ = run_cli(["demo", "--out", out, "--epochs", "1", "--seed", "3"])
    assert code == 0
    assert "predictions (kcal/mol)" in stdout and (out / "best.pt").exists()
    demo = resolve_run_config(out / "config.yaml")
    # the CLI resolves the thread count (train.threads) where Python leaves it to torch
    train_defaults = resolve_run_config(overrides=[f"data.path={freesolv_path()}", "data.targets=expt", "train.epochs=1", "train.seed=3",
                                                   f"train.threads={resolve_threads()}"])
    # the demo's config.yaml holds absolute paths, as every run's does
    train_defaults = dataclasses.replace(train_defaults, data=dataclasses.replace(train_defaults.data, path=str(freesolv_path().resolve())))
    assert demo == train_defaults
