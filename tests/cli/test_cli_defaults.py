"""The command line's defaults are the library's: every option a sub-command passes to a library
function or settings class defaults to that parameter's own default (read here with ``inspect`` and
the dataclasses), so the two cannot drift apart (issue 31, point 2)."""
from __future__ import annotations

import dataclasses
import inspect

import pytest

from dgl_graphtx.cli import build_parser
from dgl_graphtx.cli.common import SMILES_COL
from dgl_graphtx.datasets import read_molecules
from dgl_graphtx.datasets.sharded_store import featurize_file, featurize_to_store
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.prediction_job import PredictionJob
from dgl_graphtx.runs.config import DataConfig
from dgl_graphtx.runs.distributed import DistributedConfig
from dgl_graphtx.runs.hpopt.search import SearchSettings
from dgl_graphtx.runs.pretraining import PretrainConfig
from dgl_graphtx.uncertainty import UncertaintyConfig


def _defaults(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not p.empty}


def _field_defaults(settings) -> dict:
    return {f.name: getattr(settings(), f.name) for f in dataclasses.fields(settings)}


@pytest.mark.parametrize("argv, library, options", [
    (["predict", "--checkpoint", "m.pt", "CCO"], _defaults(Predictor.__init__), ["batch_size", "batch_edges", "chunk_size", "device"]),
    (["embed", "--checkpoint", "m.pt", "--output", "e.npy", "CCO"], _defaults(Predictor.__init__), ["batch_size", "device"]),
    (["evaluate", "--checkpoint", "m.pt", "d.csv"], _defaults(Predictor.__init__), ["device"]),
    (["plot", "parity", "--checkpoint", "m.pt", "--out", "p.png"], _defaults(Predictor.__init__), ["device"]),
    (["train", "d.csv", "--out", "o"], {"backend": DistributedConfig().backend}, ["backend"]),
    (["featurize", "d.csv", "--out", "s"], _defaults(featurize_to_store), ["shard_size", "workers"]),
    (["featurize", "d.csv", "--out", "s"], _field_defaults(FeaturizerConfig), ["atom_features"]),
    (["pretrain", "c.smi", "--out", "o"], _field_defaults(PretrainConfig), ["mask_share", "valid_share", "workers"]),
])
def test_option_defaults_are_the_library_defaults(argv, library, options):
    parsed = vars(build_parser().parse_args(argv))
    assert {o: parsed[o] for o in options} == {o: library[o] for o in options}


def test_search_option_defaults_are_the_search_settings_defaults():
    parsed = vars(build_parser().parse_args(["hpopt", "d.csv", "--targets", "y", "--out", "s"]))
    library = _field_defaults(SearchSettings)
    options = ("trials", "timeout", "jobs", "pruner")
    assert {o: parsed[o] for o in options} == {o: library[o] for o in options}


def test_train_help_states_the_library_defaults():
    """The train options default to None (the preset, the config file and --set decide); their
    help states the settings classes' defaults, the split fractions included."""
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    helps = {a.dest: a.help for a in train._actions}
    assert "/".join(f"{f:g}" for f in DataConfig().fractions) in helps["split"]
    assert f"default: {FeaturizerConfig().atom_features}" in helps["atom_features"]


def test_the_smiles_column_used_without_smiles_col_is_the_readers_default():
    """Commands that read molecule files fall back on one column name, the library's."""
    library = {_defaults(read_molecules)["smiles_col"], _defaults(featurize_file)["smiles_col"],
               DataConfig().smiles_col, PredictionJob(["m.pt"], smiles=["C"]).smiles_col}
    assert library == {SMILES_COL}
    featurize = build_parser()._subparsers._group_actions[0].choices["featurize"]
    assert f"default: {SMILES_COL}" in {a.dest: a.help for a in featurize._actions}["smiles_col"]


def test_train_help_states_the_calibration_bins_default():
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    assert f"(default: {UncertaintyConfig().calibration_bins})" in {a.dest: a.help for a in train._actions}["calibration_bins"]
