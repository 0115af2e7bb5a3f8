"""Per-atom explanations of predictions: which target is explained and in which units, the
contributions of one batch mapped to the input atoms, and the columns and long table they give.

A prediction table explained by :class:`~dgl_graphtx.inference.Predictor` (``explain=`` or
:meth:`~dgl_graphtx.inference.Predictor.explain`; ``dgl-graphtx predict --explain``) gets two
columns for the explained target ``t``: ``t_baseline``, the model's output for the molecule with
its atoms' embeddings at the baseline, and ``t_contributions``, the list of the atoms'
contributions in the order of the input's atoms (as written in the SMILES, or in the SD record).
They sum to the model's output minus ``t_baseline`` (integrated gradients,
:mod:`~dgl_graphtx.insight.integrated_gradients`): in target units for regression (``t_pred``
unless MC dropout averages it), in logits for classification.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch

from ..datasets.featurized import Featurized
from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from ..featurize.molecule import MoleculeLike, prepare_input, to_mol
from ..insight.integrated_gradients import BASELINES, DEFAULT_STEPS, chosen_baseline, integrated_gradients
from ..models import MoleculeModel
from ..nn.graph_tensors import GraphLike
from ..validation import check_number

logger = logging.getLogger("dgl_graphtx")

#: Most Gauss-Lobatto nodes of an explanation.
MAX_STEPS = 256
#: Significant digits of the contributions and baselines written to a table (float32's).
DIGITS = 7


@dataclass(frozen=True)
class ExplainSettings:
    """What an explanation explains.

    Args:
        target: the explained target's name (default: the first target of the checkpoint).
        steps: Gauss-Lobatto nodes of the integral, both ends included (2 to :data:`MAX_STEPS`);
            each molecule goes through the model this many times.
        baseline: where the integral starts: ``zero``, ``mean`` or ``auto`` (see
            :mod:`~dgl_graphtx.insight.integrated_gradients`).

    Example:
        >>> ExplainSettings(steps=1)
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: explanation steps must be an integer in [2, 256], got 1
    """

    target: Optional[str] = None
    steps: int = DEFAULT_STEPS
    baseline: str = "auto"

    def __post_init__(self) -> None:
        check_number("explanation steps", self.steps, 2, MAX_STEPS, integer=True)
        if self.baseline not in BASELINES:
            raise ConfigError(f"the explanation baseline must be one of {', '.join(BASELINES)}, got {self.baseline!r}")


class ExplainedOutput(NamedTuple):
    """The model output an explanation covers: ``target`` (its name), ``column`` of the forward
    output, the ``steps`` and ``baseline`` (``zero`` or ``mean``), and the ``scale`` and ``shift``
    that turn the output into the reported units (the target statistics for regression; 1 and 0,
    logits, for classification)."""

    target: str
    column: int
    steps: int
    baseline: str
    scale: float
    shift: float


def explained_output(model: MoleculeModel, target_names: Sequence[str], settings: ExplainSettings) -> ExplainedOutput:
    """The output of ``model`` that ``settings`` ask to explain; a target the model lacks, or a
    multiclass model, is a one-line error.

    Example:
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> explained_output(build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)), ["y"], ExplainSettings(target="logP"))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: cannot explain target 'logP': the model predicts ['y']
    """
    config = model.config
    if config.molecules.several:
        raise ConfigError(f"explanations cover models of one molecule per row; this one combines {config.molecules.count} "
                          "molecules per row (per-molecule explanations are not implemented)")
    if not target_names:
        raise ConfigError("explanations cover molecule-level targets; this model predicts atom- or bond-level targets only")
    if config.task == "multiclass":
        raise ConfigError("explanations cover regression and binary classification models; this one is multiclass "
                          "(per-class explanations are not implemented)")
    target = settings.target if settings.target is not None else target_names[0]
    if target not in target_names:
        raise ConfigError(f"cannot explain target {target!r}: the model predicts {list(target_names)}")
    column = list(target_names).index(target)
    if model.kernel is not None and column in model.kernel.alone():
        logger.warning("the fingerprint kernel makes this model's whole prediction of %r (the network's blend weight is 0): "
                       "every atom contribution is 0 (train with --kernel none for atom-level explanations)", target)
    baseline = chosen_baseline(model, settings.baseline)
    if config.task != "regression":
        return ExplainedOutput(target, column, settings.steps, baseline, 1.0, 0.0)
    return ExplainedOutput(target, column, settings.steps, baseline, float(model.target_std[column]), float(model.target_mean[column]))


def with_settings(explained: Optional[ExplainedOutput], target: Optional[str] = None, steps: Optional[int] = None,
                  baseline: Optional[str] = None) -> ExplainSettings:
    """The settings given, each one not given taken from ``explained`` (else the default).

    Example:
        >>> with_settings(ExplainedOutput("y", 0, 16, "zero", 1.0, 0.0), target="z")
        ExplainSettings(target='z', steps=16, baseline='zero')
    """
    default = ExplainSettings() if explained is None else ExplainSettings(explained.target, explained.steps, explained.baseline)
    return ExplainSettings(default.target if target is None else target, default.steps if steps is None else steps,
                           default.baseline if baseline is None else baseline)


def contributions_column(target: str) -> str:
    """The column of a target's per-atom contributions.

    Example:
        >>> contributions_column("logP")
        'logP_contributions'
    """
    return f"{target}_contributions"


def baseline_column(target: str) -> str:
    """The column of a target's baseline output (atoms at the baseline embedding).

    Example:
        >>> baseline_column("logP")
        'logP_baseline'
    """
    return f"{target}_baseline"


def input_atom_owners(graph: GraphLike, num_nodes: int) -> torch.Tensor:
    """For each of the first ``num_nodes`` nodes of ``graph``, the node that carries it in the
    input: itself, or for a hydrogen the featurizer added (``input_atom`` -1), its bonded atom.

    Example:
        >>> from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
        >>> graph, _ = MoleculeFeaturizer(FeaturizerConfig(explicit_hydrogens=True))("CO")
        >>> input_atom_owners(graph, graph.num_nodes()).tolist()  # C, O, then 3 H on C and one on O
        [0, 1, 0, 0, 0, 1]
    """
    owner = torch.arange(num_nodes)
    added = graph.ndata["input_atom"][:num_nodes].cpu() < 0
    if bool(added.any()):
        src, dst = (t.cpu().long() for t in graph.edges())
        inside = src < num_nodes
        src, dst = src[inside], dst[inside]
        hydrogen = added[src]
        owner[src[hydrogen]] = dst[hydrogen]
    return owner


def explain_batch(model: MoleculeModel, explained: ExplainedOutput, graph: GraphLike,
                  relation_graph: GraphLike) -> List[Tuple[float, np.ndarray]]:
    """``(baseline, contributions)`` of each molecule of a batch that holds its molecules
    ``explained.steps`` times (:func:`~dgl_graphtx.insight.integrated_gradients.repeated_batch`), in
    the reported units; the contributions in the order of the input's atoms, those of hydrogens the
    featurizer added folded into their atom."""
    found = integrated_gradients(model, graph, relation_graph, explained.steps, explained.column, explained.baseline)
    counts = graph.batch_num_nodes()[:len(found.prediction)].cpu().tolist()
    num_nodes = sum(counts)
    atoms = found.atoms.cpu().double() * explained.scale
    folded = torch.zeros(num_nodes, dtype=torch.float64).index_add_(0, input_atom_owners(graph, num_nodes), atoms)
    input_atom = graph.ndata["input_atom"][:num_nodes].cpu()
    baselines = (found.baseline.cpu().double() * explained.scale + explained.shift).tolist()
    out = []
    for baseline, values, order in zip(baselines, torch.split(folded, counts), torch.split(input_atom, counts)):
        kept = order >= 0
        contributions = np.zeros(int(kept.sum()))
        contributions[order[kept].numpy()] = values[kept].numpy()
        out.append((baseline, contributions))
    return out


#: What :func:`explain_featurized` reads from a predictor: its ``_forward``, yielding ``(positions,
#: result or None, error)`` for one batch of featurized molecules, each repeated ``copies`` times.
Forward = Callable[[Featurized, List[int], Callable[[GraphLike, GraphLike], Any], int],
                   Iterator[Tuple[List[int], Optional[Any], Optional[str]]]]


def explain_featurized(model: MoleculeModel, explained: ExplainedOutput, done: Featurized, batches: Iterable[List[int]],
                       forward: Forward) -> List[Optional[Tuple[float, np.ndarray]]]:
    """Per input row of ``done``, ``(baseline, contributions)`` (``None`` for a molecule that was
    not featurized, or whose explanation ran out of memory: its ``error`` is set then), the
    ``batches`` of positions run through ``forward``."""
    found: List[Optional[Tuple[float, np.ndarray]]] = [None] * len(done.errors)
    step = functools.partial(explain_batch, model, explained)
    for batch in batches:
        for positions, result, error in forward(done, batch, step, explained.steps):
            for position, row in enumerate(done.rows[p] for p in positions):
                if result is None:
                    done.errors[row] = error
                else:
                    found[row] = result[position]
    return found


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def add_explanation_columns(table: pd.DataFrame, explained: ExplainedOutput, found: Sequence[Optional[Tuple[float, np.ndarray]]]) -> None:
    """Insert ``<t>_baseline`` and ``<t>_contributions`` (lists, input atom order) before the
    ``error`` column of a prediction table, one entry per row (``None``: not explained).

    Example:
        >>> table = pd.DataFrame({"smiles": ["CO", "C1C"], "y_pred": [1.0, None], "error": [None, "bad"]})
        >>> add_explanation_columns(table, ExplainedOutput("y", 0, 4, "zero", 1.0, 0.0), [(0.25, np.array([0.5, 0.25])), None])
        >>> table.columns.tolist(), table["y_contributions"].tolist()
        (['smiles', 'y_pred', 'y_baseline', 'y_contributions', 'error'], [[0.5, 0.25], None])
    """
    at = table.columns.get_loc("error")
    assert isinstance(at, int)  # one column of that name
    table.insert(at, baseline_column(explained.target), [np.nan if f is None else _rounded(f[0]) for f in found])
    table.insert(at + 1, contributions_column(explained.target),
                 [None if f is None else [_rounded(v) for v in f[1]] for f in found])


class Explanations(NamedTuple):
    """What :meth:`~dgl_graphtx.inference.Predictor.explain` returns.

    Attributes:
        table: the prediction table with the ``<t>_baseline`` and ``<t>_contributions`` columns.
        atoms: one row per atom of every explained molecule: ``row`` (of the input: its label in
            ``table``'s index, which a pandas Series input keeps), ``smiles``
            (or the given identifier), ``atom`` (index in the input), ``element`` and ``contribution``.
    """

    table: pd.DataFrame
    atoms: pd.DataFrame


def atom_table(table: pd.DataFrame, molecules: Sequence[MoleculeLike], target: str, featurizer: FeaturizerConfig) -> pd.DataFrame:
    """The long table of :class:`Explanations` from an explained prediction table and its inputs.

    Example:
        >>> table = pd.DataFrame({"smiles": ["OC"], "y_contributions": [[0.5, 0.25]]})
        >>> atom_table(table, ["OC"], "y", FeaturizerConfig()).values.tolist()
        [[0, 'OC', 0, 'O', 0.5], [0, 'OC', 1, 'C', 0.25]]
    """
    rows: List[Tuple[int, str, int, str, float]] = []
    for row, (name, contributions) in enumerate(zip(table["smiles"], table[contributions_column(target)])):
        if contributions is None:
            continue
        mol = to_mol(prepare_input(molecules[row], featurizer))
        rows.extend((row, name, atom.GetIdx(), atom.GetSymbol(), value) for atom, value in zip(mol.GetAtoms(), contributions))
    return pd.DataFrame(rows, columns=["row", "smiles", "atom", "element", "contribution"])
