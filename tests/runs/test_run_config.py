"""Run configuration: every field settable from TOML/YAML and --set, the resolution order
(defaults < preset < file < --set < flags), derived and linked fields, errors, and the saved
config.yaml reproducing a run through the CLI."""
from __future__ import annotations

import dataclasses
import json
import typing

import pandas as pd
import pytest
import yaml

from conftest_models import freesolv_rows

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import ModelConfig, get_preset
from dgl_graphtx.models.settings import DEFAULT_MODEL
from dgl_graphtx.relation_graph import RelationConfig
from dgl_graphtx.runs import DataConfig, EnsembleConfig, PresetChoice, resolve_run_config
from dgl_graphtx.runs.config import DERIVED_MODEL_FIELDS, DERIVED_MODEL_SECTIONS
from dgl_graphtx.training import TrainConfig
from cli_runner import run_cli
from dgl_graphtx.featurize.descriptors import feature_names
from dgl_graphtx.datasets.readers import read_molecule_csv

#: The width of the descriptors ``data.features_generators=auto`` gives a molecule file with targets.
DESCRIPTORS = len(feature_names(["rdkit2d"]))

#: key -> (text given to --set, expected value, companion overrides needed for a valid config)
ALTERNATIVES = {
    "preset.model": ("moire", "moire", []),
    "preset.name": ("molhiv", "molhiv", []),
    "data.path": ("x.csv", "x.csv", []),
    "data.targets": ("a,b", ("a", "b"), []),
    "data.smiles_col": ("SMI", "SMI", []),
    "data.positive_label": ("BBB+", "BBB+", []),
    "train.pos_weight": ("auto", "auto", []),
    "data.delimiter": (";", ";", []),
    "data.split": ("scaffold", "scaffold", []),
    "data.fractions": ("0.7,0.2,0.1", (0.7, 0.2, 0.1), []),
    "data.split_col": ("part", "part", []),
    "data.valid": ("v.csv", "v.csv", ["data.test=t.csv"]),
    "data.test": ("t.csv", "t.csv", ["data.valid=v.csv"]),
    "data.calibration": ("c.csv", "c.csv", ["uncertainty.method=mve"]),
    "data.cache_dir": ("cache", "cache", []),
    "data.cache": ("false", False, []),
    "data.cv": ("5", 5, []),
    "data.group_col": ("series", "series", ["data.cv=3"]),
    "data.weight_col": ("w", "w", []),
    "data.subset": ("5", 5, ["data.path=qm9"]),
    "data.features_generators": ("rdkit2d,morgan_counts:radius=1", ("rdkit2d", "morgan_counts:radius=1"), []),
    "data.features_cols": ("a,b", ("a", "b"), []),
    "data.atom_properties": ("q", ("q",), []),
    "data.features_scaling": ("robust", "robust", []),
    "data.max_atoms": ("2000", 2000, []),
    "data.kernel": ("morgan_counts:radius=3:size=1024", "morgan_counts:radius=3:size=1024", []),
    "model.num_layers": ("6", 6, []),
    "model.hidden_dim": ("32", 32, []),
    "model.num_heads": ("4", 4, []),
    "model.ffn_dim": ("128", 128, []),
    "model.dropout": ("0.25", 0.25, []),
    "model.attn_dropout": ("0", 0.0, []),
    "model.readout": ("sum", "sum", []),
    "model.virtual_node": ("false", False, ["model.readout=mean"]),
    "model.task": ("classification", "classification", []),
    "model.num_classes": ("4", 4, ["model.task=multiclass"]),
    "model.rwse_steps": ("8", 8, []),
    "model.input_mlp": ("yes", True, []),
    "model.head_layers": ("2", 2, []),
    "model.molecule_features": ("1", 1, ["data.features_cols=a"]),  # follows the extra features
    "model.atom_extra_features": ("1", 1, ["data.atom_properties=q"]),
    "model.atom_reference": ("true", True, []),
    "model.grpe.max_distance": ("3", 3, ["preset.model=grpe"]),
    "model.grpe.mode": ("reference", "reference", ["preset.model=grpe"]),
    "model.grpe.share_encodings": ("false", False, ["preset.model=grpe"]),
    "model.moire.focus": ("laplacian", "laplacian", ["preset.model=moire"]),
    "model.moire.distance": ("dist", "dist", ["preset.model=moire"]),
    "model.moire.mode": ("reference", "reference", ["preset.model=moire"]),
    "model.moire.max_shift": ("6", 6.0, ["preset.model=moire"]),
    "model.moire.init_width": ("1.5", 1.5, ["preset.model=moire"]),
    "model.moire.rbf": ("16", 16, ["preset.model=moire"]),
    "model.moire.rbf_cutoff": ("6", 6.0, ["preset.model=moire"]),
    "model.gradformer.mode": ("decay", "decay", ["preset.model=gradformer"]),
    "model.gradformer.decay": ("0.7", 0.7, ["preset.model=gradformer"]),
    "model.gradformer.learn_decay": ("true", True, ["preset.model=gradformer"]),
    "model.gradformer.init_start": ("1", 1.0, ["preset.model=gradformer"]),
    "model.gradformer.share_start": ("false", False, ["preset.model=gradformer"]),
    "model.gradformer.slope": ("0.2", 0.2, ["model.gradformer.mode=reference", "preset.model=gradformer"]),
    "model.architecture": ("gps", "gps", ["preset.model=gradformer"]),
    "model.gps.norm": ("layer", "layer", ["preset.model=gradformer"]),
    "model.gps.local_model": ("gatedgcn", "gatedgcn", ["preset.model=gradformer"]),
    "model.gps.pe_gate": ("true", True, ["model.gps.local_model=gatedgcn", "preset.model=gradformer"]),
    "model.rwse_norm": ("true", True, ["featurizer.rwse_steps=4"]),
    "model.graphormer.max_distance": ("7", 7, ["preset.model=graphormer"]),
    "featurizer.atom_features": ("canonical", "canonical", []),
    "featurizer.explicit_hydrogens": ("true", True, []),
    "featurizer.coordinates": ("etkdg", "etkdg", []),
    "featurizer.mmff": ("true", True, []),
    "featurizer.embed_seed": ("7", 7, []),
    "featurizer.rwse_steps": ("4", 4, []),
    "relation.mode": ("hops", "hops", ["relation.hops=2"]),
    "relation.hops": ("3", 3, ["relation.mode=hops"]),
    "relation.radius": ("4.5", 4.5, ["relation.mode=radius", "featurizer.coordinates=auto"]),
    "relation.virtual_node": ("false", False, ["model.readout=max"]),
    "relation.spd_cap": ("8", 8, ["relation.mode=radius", "relation.radius=4.5", "featurizer.coordinates=auto"]),
    "train.epochs": ("3", 3, []),
    "train.batch_size": ("8", 8, []),
    "train.lr": ("1e-3", 1e-3, []),
    "train.weight_decay": ("0", 0.0, []),
    "train.schedule": ("cosine", "cosine", []),
    "train.warmup_epochs": ("2", 2, []),
    "train.final_lr_ratio": ("0.1", 0.1, []),
    "train.grad_clip": ("1", 1.0, []),
    "train.patience": ("9", 9, []),
    "train.seed": ("11", 11, []),
    "train.device": ("cpu", "cpu", []),
    "train.compute": ("tensors", "tensors", []),
    "train.num_workers": ("1", 1, []),
    "train.progress": ("false", False, []),
    "train.on_nonfinite": ("skip", "skip", []),
    "train.loss": ("huber", "huber", []),
    "train.metrics": ("mae,rmse", ("mae", "rmse"), []),
    "train.task_weights": ("2,0.5", (2.0, 0.5), []),
    "train.from_pretrained": ("gradformer-tiny-moses3k", "gradformer-tiny-moses3k", []),
    "train.freeze_backbone_epochs": ("2", 2, []),
    "train.backbone_lr_scale": ("0.1", 0.1, []),
    "train.layer_lr_decay": ("0.8", 0.8, []),
    "train.threads": ("2", 2, []),
    "train.batch_edges": ("5000", 5000, []),
    "train.step_mode": ("compiled", "compiled", []),
    "train.size_buckets": ("4", 4, []),
    "ensemble.size": ("5", 5, []),
    "ensemble.replicates": ("3", 3, []),
    "data.smiles_cols": ("a,b", ("a", "b"), []),
    "data.reaction_cols": ("r", ("r",), ["data.smiles_cols=r,s"]),
    "data.mixture_weights": ("x,y", ("x", "y"), ["data.smiles_cols=a,b", "model.molecules.combine=sum"]),
    "data.atom_targets": ("q", ("q",), []),
    "data.bond_targets": ("order", ("order",), []),
    "data.atom_index": ("map", "map", ["data.atom_targets=q"]),
    "data.atom_sums": ("q=formal_charge", ("q=formal_charge",), ["data.atom_targets=q"]),
    "model.molecules.backbones": ("separate", "separate", ["data.smiles_cols=a,b"]),
    "model.molecules.combine": ("sum", "sum", []),
}


