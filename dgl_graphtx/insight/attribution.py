"""Per-atom importance of one prediction, aggregated over every layer and head by attention
rollout (Abnar & Zuidema, ACL 2020).

Each layer's attention is averaged over heads, the residual connection is added as the identity
and rows are renormalised; the product over layers, first layer rightmost, says how much each
node's final state draws on each input node. The readout's row of that product, the virtual node
or the mean over atoms for pooled readouts, restricted to atoms and normalised to sum to 1, is the
importance of each atom. Rollout follows attention paths only: a GPS block's local message passing
(Gradformer) also mixes neighbours, which the figure does not show.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .attention_maps import AttentionMaps


def attention_rollout(weights: np.ndarray) -> np.ndarray:
    """``[N, N]`` rollout of attention weights ``[L, H, N, N]``: ``R = A_L ... A_1`` with
    ``A_l = rownorm(mean_h W_lh + I)``; row ``i`` is the share of node ``i``'s final state drawn
    from each input node (rows sum to 1).

    Example:
        >>> w = np.array([[[[0.0, 1.0], [0.0, 1.0]]]])  # one layer, one head: both attend to node 1
        >>> attention_rollout(w).tolist()
        [[0.5, 0.5], [0.0, 1.0]]
    """
    weights = np.asarray(weights, dtype=np.float64)
    n = weights.shape[-1]
    rollout = np.eye(n)
    for layer in weights:
        step = layer.mean(axis=0) + np.eye(n)
        rollout = (step / step.sum(axis=1, keepdims=True)) @ rollout
    return rollout


def atom_importance(maps: AttentionMaps) -> pd.DataFrame:
    """One row per input atom: ``atom`` (index), ``element`` and ``importance`` (sums to 1): the
    rollout row of the readout (the virtual node, else the mean over atoms) on each atom.

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.insight import attention_maps
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("grpe", num_layers=2, hidden_dim=16, num_heads=2)
        >>> table = atom_importance(attention_maps(build_model(p.model), MoleculeFeaturizer(p.featurizer, p.relation), "CCO"))
        >>> table.columns.tolist(), table["element"].tolist(), round(float(table["importance"].sum()), 6)
        (['atom', 'element', 'importance'], ['C', 'C', 'O'], 1.0)
    """
    rollout = attention_rollout(maps.weights)
    atoms = np.flatnonzero(maps.node_atoms >= 0)
    readout = rollout[maps.virtual_index] if maps.virtual_index is not None else rollout[atoms].mean(axis=0)
    share = readout[atoms] / readout[atoms].sum()
    importance = np.zeros(maps.mol.GetNumAtoms())
    importance[maps.node_atoms[atoms]] = share
    elements = [atom.GetSymbol() for atom in maps.mol.GetAtoms()]
    return pd.DataFrame({"atom": np.arange(len(importance)), "element": elements, "importance": importance})
