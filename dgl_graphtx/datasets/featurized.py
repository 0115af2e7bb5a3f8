"""Featurize molecules and pack the result: the one path that datasets, stores and prediction share.

:func:`featurize_and_pack` featurizes molecule by molecule (bad input never raises), keeps the
reason for each failed row, and packs the molecular and relation graphs of the rows that worked
into two :class:`~dgl_graphtx.datasets.PackedGraphs`, in input order.
"""
from __future__ import annotations

from typing import Callable, Iterable, List, NamedTuple, Optional, cast

from ..featurize import MoleculeFeaturizer, featurize_each
from ..featurize.molecule import MoleculeLike
from ..logs import progress as progress_bar
from ..validation import check_number
from ..worker_pool import PART_SIZE, part_bounds, parts_in_processes, received
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
                       progress: bool = False, on_error: Optional[ErrorHandler] = None, workers: int = 1) -> Featurized:
    """Featurize every molecule (see :func:`~dgl_graphtx.featurize.featurize_each`) and pack the
    graphs of those that worked. ``on_error(row, reason)`` hears of each failure as it happens
    (raise from it to stop at the first one). ``workers`` > 1 featurizes parts of at least
    :data:`PART_SIZE` molecules in that many processes (:func:`~dgl_graphtx.worker_pool.shared_pool`,
    kept for the next call), with the same result; ``on_error`` then hears of the failures of each
    part, in row order, when the part is done.

    Example:
        >>> seen = []
        >>> done = featurize_and_pack(MoleculeFeaturizer(), ["", "O"], on_error=lambda row, why: seen.append((row, why)))
        >>> seen, done.rows, done.relations.num_edges.tolist()
        ([(0, 'empty SMILES')], [1], [1])
    """
    if check_number("workers", workers, 1, integer=True) > 1:
        molecules = list(molecules)
        if len(molecules) >= 2 * PART_SIZE:
            return _featurized_in_parts(featurizer, molecules, progress, on_error, workers)
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


def _featurized_in_parts(featurizer: MoleculeFeaturizer, molecules: List[Optional[MoleculeLike]], progress: bool,
                         on_error: Optional[ErrorHandler], workers: int) -> Featurized:
    """:func:`featurize_and_pack` in a pool of ``workers`` processes, a few parts per worker."""
    bounds = part_bounds(len(molecules), workers)
    errors: List[Optional[str]] = []
    rows: List[int] = []
    packed: List[Featurized] = []
    # stopped by on_error or an interrupt: the parts not started are not featurized
    with parts_in_processes(workers, _featurize_part, featurizer, molecules, bounds) as parts:
        for start, part in zip(bounds, progress_bar(parts, "featurizing", "part", enabled=progress, total=len(bounds) - 1)):
            for offset, error in enumerate(part.errors):
                if error is not None and on_error is not None:
                    on_error(start + offset, error)
            errors.extend(part.errors)
            rows.extend(start + row for row in part.rows)
            if part.graphs is not None:
                packed.append(part)
    if not packed:
        return Featurized(errors, rows, None, None)
    graphs, relations = (PackedGraphs.joined([getattr(part, name) for part in packed]) for name in ("graphs", "relations"))
    return Featurized(errors, rows, graphs, relations)


def _featurize_part(featurizer: MoleculeFeaturizer, part: List[object]) -> Featurized:
    """What a featurizing process runs: :func:`featurize_and_pack` of its part."""
    return featurize_and_pack(featurizer, [cast(Optional[MoleculeLike], received(m)) for m in part])