def _settable_fields(prefix: str, cls: type) -> typing.Iterator[str]:
    for f in dataclasses.fields(cls):
        if cls is ModelConfig and f.name in DERIVED_MODEL_FIELDS:
            continue
        if f.name in DERIVED_MODEL_SECTIONS.get(prefix.split(".")[-1], ()) and prefix.startswith("model."):
            continue
        hint = typing.get_type_hints(cls)[f.name]
        if dataclasses.is_dataclass(hint):
            yield from _settable_fields(f"{prefix}.{f.name}", hint)
        else:
            yield f"{prefix}.{f.name}"


def _value(run, key):
    node = run
    for part in key.split("."):
        node = getattr(node, part)
    return node


def test_the_alternatives_cover_every_field():
    fields = set()
    for section, cls in [("preset", PresetChoice), ("data", DataConfig), ("model", ModelConfig),
                         ("featurizer", FeaturizerConfig), ("relation", RelationConfig), ("train", TrainConfig),
                         ("ensemble", EnsembleConfig)]:
        fields |= set(_settable_fields(section, cls))
    assert fields == set(ALTERNATIVES)


@pytest.mark.parametrize("key", sorted(ALTERNATIVES))
def test_every_field_is_settable_with_set_and_from_a_file(key, tmp_path):
    text, expected, companions = ALTERNATIVES[key]
    run = resolve_run_config(overrides=[f"{key}={text}", *companions])
    assert _value(run, key) == expected
    # the same through a YAML file (values typed as YAML types them)
    tree: dict = {}
    for item in [f"{key}={text}", *companions]:
        k, v = item.split("=", 1)
        node = tree
        parts = k.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = yaml.safe_load(v) if "," not in v else v
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(tree))
    assert _value(resolve_run_config(path), key) == expected


