"""Featurizing in several processes: the same packed graphs, rows and reasons as in one; one clear
error when a process dies; one pool kept for the process."""
from __future__ import annotations

import os

import pytest
import torch

from dgl_graphtx.datasets import PackedGraphs, example_sdf_path, featurize_and_pack, read_molecules
from dgl_graphtx.worker_pool import PART_SIZE
from dgl_graphtx.worker_pool import FeaturizingPool, close_shared_pool, shared_pool
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.relation_graph import RelationConfig

GOOD = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "[Na+].[Cl-]", "C", "OC(=O)C1CCCN1", "c1ccc2ccccc2c1"]
BAD = ["", "not smiles", "C1CC"]


def _molecules(count: int):
    """``count`` inputs, a failing one every few rows."""
    return [BAD[i // 5 % len(BAD)] if i % 5 == 3 else GOOD[i % len(GOOD)] for i in range(count)]


def _assert_same_packed(got: PackedGraphs, expected: PackedGraphs) -> None:
    found = got.state_dict()
    for key, value in expected.state_dict().items():
        if isinstance(value, dict):
            assert value.keys() == found[key].keys()
            for name, column in value.items():
                assert torch.equal(found[key][name], column), name
        else:
            assert torch.equal(found[key], value), key


@pytest.fixture(scope="module", autouse=True)
def _no_pool_left_behind():
    yield
    close_shared_pool()


@pytest.mark.parametrize("config", [FeaturizerConfig(), FeaturizerConfig(atom_features="canonical", rwse_steps=4)])
def test_two_workers_give_what_one_process_gives(config):
    featurizer = MoleculeFeaturizer(config, RelationConfig(virtual_node=True))
    molecules = _molecules(5 * PART_SIZE + 7)  # parts of unequal sizes
    heard_one, heard_two = [], []
    one = featurize_and_pack(featurizer, molecules, on_error=lambda row, why: heard_one.append((row, why)))
    two = featurize_and_pack(featurizer, iter(molecules), on_error=lambda row, why: heard_two.append((row, why)), workers=2)
    assert two.rows == one.rows and two.errors == one.errors
    assert heard_two == heard_one and len(heard_one) == sum(e is not None for e in one.errors) > 0
    _assert_same_packed(two.graphs, one.graphs)
    _assert_same_packed(two.relations, one.relations)


@pytest.mark.parametrize("rows", [False, True], ids=["molecules", "rows of two"])
def test_molecules_from_a_file_cross_with_their_coordinates_exact(rows):
    """RDKit's default pickle rounds coordinates to float32: hydrogens placed from them would move."""
    featurizer = MoleculeFeaturizer(FeaturizerConfig(explicit_hydrogens=True, coordinates="conformer"),
                                    RelationConfig("radius", radius=4.0))
    records = list(read_molecules(example_sdf_path()).molecules)
    molecules = [records[i % len(records)] for i in range(2 * PART_SIZE)]
    if rows:
        molecules = [(molecule, records[0]) for molecule in molecules]
    one, two = featurize_and_pack(featurizer, molecules), featurize_and_pack(featurizer, molecules, workers=2)
    assert two.rows == one.rows == list(range(len(molecules))) and two.errors == one.errors
    _assert_same_packed(two.graphs, one.graphs)
    _assert_same_packed(two.relations, one.relations)


def test_few_molecules_are_featurized_here_and_none_valid_gives_no_graphs():
    done = featurize_and_pack(MoleculeFeaturizer(), BAD * (PART_SIZE // 2), workers=2)  # fewer than two parts
    assert done.graphs is None and done.rows == [] and len(done.errors) == len(BAD) * (PART_SIZE // 2)
    done = featurize_and_pack(MoleculeFeaturizer(), BAD * PART_SIZE, workers=2)  # in parts, none valid
    assert done.graphs is None and done.errors[:3] == ["empty SMILES", "SMILES syntax error (RDKit could not parse it)",
                                                       "SMILES syntax error (RDKit could not parse it)"]


def test_joined_packed_graphs_equal_the_graphs_packed_at_once():
    featurizer = MoleculeFeaturizer()
    graphs = [featurizer(s)[0] for s in GOOD]
    joined = PackedGraphs.joined([PackedGraphs.from_graphs(graphs[:2]), PackedGraphs.from_graphs(graphs[2:])])
    _assert_same_packed(joined, PackedGraphs.from_graphs(graphs))
    with pytest.raises(ValueError, match="feature keys"):
        PackedGraphs.joined([PackedGraphs.from_graphs(graphs[:1]), PackedGraphs.from_graphs([MoleculeFeaturizer()(GOOD[0])[1]])])


def test_the_shared_pool_is_kept_and_replaced_for_another_size():
    first = shared_pool(2)
    assert shared_pool(2) is first
    assert first.executor.submit(os.getpid).result() != os.getpid()  # work runs in another process
    second = shared_pool(1)
    assert second is not first and second.workers == 1
    with pytest.raises(ConfigError, match="workers"):
        FeaturizingPool(0)
    with pytest.raises(ConfigError, match="workers"):
        featurize_and_pack(MoleculeFeaturizer(), GOOD, workers=0)


class _DyingFeaturizer(MoleculeFeaturizer):
    """Ends its process on the first molecule, as the kernel's out-of-memory killer would."""

    def __call__(self, molecule):
        os._exit(9)


def test_a_process_that_dies_gives_one_clear_error_and_the_next_call_works():
    with pytest.raises(ConfigError, match=r"featurizing process ended abruptly .*workers=1"):
        featurize_and_pack(_DyingFeaturizer(), GOOD * PART_SIZE, workers=2)
    done = featurize_and_pack(MoleculeFeaturizer(), GOOD * PART_SIZE, workers=2)  # a new pool
    assert done.rows == list(range(len(GOOD) * PART_SIZE))


def test_an_error_handler_that_raises_stops_the_work_at_the_first_failure():
    heard = []

    def stop(row, why):
        heard.append(row)
        raise ValueError(f"row {row}: {why}")

    with pytest.raises(ValueError, match="row 3: empty SMILES"):
        featurize_and_pack(MoleculeFeaturizer(), _molecules(8 * PART_SIZE), on_error=stop, workers=2)
    assert heard == [3]
