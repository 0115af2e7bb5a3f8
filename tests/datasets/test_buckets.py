"""Size buckets: a bounded number of buckets of similar sizes, every molecule batched once per
epoch from its own bucket, shuffled within buckets, and batches padded to their bucket's shape."""
from __future__ import annotations

import logging

import torch
from conftest_models import freesolv_rows
from torch.utils.data import Subset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets.buckets import BucketBatchSampler, PaddedCollate, SizeBuckets, molecule_sizes
from dgl_graphtx.nn.graph_tensors import GraphTensors


def test_buckets_are_bounded_contiguous_and_about_even():
    atoms = torch.randint(5, 60, (1000,), generator=torch.Generator().manual_seed(0))
    buckets = SizeBuckets.of(atoms, 2 * atoms + 2, batch_size=32, count=6)
    assert len(buckets.upper) <= 6 and list(buckets.upper) == sorted(buckets.upper) and buckets.upper[-1] == 59
    members = torch.tensor([buckets.bucket(int(a)) for a in atoms])
    counts = torch.bincount(members)
    assert counts.min() > 100 and counts.max() < 260  # each about a sixth
    for i, shape in enumerate(buckets.shapes):
        inside = members == i
        assert shape.atoms == int(atoms[inside].max()) + 1 and shape.bonds == int((2 * atoms + 2)[inside].max())
        lower = buckets.upper[i - 1] if i else -1
        assert (atoms[inside] > lower).all() and (atoms[inside] <= buckets.upper[i]).all()


def test_every_molecule_once_per_epoch_from_its_bucket_shuffled_within_it():
    atoms = torch.randint(5, 40, (300,), generator=torch.Generator().manual_seed(1))
    buckets = SizeBuckets.of(atoms, atoms, batch_size=16, count=4)
    order = torch.randperm(300, generator=torch.Generator().manual_seed(2)).tolist()
    sampler = BucketBatchSampler(atoms, buckets, 16, order=order, seed=3)
    batches = list(sampler)
    assert sorted(i for batch in batches for i in batch) == list(range(300)) and len(batches) == len(sampler)
    for batch in batches:
        assert len({buckets.bucket(int(atoms[i])) for i in batch}) == 1 and len(batch) <= 16
        positions = [order.index(i) for i in batch]
        assert positions == sorted(positions)  # the given (shuffled) order, kept within the bucket
    assert [b for b in BucketBatchSampler(atoms, buckets, 16, order=order, seed=3)] == batches  # reproducible
    sampler.set_epoch(1)
    assert list(sampler) != batches  # another order of the batches in another epoch
    assert sorted(map(sorted, sampler)) == sorted(map(sorted, batches))


def test_a_single_molecule_batch_can_be_left_out():
    atoms = torch.tensor([3, 3, 3, 9])
    buckets = SizeBuckets.of(atoms, atoms, batch_size=2, count=2)
    assert [len(b) for b in BucketBatchSampler(atoms, buckets, 2, seed=None)] == [2, 1, 1]
    assert [len(b) for b in BucketBatchSampler(atoms, buckets, 2, seed=None, drop_last_single=True)] == [2]


def test_padded_collate_pads_to_the_bucket_and_runs_a_larger_molecule_unpadded(caplog):
    frame = freesolv_rows(0, 30)
    data = MoleculeDataset(list(frame["smiles"]), torch.zeros(30, 1), progress=False)
    by_size = torch.argsort(data.graphs.num_nodes, stable=True).tolist()
    smallest = Subset(data, by_size[:20])
    atoms, bonds = molecule_sizes(smallest)
    assert atoms.tolist() == [int(data.graphs.num_nodes[i]) for i in by_size[:20]]
    buckets = SizeBuckets.of(atoms, bonds, batch_size=4, count=2)
    collate = PaddedCollate(buckets)
    batch = collate(data.__getitems__(by_size[:3]))
    assert batch.graph.slot_size == buckets.shapes[0].atoms and batch.batch_size == 4
    largest = by_size[-1]
    assert int(data.graphs.num_nodes[largest]) > buckets.upper[-1]
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        unpadded = collate(data.__getitems__([largest]))
    assert isinstance(unpadded.graph, GraphTensors) and not unpadded.graph.slot_size
    assert "runs unpadded" in caplog.text