def test_resolution_order_defaults_preset_file_set_flags(tmp_path):
    assert resolve_run_config(overrides=["preset.model=grpe"]).model.readout == get_preset("grpe").model.readout == "virtual"
    assert resolve_run_config(overrides=["preset.model=moire"]).model.readout == "max"  # preset beats default
    toml = tmp_path / "run.toml"
    toml.write_text('[preset]\nmodel = "moire"\n[model]\nreadout = "sum"\nnum_layers = 2\n[train]\nepochs = 5\nlr = 0.002\n')
    run = resolve_run_config(toml)
    assert (run.model.readout, run.model.num_layers, run.train.epochs) == ("sum", 2, 5)  # file beats preset
    run = resolve_run_config(toml, ["model.readout=mean", "train.epochs=6"])
    assert (run.model.readout, run.train.epochs, run.train.lr) == ("mean", 6, 0.002)  # --set beats file
    run = resolve_run_config(toml, ["model.readout=mean", "train.epochs=6"], {"train.epochs": 7, "preset.model": "graphormer"})
    assert (run.train.epochs, run.model.variant, run.model.readout) == (7, "graphormer", "mean")  # flags beat --set
    # later --set wins over earlier
    assert resolve_run_config(overrides=["train.epochs=2", "train.epochs=4"]).train.epochs == 4


