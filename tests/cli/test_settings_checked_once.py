"""Every setting is checked in one place: an invalid value, or settings that contradict each other,
given on the command line, in a config file or in Python, are refused with the same one-line
error raised by the same line of the library (a setting's dataclass for its own range and
choices, the run's plan for the rules between settings)."""
from __future__ import annotations

import dataclasses
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple

import pytest
import torch
import yaml

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_rows

import dgl_graphtx.cli as cli
from dgl_graphtx.datasets import random_split
from dgl_graphtx.errors import GraphTxError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.inference import get_pretrained
from dgl_graphtx.models import get_preset
from dgl_graphtx.models.settings import DEFAULT_MODEL
from dgl_graphtx.runs import EnsembleConfig, PretrainConfig, RunPlan, pretrained_preset
from dgl_graphtx.runs.plan import PREDEFINED
from dgl_graphtx.training import TrainConfig
from dgl_graphtx.uncertainty import UncertaintyConfig

BACKBONE = "gradformer-tiny-moses3k"


def _tuned(**model: Any):
    """The default preset fine-tuned from :data:`BACKBONE` (with ``model`` changes)."""
    preset = pretrained_preset(get_pretrained(BACKBONE), get_preset(DEFAULT_MODEL))
    return dataclasses.replace(preset, model=dataclasses.replace(preset.model, **model)) if model else preset


class Case(NamedTuple):
    """One invalid setting: the train flags, the config-file sections and the Python call that give it."""

    flags: List[str]
    config: Dict[str, Any]
    python: Callable[[], Any]


def plan(preset: Any = None, **kwargs: Any) -> Callable[[], RunPlan]:
    """The Python call making the plan of ``kwargs`` for ``preset`` (default: the default model's)."""
    return lambda: RunPlan(preset if preset is not None else get_preset(DEFAULT_MODEL), **kwargs)


