"""Dataset caches store integer tensors narrowed and load them back exactly."""
from __future__ import annotations

import pytest
import torch

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets.compact import narrow_integers, smallest_integer_dtype, widen_integers
from dgl_graphtx.relation_graph import RelationConfig


def _naive_dtype(values):
    """The first dtype whose documented range holds all values (int8 [-128, 127], int16
    [-32768, 32767], int32 [-2**31, 2**31 - 1])."""
    for dtype, bits in ((torch.int8, 8), (torch.int16, 16), (torch.int32, 32)):
        if all(-(2 ** (bits - 1)) <= v <= 2 ** (bits - 1) - 1 for v in values):
            return dtype
    return torch.int64


@pytest.mark.parametrize("values", [[0], [127], [128], [-128], [-129], [0, 32767], [32768], [-32769],
                                    [2**31 - 1], [2**31], [-(2**31) - 1], [-1, 5, 300]])
def test_smallest_dtype_at_every_boundary(values):
    tensor = torch.tensor(values, dtype=torch.int64)
    assert smallest_integer_dtype(tensor) == _naive_dtype(values)
    back = widen_integers(narrow_integers({"x": tensor}))["x"]
    assert back.dtype == torch.int64 and torch.equal(back, tensor)


def test_floats_bools_and_plain_values_are_kept_as_they_are():
    tree = {"f": torch.tensor([0.5, 1.0]), "b": torch.tensor([True]), "u": torch.tensor([3], dtype=torch.uint8),
            "ids": ["CCO", "C"], "n": 3, "nested": [{"i": torch.tensor([[1, 2]], dtype=torch.int32)}]}
    stored = narrow_integers(tree)
    assert stored["f"] is tree["f"] and stored["b"] is tree["b"] and stored["u"] is tree["u"]
    assert stored["nested"][0]["i"]["narrowed_from"].dtype == torch.int8
    back = widen_integers(stored)
    assert back["ids"] == ["CCO", "C"] and back["n"] == 3
    assert back["nested"][0]["i"].dtype == torch.int32 and torch.equal(back["nested"][0]["i"], tree["nested"][0]["i"])


def _tensors(tree, prefix=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _tensors(value, f"{prefix}.{key}")
    elif isinstance(tree, torch.Tensor):
        yield prefix, tree


def test_a_cached_dataset_loads_identical_to_the_featurized_one_from_a_smaller_file(tmp_path):
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "[Na+].[Cl-]", "C1CC2CCC1C2"] * 4
    targets = [[float(i)] for i in range(len(smiles))]
    built = MoleculeDataset(smiles, targets, relation=RelationConfig(), cache_dir=tmp_path, progress=False)
    loaded = MoleculeDataset(smiles, targets, relation=RelationConfig(), cache_dir=tmp_path, progress=False)
    first, second = dict(_tensors(built.payload())), dict(_tensors(loaded.payload()))
    assert first.keys() == second.keys() and first
    for name, tensor in first.items():
        assert second[name].dtype == tensor.dtype and torch.equal(second[name], tensor), name
    # the file stores the relation graph's distances and bond classes in one byte each
    raw = torch.load(built.cache_file, weights_only=True)
    assert raw["relations"]["edata"]["spd"]["narrowed_from"].dtype == torch.int8
    assert raw["relations"]["edata"]["bond"]["narrowed_from"].dtype == torch.int8
    wide = tmp_path / "wide.pt"
    torch.save(built.payload(), wide)
    assert built.cache_file.stat().st_size < 0.6 * wide.stat().st_size