def test_toml_and_yaml_agree_and_match_get_preset(tmp_path):
    toml = tmp_path / "a.toml"
    toml.write_text('relation = "hops=3"\n[preset]\nmodel = "moire"\nname = "3d"\n[model.moire]\nfocus = "cauchy"\n'
                    '[data]\ntargets = ["y1", "y2"]\n')
    yml = tmp_path / "a.yml"
    yml.write_text("preset: {model: moire, name: 3d}\nrelation: hops=3\nmodel: {moire: {focus: cauchy}}\ndata: {targets: [y1, y2]}\n")
    a, b = resolve_run_config(toml), resolve_run_config(yml)
    assert a == b
    reference = get_preset("moire", "3d", num_tasks=2)
    assert a.model == dataclasses.replace(reference.model, moire=dataclasses.replace(reference.model.moire, focus="cauchy"),
                                          molecule_features=DESCRIPTORS)  # data.features_generators=auto: rdkit2d
    assert a.featurizer == reference.featurizer
    assert a.relation == RelationConfig("hops", hops=3)


def test_derived_and_linked_fields():
    run = resolve_run_config(overrides=["featurizer.atom_features=canonical", "data.targets=a,b,c"])
    ref = get_preset(DEFAULT_MODEL, num_tasks=3, atom_features="canonical")
    assert run.model == dataclasses.replace(ref.model, molecule_features=DESCRIPTORS) and run.featurizer == ref.featurizer
    assert resolve_run_config(overrides=["model.rwse_steps=8"]).featurizer.rwse_steps == 8
    assert resolve_run_config(overrides=["featurizer.rwse_steps=8"]).model.rwse_steps == 8
    run = resolve_run_config(overrides=["relation.virtual_node=false", "model.readout=mean"])
    assert run.model.virtual_node is False and run.relation.virtual_node is False
    with pytest.raises(ConfigError, match="model.rwse_steps=8 but featurizer.rwse_steps=4"):
        resolve_run_config(overrides=["model.rwse_steps=8", "featurizer.rwse_steps=4"])
    with pytest.raises(ConfigError, match="model.num_tasks is derived from data.targets"):
        resolve_run_config(overrides=["model.num_tasks=2"])
    with pytest.raises(ConfigError, match="model.variant is derived from preset.model"):
        resolve_run_config(overrides=["model.variant=moire"])
    with pytest.raises(ConfigError, match=r"model.kernel_probabilities is derived from the fitted kernel \(data.kernel\) and the task"):
        resolve_run_config(overrides=["model.kernel_probabilities=true"])
    with pytest.raises(ConfigError, match=r"model.kernel_logit_blend is derived from the fitted kernel \(data.kernel\) and the task"):
        resolve_run_config(overrides=["model.kernel_logit_blend=true"])


@pytest.mark.parametrize("overrides,message", [
    (["model.num_layer=3"], "unknown setting model.num_layer"),
    (["model.num_layers=three"], "model.num_layers must be an integer"),
    (["preset.model=moire", "model.moire.focus=square"], "moire.focus must be one of"),
    (["train.progress=maybe"], "train.progress must be true or false"),
    (["models.num_layers=3"], "must start with one of"),
    (["train.epochs"], "section.field=value"),
    (["relation=hops"], "cannot parse relation spec"),
    (["data.fractions=0.5,0.5"], "data.fractions must be a list of 3 numbers"),
    (["preset.name=huge"], f"unknown preset 'huge' for {DEFAULT_MODEL}"),
])
def test_config_mistakes_are_clear_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_run_config(overrides=overrides)