CASES = {
    # a setting's own range or choices: its dataclass
    "epochs": Case(["--epochs", "0"], {"train": {"epochs": 0}}, lambda: TrainConfig(epochs=0)),
    "lr": Case(["--lr", "11"], {"train": {"lr": 11}}, lambda: TrainConfig(lr=11.0)),
    "seed": Case(["--seed", "-1"], {"train": {"seed": -1}}, lambda: TrainConfig(seed=-1)),
    "batch-size": Case(["--batch-size", "0"], {"train": {"batch_size": 0}}, lambda: TrainConfig(batch_size=0)),
    "patience": Case(["--patience", "-2"], {"train": {"patience": -2}}, lambda: TrainConfig(patience=-2)),
    "threads": Case(["--threads", "0"], {"train": {"threads": 0}}, lambda: TrainConfig(threads=0)),
    "freeze": Case(["--freeze-backbone-epochs", "-1"], {"train": {"freeze_backbone_epochs": -1}},
                   lambda: TrainConfig(freeze_backbone_epochs=-1)),
    "backbone-lr-scale": Case(["--backbone-lr-scale", "2000"], {"train": {"backbone_lr_scale": 2000}},
                              lambda: TrainConfig(backbone_lr_scale=2000.0)),
    "layer-lr-decay": Case(["--layer-lr-decay", "0"], {"train": {"layer_lr_decay": 0}}, lambda: TrainConfig(layer_lr_decay=0.0)),
    "pos-weight": Case(["--pos-weight", "-1"], {"train": {"pos_weight": -1}}, lambda: TrainConfig(pos_weight=-1.0)),
    "loss": Case(["--loss", "hinge"], {"train": {"loss": "hinge"}}, lambda: TrainConfig(loss="hinge")),
    "on-nonfinite": Case(["--on-nonfinite", "ignore"], {"train": {"on_nonfinite": "ignore"}}, lambda: TrainConfig(on_nonfinite="ignore")),
    "calibration-share": Case(["--uncertainty", "mve", "--calibration-share", "1.5"],
                              {"uncertainty": {"method": "mve", "calibration_share": 1.5}},
                              lambda: UncertaintyConfig("mve", calibration_share=1.5)),
    "coverage": Case(["--uncertainty", "mve", "--coverage", "1"], {"uncertainty": {"method": "mve", "coverage": 1}},
                     lambda: UncertaintyConfig("mve", coverage=1.0)),
    "mc-samples": Case(["--uncertainty", "mc_dropout", "--mc-samples", "1"], {"uncertainty": {"method": "mc_dropout", "mc_samples": 1}},
                       lambda: UncertaintyConfig("mc_dropout", mc_samples=1)),
    "uncertainty": Case(["--uncertainty", "bayes"], {"uncertainty": {"method": "bayes"}}, lambda: UncertaintyConfig("bayes")),
    "calibration-bins": Case(["--calibration-bins", "scaffold"], {"uncertainty": {"calibration_bins": "scaffold"}},
                             lambda: UncertaintyConfig(calibration_bins="scaffold")),
    "ensemble-size": Case(["--ensemble-size", "0"], {"ensemble": {"size": 0}}, lambda: EnsembleConfig(size=0)),
    "task": Case(["--task", "ranking"], {"model": {"task": "ranking"}}, lambda: get_preset(DEFAULT_MODEL, task="ranking")),
    "num-classes": Case(["--task", "multiclass", "--num-classes", "1"], {"model": {"task": "multiclass", "num_classes": 1}},
                        lambda: get_preset(DEFAULT_MODEL, task="multiclass", num_classes=1)),
    "atom-features": Case(["--atom-features", "smiles"], {"featurizer": {"atom_features": "smiles"}},
                          lambda: FeaturizerConfig(atom_features="smiles")),
    "model": Case(["--model", "transformer-xl"], {"preset": {"model": "transformer-xl"}}, lambda: get_preset("transformer-xl")),
    "preset": Case(["--preset", "huge"], {"preset": {"name": "huge"}}, lambda: get_preset(DEFAULT_MODEL, "huge")),
    "split": Case(["--split", "alphabetical"], {"data": {"split": "alphabetical"}}, plan(split="alphabetical")),
    "fractions not summing to 1": Case(["--set", "data.fractions=0.8,0.1,0.2"], {"data": {"fractions": [0.8, 0.1, 0.2]}},
                                       lambda: random_split(10, (0.8, 0.1, 0.2))),
    "fractions with nan": Case(["--set", "data.fractions=nan,0.1,0.1"], {"data": {"fractions": [float("nan"), 0.1, 0.1]}},
                               lambda: random_split(10, (float("nan"), 0.1, 0.1))),
    "device": Case(["--device", "tpu:7"], {"train": {"device": "tpu:7"}}, plan(train=TrainConfig(device="tpu:7"))),
    # rules between settings: the run's plan
    "calibration-share without a method": Case(["--calibration-share", "0.2"], {"uncertainty": {"calibration_share": 0.2}},
                                               plan(uncertainty=UncertaintyConfig(calibration_share=0.2))),
    "coverage without a method": Case(["--coverage", "0.8"], {"uncertainty": {"coverage": 0.8}},
                                      plan(uncertainty=UncertaintyConfig(coverage=0.8))),
    "bins without a method": Case(["--calibration-bins", "similarity"], {"uncertainty": {"calibration_bins": "similarity"}},
                                  plan(uncertainty=UncertaintyConfig(calibration_bins="similarity"))),
    "calibration file without a method": Case(["--calibration", "{data}"], {"data": {"calibration": "{data}"}},
                                              plan(calibration_given=True)),
    "calibration file and share": Case(["--uncertainty", "mve", "--calibration", "{data}", "--calibration-share", "0.2"],
                                       {"uncertainty": {"method": "mve", "calibration_share": 0.2}, "data": {"calibration": "{data}"}},
                                       plan(uncertainty=UncertaintyConfig("mve", calibration_share=0.2), calibration_given=True)),
    "bins of classification": Case(["--task", "classification", "--uncertainty", "mc_dropout", "--calibration-bins", "similarity"],
                                   {"model": {"task": "classification"},
                                    "uncertainty": {"method": "mc_dropout", "calibration_bins": "similarity"}},
                                   plan(preset=get_preset(DEFAULT_MODEL, task="classification"),
                                        uncertainty=UncertaintyConfig("mc_dropout", calibration_bins="similarity"))),
    "bins of an ensemble": Case(["--uncertainty", "mve", "--calibration-bins", "similarity", "--ensemble-size", "2"],
                                {"uncertainty": {"method": "mve", "calibration_bins": "similarity"}, "ensemble": {"size": 2}},
                                plan(uncertainty=UncertaintyConfig("mve", calibration_bins="similarity"), ensemble=EnsembleConfig(2))),
    "spread of one model": Case(["--uncertainty", "ensemble"], {"uncertainty": {"method": "ensemble"}},
                                plan(uncertainty=UncertaintyConfig("ensemble"))),
    "dropout without dropout": Case(["--uncertainty", "mc_dropout", "--set", "model.dropout=0", "model.attn_dropout=0"],
                                    {"uncertainty": {"method": "mc_dropout"}, "model": {"dropout": 0.0, "attn_dropout": 0.0}},
                                    plan(preset=get_preset(DEFAULT_MODEL, dropout=0.0, attn_dropout=0.0),
                                         uncertainty=UncertaintyConfig("mc_dropout"))),
    "two folds": Case(["--cv", "2"], {"data": {"cv": 2}}, plan(folds=2)),
    "folds of kennard-stone": Case(["--cv", "3", "--split", "kennard_stone"], {"data": {"cv": 3, "split": "kennard_stone"}},
                                   plan(folds=3, split="kennard_stone")),
    "folds and a calibration file": Case(["--cv", "3", "--uncertainty", "mve", "--calibration", "{data}"],
                                         {"data": {"cv": 3, "calibration": "{data}"}, "uncertainty": {"method": "mve"}},
                                         plan(folds=3, uncertainty=UncertaintyConfig("mve"), calibration_given=True)),
    "folds of an ensemble": Case(["--cv", "3", "--ensemble-size", "2"], {"data": {"cv": 3}, "ensemble": {"size": 2}},
                                 plan(folds=3, ensemble=EnsembleConfig(2))),
    "multiclass ensemble": Case(["--task", "multiclass", "--num-classes", "3", "--ensemble-size", "2"],
                                {"model": {"task": "multiclass", "num_classes": 3}, "ensemble": {"size": 2}},
                                plan(preset=get_preset(DEFAULT_MODEL, task="multiclass", num_classes=3), ensemble=EnsembleConfig(2))),
    "replicates of a split column": Case(["--split-col", "part", "--replicates", "2"],
                                         {"data": {"split_col": "part"}, "ensemble": {"replicates": 2}},
                                         plan(split=PREDEFINED, ensemble=EnsembleConfig(replicates=2))),
    "loss of another task": Case(["--loss", "bce"], {"train": {"loss": "bce"}}, plan(train=TrainConfig(loss="bce"))),
    "positive weight of regression": Case(["--pos-weight", "2"], {"train": {"pos_weight": 2}}, plan(train=TrainConfig(pos_weight=2.0))),
    "task weights": Case(["--task-weights", "1,2"], {"train": {"task_weights": [1, 2]}},
                         plan(train=TrainConfig(task_weights=(1.0, 2.0)), targets=("expt",))),
    "feature naming a target": Case(["--features-cols", "expt"], {"data": {"features_cols": ["expt"]}},
                                    plan(targets=("expt",), feature_columns=("expt",))),
    "freezing without a backbone": Case(["--freeze-backbone-epochs", "2"], {"train": {"freeze_backbone_epochs": 2}},
                                        plan(train=TrainConfig(freeze_backbone_epochs=2))),
    "freezing every epoch": Case(["--from-pretrained", BACKBONE, "--freeze-backbone-epochs", "3", "--epochs", "3"],
                                 {"train": {"from_pretrained": BACKBONE, "freeze_backbone_epochs": 3, "epochs": 3}},
                                 lambda: RunPlan(_tuned(), TrainConfig(epochs=3, freeze_backbone_epochs=3, from_pretrained=BACKBONE))),
    "another model than the backbone": Case(["--from-pretrained", BACKBONE, "--model", "grpe"],
                                            {"train": {"from_pretrained": BACKBONE}, "preset": {"model": "grpe"}},
                                            plan(preset=get_preset("grpe"), train=TrainConfig(from_pretrained=BACKBONE))),
    "another architecture than the backbone": Case(["--from-pretrained", BACKBONE, "--set", "model.num_layers=3"],
                                                   {"train": {"from_pretrained": BACKBONE}, "model": {"num_layers": 3}},
                                                   lambda: RunPlan(_tuned(num_layers=3), TrainConfig(from_pretrained=BACKBONE))),
}


