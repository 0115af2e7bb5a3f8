"""Atom- and bond-level targets in training (:mod:`~dgl_graphtx.models.levels`): their labels read
from the batch graphs, their loss next to the molecule-level one, their standardisation fitted on
the training part, and their predictions and metrics on a part (``atom_rmse``, ``bond_mae``, ...).

The loss of each level is the mean squared error over its observed labels in standardised units;
a batch's loss is the sum of the molecule-level loss and the level losses, each the mean over its
own labels, so a level with few labels per molecule weighs as much as one with many.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from ..datasets import MoleculeBatch
from ..featurize.molecule import ATOM_TARGETS, ATOMIC_NUMBER, BOND_TARGETS, INPUT_BOND
from ..models import MoleculeModel
from ..models.levels import LevelHeads, LevelOutputs, bond_ends
from ..nn import graph_ops as ops
from ..nn.graph_tensors import GraphLike
from .label_statistics import normalization_statistics, refuse_unlabelled_targets
from .losses import weighted_loss
from .metrics import compute_metrics
from .outputs import prediction_column
from .target_metrics import per_target_metrics

#: The levels below the molecule, as metric names and tables call them.
LEVELS = ("atom", "bond")


def level_target_names(model: MoleculeModel, record: Optional[Dict[str, Any]] = None) -> Dict[str, List[str]]:
    """The atom- and bond-level target names of ``model`` (``{}`` for a model without), from the
    checkpoint's record of them (:class:`~dgl_graphtx.datasets.level_targets.LevelTargets` as a
    dict), else ``atom target 0``, ...

    Example:
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.models.levels import LevelOptions
        >>> level_target_names(build_model(ModelConfig(num_layers=1, hidden_dim=8, num_heads=2, levels=LevelOptions(bond_tasks=1))))
        {'bond': ['bond target 0']}
    """
    options, record = model.config.levels, record or {}
    widths = {"atom": options.atom_tasks, "bond": options.bond_tasks}
    return {level: list(record.get(f"{level}_targets") or [f"{level} target {t}" for t in range(width)])
            for level, width in widths.items() if width}


def watched_metric(model: MoleculeModel, metrics: Sequence[str], names: Dict[str, List[str]]) -> str:
    """The metric early stopping and the best checkpoint watch: the first of ``metrics`` on the
    molecule-level targets, or on the first level with targets when there are none
    (``atom_rmse``, ...)."""
    if model.config.num_tasks or not names:
        return metrics[0]
    return f"{next(iter(names))}_{metrics[0]}"


def level_heads(model: MoleculeModel) -> LevelHeads:
    """``model``'s atom and bond heads (a model with atom- or bond-level targets)."""
    heads = model.levels
    assert heads is not None, "only a model with atom- or bond-level targets has level heads"
    return heads


def batch_labels(graph: GraphLike, level: str) -> torch.Tensor:
    """The ``atom`` labels ``[N, A]`` or ``bond`` labels ``[N_bonds, C]`` of a batch graph (NaN: missing)."""
    if level == "atom":
        return graph.ndata[ATOM_TARGETS]
    return graph.edata[BOND_TARGETS][0::2]


def level_outputs(outputs: LevelOutputs, level: str) -> Optional[torch.Tensor]:
    """The outputs of one level (``None`` when the model has no target there)."""
    return outputs.atoms if level == "atom" else outputs.bonds


def level_loss(model: MoleculeModel, outputs: LevelOutputs, graph: GraphLike) -> torch.Tensor:
    """The atom- and bond-level loss of a batch: per level, the mean squared error over its observed
    labels in standardised units, summed over the levels.

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.models.levels import LevelOptions
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=8, num_heads=2, levels=LevelOptions(atom_tasks=1)))
        >>> graph, _ = MoleculeFeaturizer()("CO")
        >>> graph.ndata["atom_targets"] = torch.tensor([[1.0], [float("nan")]])
        >>> float(level_loss(model, LevelOutputs(torch.zeros(1, 1), torch.tensor([[3.0], [9.0]]), None), graph))
        4.0
    """
    heads, total = level_heads(model), outputs.molecules.new_zeros(())
    for level in LEVELS:
        out = level_outputs(outputs, level)
        if out is None:
            continue
        labels = batch_labels(graph, level).to(out.dtype)
        mask = ~torch.isnan(labels)
        target = heads.normalize(level, torch.where(mask, labels, torch.zeros_like(labels)))
        total = total + weighted_loss("mse", out, target, mask)
    return total


def fit_level_statistics(model: MoleculeModel, batches: Iterable[MoleculeBatch], names: Mapping[str, Sequence[str]]) -> None:
    """Refuse atom or bond targets without a training label (``names``: each level's target names),
    and store the mean and standard deviation that standardise each of them, from ``batches`` (the
    training part)."""
    heads = level_heads(model)
    found: Dict[str, List[torch.Tensor]] = {level: [] for level in LEVELS if names.get(level)}
    for batch in batches:
        for level, parts in found.items():
            parts.append(batch_labels(batch.graph, level).double())
    for level, parts in found.items():
        labels = torch.cat(parts)
        refuse_unlabelled_targets(labels, [f"{level} target {name!r}" for name in names[level]])
        heads.set_normalization(level, *normalization_statistics(labels))