def test_config_file_mistakes(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nnum_layers = 2\n")
    with pytest.raises(ConfigError, match="cannot parse config file .*bad.toml"):
        resolve_run_config(bad)
    other = tmp_path / "x.yaml"
    other.write_text("modle: {num_layers: 2}\n")
    with pytest.raises(ConfigError, match=r"unknown section\(s\) \['modle'\]"):
        resolve_run_config(other)
    with pytest.raises(ConfigError, match="config file not found"):
        resolve_run_config(tmp_path / "absent.toml")




def test_cli_writes_the_resolved_config_and_it_reproduces_the_run(tmp_path, monkeypatch):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(data, index=False)
    toml = tmp_path / "run.toml"
    toml.write_text('[preset]\nmodel = "moire"\n[model]\nnum_layers = 1\nhidden_dim = 16\nnum_heads = 2\n'
                    '[model.moire]\nfocus = "laplacian"\n[train]\nepochs = 3\nbatch_size = 8\n')
    monkeypatch.chdir(tmp_path)  # relative paths resolve against the working folder and are saved absolute
    code, _, err = run_cli(["train", "d.csv", "--targets", "expt", "--config", toml, "--set", "relation=hops=3",
                         "train.lr=0.002", "--epochs", "2", "--device", "cpu", "--no-progress", "--out", "first"])
    assert code == 0, err
    saved = yaml.safe_load((tmp_path / "first" / "config.yaml").read_text())
    assert saved["data"]["path"] == str(data) and saved["data"]["targets"] == ["expt"]
    assert saved["preset"]["model"] == "moire" and saved["model"]["moire"]["focus"] == "laplacian"
    assert saved["relation"] == {"mode": "hops", "hops": 3, "radius": None, "virtual_node": False, "spd_cap": None}
    assert (saved["train"]["epochs"], saved["train"]["lr"]) == (2, 0.002)
    model = Predictor(tmp_path / "first" / "best.pt", device="cpu").model
    assert (model.config.num_layers, model.config.moire.focus) == (1, "laplacian")

    code, _, err = run_cli(["train", "--config", tmp_path / "first" / "config.yaml", "--out", tmp_path / "second"])
    assert code == 0, err
    assert (tmp_path / "second" / "config.yaml").read_text() == (tmp_path / "first" / "config.yaml").read_text()
    first, second = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("first", "second"))
    first.pop("run_id"), second.pop("run_id")  # each run has its own identity
    assert first == second
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "first" / "log.csv").drop(columns="seconds"),
                                  pd.read_csv(tmp_path / "second" / "log.csv").drop(columns="seconds"))


def test_train_help_lists_presets_and_the_resolution_order():
    code, stdout, _ = run_cli(["train", "--help"])
    assert code == 0
    assert "defaults < preset < --config file < --set KEY=VALUE < explicit flags" in stdout
    assert "docs/configuration.md" in stdout
    for line in ("grpe: tiny (default), small", "moire: 2d (default), 3d", "gradformer: default (default)"):
        assert line in stdout


def test_the_preset_layer_carries_the_presets_training_recipe(tmp_path):
    """defaults < preset (its recipe included) < config file < --set < flags, for training fields too."""
    molhiv = ["preset.model=gradformer", "preset.name=molhiv"]
    run = resolve_run_config(overrides=molhiv)
    assert (run.train.lr, run.train.batch_size, run.train.weight_decay) == (1e-4, 32, 1e-5)  # recipe beats defaults
    assert run.model.gps.local_model == "gatedgcn" and run.model.gradformer.slope == 0.2
    # the GPS settings under their name before the model.gps section still set them
    old = resolve_run_config(overrides=["preset.model=gradformer", "model.gradformer.local_model=gatedgcn"])
    assert old.model.gps.local_model == "gatedgcn"
    toml = tmp_path / "r.toml"
    toml.write_text("[train]\nlr = 0.003\n")
    assert resolve_run_config(toml, molhiv).train.lr == 0.003  # file beats the recipe
    assert resolve_run_config(toml, molhiv, {"train.batch_size": 8}).train.batch_size == 8  # flag beats it too
    assert resolve_run_config().train.lr == get_preset(DEFAULT_MODEL).train.lr  # the default preset's recipe


