"""The split-kind registry is the one source of the split names, the CLI's ``--split`` choices,
the configuration's check, :func:`make_split`, the cross-validation folds and the groups the
carved parts keep whole: a kind added to the table works everywhere."""
from __future__ import annotations

import pytest

from dgl_graphtx.cli.common import TRAIN_FLAGS
from dgl_graphtx.datasets import (SPLIT_KINDS, SPLITS, MoleculeDataset, SplitKind, assign_groups, carve, cv_splits, freesolv,
                                  make_split, molecule_groups)
from dgl_graphtx.datasets.splits import _sizes
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.runs.config import DataConfig


def _by_first_letter(smiles, fractions, seed):
    """A toy kind: molecules grouped by their first SMILES character, largest groups to training."""
    groups = {}
    for index, s in enumerate(smiles):
        groups.setdefault(s[0], []).append(index)
    return assign_groups(sorted(groups.values(), key=len, reverse=True), *_sizes(len(smiles), fractions))


def test_cli_choices_and_the_config_check_are_the_registry():
    from dgl_graphtx.models import get_preset
    from dgl_graphtx.runs import RunPlan
    listed = {flag: options.get("metavar") for flag, _, options in TRAIN_FLAGS}  # train lists them; the library checks them
    assert listed["--split"] == "{" + ",".join(SPLITS) + "}" and SPLITS == tuple(SPLIT_KINDS)
    with pytest.raises(ConfigError, match="data.split"):
        DataConfig(split="alphabetical")
    assert RunPlan(get_preset("vanilla"), split="kmeans", folds=3).folds == 3  # every kind whose entry allows folds
    with pytest.raises(ConfigError, match="--cv 3"):
        RunPlan(get_preset("vanilla"), split="kennard_stone", folds=3)


def test_a_kind_added_to_the_table_splits_folds_and_carves(monkeypatch):
    kind = SplitKind("first_letter", "by first SMILES character", _by_first_letter, groups=lambda smiles, seed: [s[0] for s in smiles])
    monkeypatch.setitem(SPLIT_KINDS, kind.name, kind)
    smiles = freesolv()["smiles"][:60].tolist()
    dataset = MoleculeDataset(smiles, [[0.0]] * 60, progress=False)
    split = make_split(dataset, "first_letter", (0.6, 0.2, 0.2), seed=0)
    letters = [{smiles[i][0] for i in part} for part in split]
    assert not letters[0] & letters[1] and not letters[0] & letters[2] and not letters[1] & letters[2]
    assert DataConfig(split="first_letter", cv=3).split == "first_letter"
    groups = molecule_groups("first_letter", smiles, 0)
    for fold in cv_splits("first_letter", 3, smiles=smiles):
        parts = [{groups[i] for i in part} for part in fold]
        assert not parts[0] & parts[2] and not parts[1] & parts[2] and not parts[0] & parts[1]
    kept, carved = carve(split.train, 5, seed=0, groups=groups)
    assert carved and not {groups[i] for i in carved} & {groups[i] for i in kept}


def test_carving_leaves_groups_larger_than_half_the_part():
    # as the scaffold split's validation and test parts: a set of 6 never makes up a carved part of 8
    # (before, it was carved whenever it came early in the shuffled order, e.g. a series of 54
    # polychlorinated biphenyls made up half of a solubility set's calibration part)
    groups = ["big"] * 6 + [f"single_{i}" for i in range(10)]
    for seed in range(10):
        kept, carved = carve(range(16), 8, seed, groups)
        assert len(carved) == 8 and set(range(6)) <= set(kept)
