"""Rows of several molecules as one pair of graphs: each molecule featurized alone, then laid side
by side with every node marked by its molecule's index in the row (``ndata["row_molecule"]``), so
that datasets, caches, batches and prediction handle a row as they handle one molecule, and a model
of several molecules (:mod:`~dgl_graphtx.models.molecule_sets`) takes each molecule out again.
No bond and no relation edge joins two molecules of a row.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import torch
import dgl

#: Node data: the index (0-based) of the molecule of its row that a node belongs to.
ROW_MOLECULE = "row_molecule"
#: Node data: the row's mixture weights ``[K]`` (the same on every node of the row), set from the
#: data (``data.mixture_weights``) for a model that sums its molecules weighted.
MIXTURE_WEIGHTS = "mixture_weights"


def _single(graph: dgl.DGLGraph) -> dgl.DGLGraph:
    """``graph`` read as one graph of its nodes and edges (a batch of the molecules no more)."""
    graph.set_batch_num_nodes(torch.tensor([graph.num_nodes()], dtype=torch.int64))
    graph.set_batch_num_edges(torch.tensor([graph.num_edges()], dtype=torch.int64))
    return graph


def combine_row(pairs: Sequence[Tuple[dgl.DGLGraph, dgl.DGLGraph]]) -> Tuple[dgl.DGLGraph, dgl.DGLGraph]:
    """The molecular graphs and the relation graphs of a row's molecules (in the row's order), each
    joined into one graph whose nodes carry ``ndata["row_molecule"]``.

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> graph, relation = combine_row([MoleculeFeaturizer()("CO"), MoleculeFeaturizer()("O")])
        >>> graph.ndata["row_molecule"].tolist(), relation.num_edges(), graph.batch_size
        ([0, 0, 1], 5, 1)
    """
    joined = []
    for part in range(2):
        graphs = [pair[part] for pair in pairs]
        for index, graph in enumerate(graphs):
            graph.ndata[ROW_MOLECULE] = torch.full((graph.num_nodes(),), index, dtype=torch.int64)
        joined.append(_single(dgl.batch(graphs)))
    return joined[0], joined[1]