@pytest.mark.parametrize("text,message", [
    ("train:\n  lr:\n", "train.lr must be a number, got an empty value (in {file})"),
    ("train:\n  lr: [0.1, 0.2]\n", "train.lr must be a number, got a list [0.1, 0.2] (in {file})"),
    ("train:\n  epochs: {a: 1}\n", "train.epochs must be an integer, got a mapping {{'a': 1}} (in {file})"),
    ("train:\n  epochs: 2.5\n", "train.epochs must be an integer, got 2.5 (in {file})"),
    ("train:\n  progress: [true]\n", "train.progress must be true or false, got a list [True] (in {file})"),
    ("data:\n  smiles_col: [a, b]\n", "data.smiles_col must be text, got a list ['a', 'b'] (in {file})"),
    ("data:\n  smiles_col:\n", "data.smiles_col must be text, got an empty value (in {file})"),
    ("data:\n  targets: {y: 1}\n", "data.targets must be a list of text, got a mapping {{'y': 1}} (in {file})"),
    ("data:\n  targets: [[y]]\n", "data.targets must be a list of text, got a list [['y']] (in {file})"),
    ("data:\n  fractions: [0.8, 0.1]\n", "data.fractions must be a list of 3 numbers, got a list [0.8, 0.1] (in {file})"),
    ("data:\n  subset: [1]\n", "data.subset must be an integer or empty, got a list [1] (in {file})"),
    ("model:\n  moire: 3\n", "model.moire must be a mapping of fields, got 3 (in {file})"),
    ("train: 5\n", "train must be a mapping of fields, got 5 (in {file})"),
])
def test_config_file_values_of_the_wrong_type(tmp_path, text, message):
    """A value of the wrong type in a config file is one ConfigError naming the key, the file and
    the expected type (an empty ``lr:`` or a list used to be a TypeError traceback)."""
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        resolve_run_config(path)
    assert str(caught.value) == message.format(file=path)


def test_wrong_types_from_set_name_their_origin():
    with pytest.raises(ConfigError, match=r"^train.epochs must be an integer, got 'x' \(in --set\)$"):
        resolve_run_config(overrides=["train.epochs=x"])


def test_wrong_config_type_is_one_cli_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  lr:\n")
    code, out, err = run_cli(["train", "d.csv", "--targets", "y", "--out", tmp_path / "o", "--config", path])
    assert code == 2 and err.strip() == f"error: train.lr must be a number, got an empty value (in {path})"


def test_extra_feature_widths_follow_the_data_section():
    run = resolve_run_config(overrides=["data.targets=y", "data.features_generators=morgan_counts:radius=1:size=8",
                                        "data.features_cols=a,b", "data.atom_properties=q"])
    assert (run.model.molecule_features, run.model.atom_extra_features) == (10, 1)
    assert resolve_run_config(overrides=["model.molecule_features=0", "data.features_cols=a"]).model.molecule_features == 1
    with pytest.raises(ConfigError, match="model.molecule_features=5 but the extra features of data give 0"):
        resolve_run_config(overrides=["model.molecule_features=5"])


def test_a_run_without_data_or_backbone_is_a_config_error_in_the_library_too():
    from dgl_graphtx.runs import pretrained_run_config
    from dgl_graphtx.runs.training_data import load_training_data
    run = resolve_run_config(overrides=["data.targets=y"])
    with pytest.raises(ConfigError, match="no training data"):
        load_training_data(run)  # was a TypeError from os.fspath(None)
    with pytest.raises(ConfigError, match="train.from_pretrained"):
        pretrained_run_config(run)