class LevelValues(NamedTuple):
    """One level's predictions on a part: ``predicted`` and ``labels`` ``[n, W]`` (target units;
    labels NaN where missing or unknown), and for each atom or bond its molecule's position in the
    part, its index in the input molecule (``input_index``) and (atoms) its atomic number."""

    predicted: np.ndarray
    labels: np.ndarray
    molecule: np.ndarray
    input_index: np.ndarray
    element: np.ndarray


def _level_rows(graph: GraphLike, level: str, out: torch.Tensor, heads: LevelHeads, first: int) -> LevelValues:
    """The :class:`LevelValues` of one batch (its molecules numbered from ``first``)."""
    rows = ops.node_graphs(graph) + first
    predicted = heads.to_target_space(level, out).double().cpu().numpy()
    known = ATOM_TARGETS in graph.ndata if level == "atom" else BOND_TARGETS in graph.edata
    labels = batch_labels(graph, level).double().cpu().numpy() if known else np.full(predicted.shape, np.nan)
    if level == "atom":
        elements = graph.ndata[ATOMIC_NUMBER] if ATOMIC_NUMBER in graph.ndata else torch.zeros_like(rows)
        return LevelValues(predicted, labels, rows.cpu().numpy(), graph.ndata["input_atom"].cpu().numpy(), elements.cpu().numpy())
    bonds = graph.edata[INPUT_BOND][0::2] if INPUT_BOND in graph.edata else torch.full_like(rows[:0], -1)
    molecule = rows.index_select(0, bond_ends(graph)[0]).cpu().numpy()
    return LevelValues(predicted, labels, molecule, bonds.cpu().numpy(), np.zeros(len(molecule), dtype=np.int64))


@torch.no_grad()
def predict_levels(model: MoleculeModel, batches: Iterable[MoleculeBatch], device: torch.device
                   ) -> Tuple[np.ndarray, Dict[str, LevelValues]]:
    """The molecule-level predictions ``[M, W]`` (target units) and each level's
    :class:`LevelValues` of a part, batch by batch in order, in eval mode."""
    heads, molecules = level_heads(model), []
    parts: Dict[str, List[LevelValues]] = {}
    first = 0
    with model.eval_mode():
        for batch in batches:
            batch = batch.to(device)
            outputs = model(batch.graph, batch.relation_graph, levels=True)
            molecules.append(model.to_target_space(outputs.molecules).double().cpu().numpy())
            for level in LEVELS:
                out = level_outputs(outputs, level)
                if out is not None:
                    parts.setdefault(level, []).append(_level_rows(batch.graph, level, out, heads, first))
            first += batch.batch_size
    joined = {level: LevelValues(*(np.concatenate(column) for column in zip(*found))) for level, found in parts.items()}
    width = model.config.prediction_width
    return (np.concatenate(molecules) if molecules else np.zeros((0, width))), joined


def level_metrics(values: Dict[str, LevelValues], metrics: Sequence[str]) -> Dict[str, float]:
    """Each level's regression ``metrics`` over its labelled atoms or bonds, mean over its targets,
    as ``<level>_<metric>`` (``atom_rmse``, ``bond_mae``, ...).

    Example:
        >>> found = LevelValues(np.array([[1.0], [2.0]]), np.array([[1.5], [np.nan]]), np.zeros(2), np.arange(2), np.ones(2))
        >>> level_metrics({"atom": found}, ["mae"])
        {'atom_mae': 0.5}
    """
    return {f"{level}_{name}": value for level, found in values.items()
            for name, value in compute_metrics("regression", found.labels, found.predicted, metrics).items()}


def level_per_target(values: Dict[str, LevelValues], names: Mapping[str, Sequence[str]]) -> Dict[str, Dict[str, Dict[str, float]]]:
    """``{level: {target: {metric: value}}}``: each atom or bond target scored alone."""
    return {level: per_target_metrics("regression", found.labels, found.predicted, names[level]) for level, found in values.items()}


def level_table(found: LevelValues, level: str, names: Sequence[str], rows: Sequence[int], identifiers: Sequence[str]) -> pd.DataFrame:
    """A long table of one level's predictions: ``row`` (of the input), ``smiles``, the ``atom``
    (or ``bond``) index in the input molecule, the atom's ``element``, then per target its label
    and ``<target>_pred``; each molecule's atoms (bonds) in the input's order. Hydrogens the
    featurizer added (index -1) are left out."""
    order = np.lexsort((found.input_index, found.molecule))
    found = LevelValues(*(column[order] for column in found))
    kept = found.input_index >= 0
    molecule = found.molecule[kept]
    table = pd.DataFrame({"row": np.asarray(rows)[molecule], "smiles": [identifiers[m] for m in molecule], level: found.input_index[kept]})
    if level == "atom":
        periodic = Chem.GetPeriodicTable()
        table["element"] = [periodic.GetElementSymbol(int(z)) if z > 0 else "" for z in found.element[kept]]
    for t, name in enumerate(names):
        table[name] = found.labels[kept, t].astype(np.float32)  # the labels as stored (float32)
        table[prediction_column(name)] = found.predicted[kept, t]
    return table
