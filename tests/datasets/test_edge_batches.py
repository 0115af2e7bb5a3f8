"""The edge-budget batch sampler: hand-computed groupings, the sizes it reads from datasets, and
training with ``TrainConfig.batch_edges``."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import Subset

from conftest_models import seeded_model, tiny_preset

from dgl_graphtx.datasets import EdgeBudgetBatchSampler, MoleculeDataset, relation_edge_counts
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.training import TrainConfig, Trainer

EDGES = [4, 9, 1, 1, 7, 2, 2, 2, 12, 3]


def test_grouping_by_size_and_edges_matches_a_hand_computed_one():
    batches = list(EdgeBudgetBatchSampler(EDGES, batch_size=3, batch_edges=10))
    # walk: [0](4) +1(9)=13>10 cut; [1](9) +2(1)=10 ok; +3 -> 11 > 10 cut; [3](1) +4(7)=8 +5(2)=10 ok, 3 molecules;
    # [6](2) +7(2)=4 +8(12)=16>10 cut; [8](12) alone; [9](3)
    assert batches == [[0], [1, 2], [3, 4, 5], [6, 7], [8], [9]]
    assert len(EdgeBudgetBatchSampler(EDGES, 3, 10)) == 6


def test_only_the_molecule_count_binds_under_a_large_budget():
    assert list(EdgeBudgetBatchSampler(EDGES, 4, 10**9)) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_an_order_is_batched_as_given_and_a_last_single_molecule_can_be_dropped():
    order = [9, 8, 0, 2, 3, 5, 1]
    # [9](3) +8(12)=15 cut; [8] alone; [0](4) +2(1) +3(1) = 6 (3 molecules) cut; [5](2) +1(9)=11 cut; [1]
    assert list(EdgeBudgetBatchSampler(EDGES, 3, 10, order=order)) == [[9], [8], [0, 2, 3], [5], [1]]
    assert list(EdgeBudgetBatchSampler(EDGES, 3, 10, order=order, drop_last_single=True)) == [[9], [8], [0, 2, 3], [5]]


def test_bad_budgets_are_refused_with_the_option_named():
    with pytest.raises(ConfigError, match="batch_edges"):
        EdgeBudgetBatchSampler(EDGES, 3, 0)
    with pytest.raises(ConfigError, match="batch_edges"):
        TrainConfig(batch_edges=-5)


@pytest.fixture(scope="module")
def dataset():
    smiles = ["C", "CC", "CCO", "c1ccccc1", "CCCCCC", "O", "CN", "CCCl"]
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    return MoleculeDataset(smiles, [[float(i)] for i in range(len(smiles))], relation=preset.relation, progress=False)


def test_edge_counts_come_from_the_relation_graphs_of_a_dataset_and_its_subsets(dataset):
    per_molecule = [dataset[i][1].num_edges() for i in range(len(dataset))]
    assert relation_edge_counts(dataset).tolist() == per_molecule
    assert relation_edge_counts(Subset(dataset, [5, 2])).tolist() == [per_molecule[5], per_molecule[2]]
    with pytest.raises(ConfigError, match="batch_edges"):
        relation_edge_counts([1, 2, 3])


def test_training_loader_cuts_batches_by_the_edge_budget(dataset):
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    edges = relation_edge_counts(dataset).tolist()
    budget = max(edges) + 1
    trainer = Trainer(seeded_model(preset), TrainConfig(batch_size=4, batch_edges=budget, progress=False, device="cpu"))
    batches = list(trainer.loader(dataset))
    expected = list(EdgeBudgetBatchSampler(edges, 4, budget))
    assert len(expected) > len(dataset) / 4  # the budget binds somewhere
    assert [batch.labels.flatten().tolist() for batch in batches] == [[float(i) for i in b] for b in expected]
    sizes = [batch.relation_graph.num_edges() for batch in batches]
    assert sizes == [sum(edges[i] for i in b) for b in expected]
    assert all(size <= budget for size in sizes)


def test_a_budget_that_never_binds_trains_exactly_as_plain_batches(dataset):
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    histories = []
    for batch_edges in (None, 10**9):
        config = TrainConfig(epochs=3, batch_size=3, batch_edges=batch_edges, progress=False, device="cpu", seed=1)
        model = seeded_model(preset, seed=3)
        histories.append(Trainer(model, config).fit(dataset, dataset).history.drop(columns="seconds"))
        histories.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert histories[0].equals(histories[2])
    assert torch.equal(histories[1], histories[3])