def test_auto_features_resolve_once_and_config_yaml_keeps_the_resolved_list(tmp_path):
    """``auto`` becomes the generators it stands for when the run is resolved; config.yaml records
    that list, so a run read back has the same features whatever later defaults say, and a file
    written before ``auto`` existed (an empty list) keeps meaning none."""
    run = resolve_run_config(overrides=["data.path=d.csv", "data.targets=y"])
    assert run.data.features_generators == ("rdkit2d",) and run.model.molecule_features == DESCRIPTORS
    saved = tmp_path / "config.yaml"
    saved.write_text(yaml.safe_dump({"data": {"path": "d.csv", "targets": ["y"], "features_generators": ["rdkit2d"]}}))
    assert resolve_run_config(saved).data == run.data
    saved.write_text(yaml.safe_dump({"data": {"path": "d.csv", "targets": ["y"], "features_generators": []}}))
    assert resolve_run_config(saved).model.molecule_features == 0
    off = resolve_run_config(overrides=["data.path=d.csv", "data.targets=y", "data.features_generators=none"])
    assert off.extra_features.generators == () and off.model.molecule_features == 0
    assert off.data.features_generators == ()  # recorded as [] in config.yaml, as auto resolving to none is
    with pytest.raises(ConfigError, match="auto, none, or a list"):
        resolve_run_config(overrides=["data.targets=y", "data.features_generators=auto,rdkit2d"])
    with pytest.raises(ConfigError, match="resolve it with resolve_run_config"):
        DataConfig().extra_features


def test_a_tab_delimiter_is_kept_from_a_flag_a_file_and_set_and_saved(tmp_path):
    """A tab delimiter (``--delimiter tab``, a tab in a file, ``tab`` or ``\\t`` there or in --set)
    was read as an empty value and sniffed instead: on a TSV whose header holds a comma, as a comma."""
    table = tmp_path / "ref.txt"
    table.write_text("smiles\texpt\treference (author, year)\nCCO\t-5.0\tMobley, 2014\nCCC\t2.0\tMobley, 2014\n")
    file = tmp_path / "run.yaml"
    file.write_text('data:\n  delimiter: "\\t"\n')
    quoted = tmp_path / "quoted.yaml"
    quoted.write_text("data:\n  delimiter: '\\t'\n")
    runs = [resolve_run_config(overrides=["data.targets=expt", f"data.delimiter={text}"]) for text in ("tab", "\\t")]
    runs += [resolve_run_config(path, overrides=["data.targets=expt"]) for path in (file, quoted)]
    runs.append(resolve_run_config(overrides=["data.targets=expt"], flags={"data.delimiter": "\t"}))
    runs.append(resolve_run_config(runs[-1].save(tmp_path / "config.yaml")))
    assert [run.data.delimiter for run in runs] == ["\t"] * 6
    columns = list(read_molecule_csv(table, delimiter=runs[-1].data.delimiter).columns)
    assert columns == ["smiles", "expt", "reference (author, year)"]
    with pytest.raises(ConfigError, match="delimiter must be one character, 'tab'"):
        resolve_run_config(overrides=["data.targets=expt", "data.delimiter=ab"])


def test_a_later_source_choosing_the_cache_replaces_an_earlier_ones_choice(tmp_path):
    """``--config OUT/config.yaml --no-cache`` of a run with ``--cache-dir`` (and ``--cache-dir`` over
    a ``--no-cache`` run's config) was refused as both given, though the flag named one."""
    cached = resolve_run_config(overrides=["data.targets=y", "data.cache_dir=c"]).save(tmp_path / "cached.yaml")
    uncached = resolve_run_config(overrides=["data.targets=y", "data.cache=false"]).save(tmp_path / "uncached.yaml")
    off = resolve_run_config(cached, flags={"data.cache": False}).data
    on = resolve_run_config(uncached, flags={"data.cache_dir": "d"}).data
    assert (off.cache, off.cache_dir, off.dataset_cache) == (False, None, None)
    assert (on.cache, on.cache_dir, on.dataset_cache) == (True, "d", "d")
    assert resolve_run_config(cached, ["data.cache=false"]).data.dataset_cache is None
    with pytest.raises(ConfigError, match="give one of them"):  # one source naming both
        resolve_run_config(uncached, flags={"data.cache_dir": "d", "data.cache": False})
