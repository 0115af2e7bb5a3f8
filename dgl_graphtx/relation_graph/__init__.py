"""Relation graphs: the node pairs an attention layer scores, with their structural relations
(hop counts, bond classes, distances). :class:`RelationConfig` and :func:`build_relation_graph`
are in ``builder.py``, the sparse search for the pairs of ``hops`` and ``radius`` mode in
``pair_search.py``, and the categorical bond classes in ``bond_classes.py``."""
from .bond_classes import BondVocabulary
from .builder import (COMPLETE_EDGE_BUDGET, DEFAULT_SPD_CAP, DENSE_SPD_MAX_NODES, SPD_BEYOND_CAP, SPD_UNREACHABLE, SPD_VIRTUAL,
                      RelationConfig, build_relation_graph, shortest_path_lengths)

__all__ = [
    "BondVocabulary",
    "COMPLETE_EDGE_BUDGET",
    "DEFAULT_SPD_CAP",
    "DENSE_SPD_MAX_NODES",
    "RelationConfig",
    "SPD_BEYOND_CAP",
    "SPD_UNREACHABLE",
    "SPD_VIRTUAL",
    "build_relation_graph",
    "shortest_path_lengths",
]
