"""What prediction gives each row's graph besides its molecules: the mixture weights of a model that
sums its molecules weighted, and the molecular values a constrained atom target sums to, read from
the input's columns (or computed, the formal charge) as training read them."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch

from ..datasets.level_targets import LevelTargets, sum_totals
from ..datasets.molecule_columns import MoleculeColumns, attach_mixture_weights
from ..datasets.packed import PackedGraphs
from ..featurize import describe_molecule
from ..featurize.molecule import ATOM_TOTALS, MoleculeLike
from ..models.levels import LevelOptions


def stored_level_targets(options: LevelOptions, record: Optional[Dict[str, Any]]) -> LevelTargets:
    """The atom- and bond-level targets of a checkpoint: as its record says (how training read
    them), else named ``atom_target_<i>`` / ``bond_target_<i>`` after the model's outputs.

    Example:
        >>> stored_level_targets(LevelOptions(atom_tasks=2), None).atom_targets
        ('atom_target_0', 'atom_target_1')
    """
    if record:
        return LevelTargets.from_dict(record)
    return LevelTargets(tuple(f"atom_target_{t}" for t in range(options.atom_tasks)),
                        tuple(f"bond_target_{t}" for t in range(options.bond_tasks)))


def attach_row_values(graphs: PackedGraphs, rows: Sequence[int], molecules: Sequence[MoleculeLike], features: Optional[pd.DataFrame],
                      columns: MoleculeColumns, spec: LevelTargets) -> List[Tuple[int, str]]:
    """Give the featurized ``rows`` (position ``p`` of ``graphs`` holds row ``rows[p]`` of
    ``molecules`` and ``features``) their mixture weights (``columns``) and constrained atom sums
    (``spec``); returns ``(row, note)`` for each row whose sum is blank, left unconstrained."""
    ids = [describe_molecule(m) for m in molecules]
    weights = columns.weights(features, ids)
    attach_mixture_weights(graphs, None if weights is None else weights[list(rows)])
    if not spec.sums:
        return []
    totals = sum_totals(spec, molecules, features, ids)
    graphs.graph_data[ATOM_TOTALS] = torch.as_tensor(totals[list(rows)], dtype=torch.float32)
    return [(row, f"no value to constrain the sum of {target!r} to (--atom-sums {target}={source}); its atom values are "
                  "unconstrained") for row in rows for (target, source), total in zip(spec.sums, totals[row]) if np.isnan(total)]
