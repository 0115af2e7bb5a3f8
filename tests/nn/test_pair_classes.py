"""The (distance, bond, self) combinations of a graph's relation edges (PairCodes): the same rows as
a plain ``torch.unique`` over the combinations, whether found by counting (molecules: a few dozen
distances) or by sorting (large graphs, whose distances run into the thousands)."""
from __future__ import annotations

import dgl
import torch

from dgl_graphtx.nn.pair_classes import SPD_VIRTUAL, PairCodes


def _graph(spd, bond, src, dst):
    g = dgl.graph((torch.tensor(src), torch.tensor(dst)))
    g.edata["spd"], g.edata["bond"] = torch.tensor(spd), torch.tensor(bond)
    return g


def _reference(g):
    src, dst = g.edges()
    triples = torch.stack([g.edata["spd"], g.edata["bond"], (src == dst).long()], dim=1)
    present, inverse = torch.unique(triples, dim=0, return_inverse=True)  # sorted by distance, bond, self
    return inverse, present[:, 0], present[:, 1], present[:, 2].bool()


def _check(g):
    codes, (edge_code, spd, bond, is_self) = PairCodes.of(g), _reference(g)
    assert torch.equal(codes.edge_code, edge_code) and torch.equal(codes.spd, spd)
    assert torch.equal(codes.bond, bond) and torch.equal(codes.is_self, is_self)


def test_molecule_sized_distances_are_counted_into_the_same_rows():
    _check(_graph([0, 1, 1, 2, SPD_VIRTUAL, 0], [61, 3, 3, 60, 60, 61], [0, 0, 1, 0, 3, 2], [0, 1, 0, 2, 0, 2]))


def test_large_graph_distances_are_sorted_not_counted():
    # distances of a 10^12-hop scale: a table of every possible combination could not be allocated
    huge = [10**12, 5, 10**12, 7, 0]
    g = _graph(huge, [60, 60, 60, 2, 61], [0, 1, 2, 3, 4], [1, 2, 3, 4, 4])
    _check(g)
