"""Several molecules per row and atom- or bond-level targets in a run's configuration and plan: the
model's derived sections follow the data settings (and cannot be set), config.yaml holds the rest
and repeats the run, every rule between settings is one error of the plan, and the plan checks the
data it trains on."""
from __future__ import annotations

import dataclasses

import pytest

from conftest_models import tiny_preset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.models.levels import LevelOptions
from dgl_graphtx.models.molecule_sets import MoleculeSetOptions
from dgl_graphtx.runs import RunPlan, resolve_run_config
from dgl_graphtx.runs.config import DataConfig
from dgl_graphtx.training import TrainConfig

BASE = ["data.path=d.csv", "train.device=cpu"]


def test_the_model_sections_follow_the_data_settings(tmp_path):
    run = resolve_run_config(overrides=[*BASE, "data.smiles_cols=rxn,solvent", "data.reaction_cols=rxn", "data.targets=y",
                                        "data.mixture_weights=a,b,c", "model.molecules.combine=sum"])
    assert run.model.molecules == MoleculeSetOptions(count=3, backbones="shared", combine="sum", weighted=True)
    assert not run.model.levels.any and run.model.num_tasks == 1
    levels = resolve_run_config(overrides=[*BASE, "data.atom_targets=q,shift", "data.bond_targets=order",
                                           "data.atom_sums=shift=formal_charge"])
    assert levels.model.levels == LevelOptions(2, 1, (1,)) and levels.model.num_tasks == 0
    saved = levels.save(tmp_path / "config.yaml")
    assert "atom_tasks" not in saved.read_text() and "count:" not in saved.read_text()
    assert resolve_run_config(saved) == levels
    flags = resolve_run_config(overrides=BASE, flags={"data.smiles_cols": ("a", "b"), "model.molecules.backbones": "separate",
                                                      "data.targets": ["y"]})
    assert flags.model.molecules.backbones == "separate" and flags.model.molecules.count == 2


@pytest.mark.parametrize("item", ["model.molecules.count=2", "model.molecules.weighted=true", "model.levels.atom_tasks=1"])
def test_derived_row_settings_cannot_be_set(item):
    with pytest.raises(ConfigError, match=f"{item.split('=')[0]} is derived from the data"):
        resolve_run_config(overrides=[*BASE, "data.targets=y", item])


@pytest.mark.parametrize("settings, message", [
    (dict(smiles_cols=("a",), smiles_col="mol"), "give the molecule column once: --smiles-col mol or --smiles-cols a"),
    (dict(targets=("q",), atom_targets=("q",)), "named as molecule target"),
    (dict(atom_targets=("q",), atom_sums=("q=formal_charge", "q=total")), "constrained atom target 'q' given 2 times"),
    (dict(atom_targets=("q",), atom_index="order"), "atom_index must be one of"),
    (dict(smiles_cols=("a", "b"), mixture_weights=("w",)), "1 mixture weight column"),
])
def test_data_settings_are_checked_where_they_are_made(settings, message):
    with pytest.raises(ConfigError, match=message):
        DataConfig(**settings)


@pytest.mark.parametrize("items, message", [
    (["data.atom_targets=q", "ensemble.size=2"], "drop --ensemble-size/--replicates"),
    (["data.atom_targets=q", "data.cv=3"], "drop --cv"),
    (["data.atom_targets=q", "uncertainty.method=mc_dropout"], "drop --uncertainty"),
    (["data.targets=y", "model.molecules.backbones=separate"], "--backbones separate gives each molecule of a row its own"),
    (["data.targets=y", "data.smiles_cols=a,b", "data.features_generators=rdkit2d"], "take no extra features"),
    (["data.targets=y", "data.smiles_cols=a,b", "data.mixture_weights=x,y"], "molecules.weighted .* set molecules.combine=sum"),
    (["data.smiles_cols=a,b", "data.atom_targets=q"], "not to rows of several: drop --atom-targets/--bond-targets or --smiles-cols"),
])
def test_rules_between_row_settings_are_the_plans(items, message):
    with pytest.raises(ConfigError, match=message):
        RunPlan.from_config(resolve_run_config(overrides=[*BASE, *items]))


def test_the_plan_checks_the_rows_and_levels_of_its_data():
    preset = tiny_preset("gradformer")
    data = MoleculeDataset([("CCO", "O"), ("C", "CC")], [[1.0], [2.0]], featurizer=preset.featurizer, relation=preset.relation,
                           progress=False)
    with pytest.raises(ConfigError, match=r"reads 1 molecule\(s\) per row, the data holds 2: build it with "
                                          r"molecules=MoleculeSetOptions\(count=2\)"):
        RunPlan(preset, TrainConfig(device="cpu")).for_data(data)
    two = dataclasses.replace(preset, model=dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=2)))
    assert RunPlan(two, TrainConfig(device="cpu")).for_data(data).targets == ("target_0",)
    levels = dataclasses.replace(preset, model=dataclasses.replace(preset.model, levels=LevelOptions(atom_tasks=1)))
    single = MoleculeDataset(["CCO"], [[1.0]], featurizer=preset.featurizer, relation=preset.relation, progress=False)
    with pytest.raises(ConfigError, match=r"are not the data's targets \(atom \[\], bond \[\]\): build it with levels=LevelOptions"):
        RunPlan(levels, TrainConfig(device="cpu")).for_data(single)
