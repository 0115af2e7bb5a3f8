"""Featurize molecules and pack the result: the one path that datasets, stores and prediction share.

:func:`featurize_and_pack` featurizes molecule by molecule (bad input never raises), keeps the
reason for each failed row, and packs the molecular and relation graphs of the rows that worked
into two :class:`~dgl_graphtx.datasets.PackedGraphs`, in input order.
"""
from __future__ import annotations

from typing import Callable, Iterable, List, NamedTuple, Optional

from ..featurize import MoleculeFeaturizer, featurize_each
from ..featurize.molecule import MoleculeLike
from .packed import PackedGraphs

#: Called with ``(row, reason)`` for each molecule that could not be featurized, as soon as it fails.
ErrorHandler = Callable[[int, str], None]


class Featurized(NamedTuple):
    """Inputs featurized: per-row errors, the rows that were featurized, and their graphs and
    relation graphs packed (position ``p`` holds input row ``rows[p]``; both ``None`` when no row worked).

    Example:
        >>> done = featurize_and_pack(MoleculeFeaturizer(), ["CO", "C1C", "CCC"])
        >>> done.rows, done.errors[1], done.graphs.num_nodes.tolist()
        ([0, 2], 'SMILES syntax error (RDKit could not parse it)', [2, 3])
    """

    errors: List[Optional[str]]
    rows: List[int]
    graphs: Optional[PackedGraphs]
    relations: Optional[PackedGraphs]


def featurize_and_pack(featurizer: MoleculeFeaturizer, molecules: Iterable[Optional[MoleculeLike]],
                       progress: bool = False, on_error: Optional[ErrorHandler] = None) -> Featurized:
    """Featurize every molecule (see :func:`~dgl_graphtx.featurize.featurize_each`) and pack the
    graphs of those that worked. ``on_error(row, reason)`` hears of each failure as it happens
    (raise from it to stop at the first one).

    Example:
        >>> seen = []
        >>> done = featurize_and_pack(MoleculeFeaturizer(), ["", "O"], on_error=lambda row, why: seen.append((row, why)))
        >>> seen, done.rows, done.relations.num_edges.tolist()
        ([(0, 'empty SMILES')], [1], [1])
    """
    errors: List[Optional[str]] = []
    graphs, relations, rows = [], [], []
    for row, featurized, error in featurize_each(featurizer, molecules, progress):
        errors.append(error)
        if featurized is None:
            if on_error is not None:
                assert error is not None  # featurize_each names the reason of every failure
                on_error(row, error)
            continue
        graphs.append(featurized[0])
        relations.append(featurized[1])
        rows.append(row)
    if not rows:
        return Featurized(errors, rows, None, None)
    return Featurized(errors, rows, PackedGraphs.from_graphs(graphs), PackedGraphs.from_graphs(relations))
