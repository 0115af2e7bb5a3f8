"""Every sub-command checks its device, counts and input options with the shared helpers, at
parse time and with one error line; ``featurize`` reads tables like the other commands."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from cli_fixtures import checkpoint, data_csv, workdir  # noqa: F401  (module fixtures)
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.cli import build_parser


@pytest.mark.parametrize("argv, option, allowed", [
    (["embed", "--checkpoint", "m.pt", "--output", "e.csv", "--batch-size", "0", "CCO"], "--batch-size", "must be an integer >= 1"),
    (["embed", "--checkpoint", "m.pt", "--output", "e.csv", "--device", "tpu:7", "CCO"], "--device", "device"),
    (["plot", "focus", "--checkpoint", "m.pt", "--out", "f.png", "--device", "tpu:7"], "--device", "device"),
    (["featurize", "d.csv", "--out", "s", "--workers", "0"], "--workers", "must be an integer >= 1"),
    (["featurize", "d.csv", "--out", "s", "--shard-size", "-5"], "--shard-size", "must be an integer >= 1"),
    (["featurize", "d.csv", "--out", "s", "--delimiter", ";;"], "--delimiter", "one character"),
    (["train", "d.csv", "--targets", "y", "--out", "o", "--nproc", "0"], "--nproc", "must be an integer >= 1"),
])
def test_options_are_checked_at_parse_time(workdir, argv, option, allowed):
    assert_one_error_line(run_cli(argv), option, allowed)


def test_plot_defaults_to_the_auto_device_like_the_other_commands():
    parser = build_parser()
    plot = parser.parse_args(["plot", "focus", "--checkpoint", "m.pt", "--out", "f.png"])
    predict = parser.parse_args(["predict", "--checkpoint", "m.pt", "CCO"])
    assert plot.device == predict.device == "auto"


def test_featurize_reads_a_semicolon_table_with_its_own_smiles_column(workdir, data_csv):
    table = pd.read_csv(data_csv).rename(columns={"smiles": "mol"})
    path = workdir / "semicolon.csv"
    table.to_csv(path, sep=";", index=False)
    out = workdir / "store"
    code, _, err = run_cli(["featurize", path, "--out", out, "--targets", "expt", "--smiles-col", "mol",
                            "--delimiter", ";", "--no-progress"])
    assert code == 0, err
    assert json.loads((out / "manifest.json").read_text())["molecules"] == len(table)
