"""Split files of the transfer suite (benchmarks/suite/splits.py): scaffolds stay together, the
files are the same bytes on every writing, and a changed file is refused."""
from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.suite.config import SETS_BY_NAME
from benchmarks.suite.sets import SetData
from benchmarks.suite.splits import PARTS, check_recorded, fixed_split, random_split, scaffold, scaffold_split, write_split_files

SMILES = ["c1ccccc1C", "c1ccccc1CC", "c1ccccc1O", "C1CCNCC1C", "C1CCNCC1O", "c1ccncc1", "c1ccncc1N",
          "C1CC1C", "CCO", "CCCC", "c1ccc2ccccc2c1", "C1CCOC1", "O=C1CCCN1", "c1cnc[nH]1", "c1ccsc1", "C1CCCCC1"] * 5


def test_scaffold_split_keeps_each_scaffold_in_one_part_and_depends_on_the_seed():
    parts = scaffold_split(SMILES, seed=0)
    by_scaffold = pd.DataFrame({"scaffold": [scaffold(s) for s in SMILES], "part": parts}).groupby("scaffold")["part"]
    assert (by_scaffold.nunique() == 1).all()
    assert set(parts) <= set(PARTS) and parts.count("train") >= len(SMILES) // 2
    assert any(scaffold_split(SMILES, seed=s) != parts for s in range(1, 5))


def test_random_split_sizes():
    parts = random_split(100, seed=3)
    assert [parts.count(p) for p in PARTS] == [80, 10, 10]
    assert parts == random_split(100, seed=3) != random_split(100, seed=4)


def test_split_files_are_byte_identical_on_rewrite_and_a_change_is_refused(tmp_path):
    spec = SETS_BY_NAME["Lipophilicity"]
    data = SetData(pd.DataFrame({"smiles": SMILES, "target": [0.1 * i for i in range(len(SMILES))]}))
    first = write_split_files(spec, data, 1, tmp_path / "a")
    again = write_split_files(spec, data, 1, tmp_path / "b")
    assert first.hashes == again.hashes and list(first.hashes) == ["data.csv"]
    assert sum(first.counts().values()) == len(SMILES)
    record = tmp_path / "splits.json"
    check_recorded(record, ("Lipophilicity", 1), first)
    check_recorded(record, ("Lipophilicity", 1), again)
    other = write_split_files(spec, data, 2, tmp_path / "c")
    with pytest.raises(SystemExit, match="differ from those recorded"):
        check_recorded(record, ("Lipophilicity", 1), other)


def test_fixed_split_keeps_the_sets_test_part_and_draws_a_fifth_of_training_for_validation():
    parts = ["train"] * 50 + ["test"] * 10
    first = fixed_split(parts, seed=42)
    assert first[50:] == ["test"] * 10 and first.count("val") == 10 and first.count("train") == 40
    assert first == fixed_split(parts, seed=42) != fixed_split(parts, seed=117)


def test_moleculeace_split_files_carry_the_cliff_flags(tmp_path):
    spec = SETS_BY_NAME["CHEMBL1862_Ki"]
    frame = pd.DataFrame({"smiles": SMILES[:20], "target": range(20), "part": ["train"] * 15 + ["test"] * 5,
                          "cliff": [0, 1] * 10})
    table = pd.read_csv(write_split_files(spec, SetData(frame), 42, tmp_path).csv)
    assert list(table.columns) == ["smiles", "target", "split", "cliff"]
    assert table["cliff"].tolist() == [0, 1] * 10 and (table["split"][15:] == "test").all()