def _where(err: BaseException):
    """The file, function and line that raised ``err``."""
    frame = traceback.extract_tb(err.__traceback__)[-1]
    return Path(frame.filename).name, frame.name, frame.lineno


def _cli_error(monkeypatch, argv) -> BaseException:
    """Run the command line and return the exception it reported as its one ``error:`` line."""
    seen = []
    report = cli.report_user_error

    def keep(message, *args, **kwargs):
        seen.append(sys.exc_info()[1])
        return report(message, *args, **kwargs)

    monkeypatch.setattr(cli, "report_user_error", keep)
    line = assert_one_error_line(run_cli(argv))
    assert len(seen) == 1 and line == f"error: {seen[0]}", (line, seen)
    return seen[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("settings") / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(path, index=False)
    return path


def _with_data(value: Any, data: Path) -> Any:
    if isinstance(value, dict):
        return {k: _with_data(v, data) for k, v in value.items()}
    return str(data) if value == "{data}" else value


@pytest.mark.parametrize("name", list(CASES))
def test_an_invalid_setting_is_refused_by_one_line_of_the_library_whichever_way_it_comes(name, data, tmp_path, monkeypatch):
    case = CASES[name]
    with pytest.raises(GraphTxError) as python:
        case.python()
    flags = [str(data) if flag == "{data}" else flag for flag in case.flags]
    from_flags = _cli_error(monkeypatch, ["train", data, "--targets", "expt", "--out", tmp_path / "flags", *flags])
    config = _with_data(case.config, data)
    config["data"] = {"path": str(data), "targets": ["expt"], **config.get("data", {})}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    from_file = _cli_error(monkeypatch, ["train", "--config", path, "--out", tmp_path / "file"])
    assert str(from_flags) == str(from_file) == str(python.value)
    assert _where(from_flags) == _where(from_file) == _where(python.value)
    assert not (tmp_path / "flags").exists() and not (tmp_path / "file").exists()  # refused before any work


def test_every_train_flag_with_a_range_or_choices_is_among_the_cases():
    """The command line restates no range: a flag setting a bounded or chosen field is one of the
    cases above, so its check is shown to be the library's."""
    from dgl_graphtx.cli.common import TRAIN_FLAGS
    given = {flag for case in CASES.values() for flag in case.flags if flag.startswith("--")}
    checked = {"--epochs", "--lr", "--seed", "--batch-size", "--patience", "--threads", "--freeze-backbone-epochs",
               "--backbone-lr-scale", "--layer-lr-decay", "--pos-weight", "--loss", "--on-nonfinite", "--calibration-share",
               "--coverage", "--mc-samples", "--uncertainty", "--calibration-bins", "--ensemble-size", "--task", "--num-classes",
               "--atom-features", "--model", "--preset", "--split", "--device", "--cv"}
    assert checked <= given <= {flag for flag, _, _ in TRAIN_FLAGS} | {"--set"}
    for flag, _, kwargs in TRAIN_FLAGS:
        assert "choices" not in kwargs and "type" not in kwargs, flag  # the library checks them


@pytest.mark.parametrize("option, value, python", [
    ("--mask-share", "1", lambda: PretrainConfig(mask_share=1.0)),  # the CLI allowed [0, 1], the library [0, 1)
    ("--valid-share", "1", lambda: PretrainConfig(valid_share=1.0)),
    ("--atom-mask-share", "0", lambda: PretrainConfig(atom_mask_share=0.0)),
    ("--subset", "1", lambda: PretrainConfig(subset=1)),
    ("--objective", "masked", lambda: PretrainConfig(objective="masked")),
])
def test_pretraining_settings_are_checked_by_their_dataclass(option, value, python, data, tmp_path, monkeypatch):
    with pytest.raises(GraphTxError) as expected:
        python()
    got = _cli_error(monkeypatch, ["pretrain", data, "--out", tmp_path / "p", option, value])
    assert str(got) == str(expected.value) and _where(got) == _where(expected.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_an_unavailable_device_is_refused_by_the_plan(data, tmp_path, monkeypatch):
    got = _cli_error(monkeypatch, ["train", data, "--targets", "expt", "--out", tmp_path / "o", "--device", "cuda"])
    assert "CUDA is not available" in str(got) and _where(got)[0] == "devices.py"


@pytest.mark.parametrize("command, extra, message", [
    ("train", ["--overwrite", "--resume"], "--overwrite replaces the run in the output folder and --resume continues it; give one of them"),
    ("train", ["--cv", "3", "--resume"],
     "--resume continues a single run; ensembles (--ensemble-size/--replicates) and --cv cannot resume"),
    ("train", ["--ensemble-size", "2", "--resume"], "--resume continues a single run"),
    ("pretrain", ["--overwrite", "--resume"], "--overwrite replaces the run in the output folder and --resume continues it"),
])
def test_run_modes_that_contradict_each_other_or_the_settings_are_refused_before_any_work(command, extra, message, data, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.json").write_text("{}")  # a run that --overwrite would delete
    argv = [command, data, "--out", out, *(["--targets", "expt"] if command == "train" else []), *extra]
    assert_one_error_line(run_cli(argv), message)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json"]
