"""Atom- and bond-level outputs next to the molecule-level head: partial charges, NMR shifts, bond
orders, with an optional sum constraint (predicted atom values add up to a given molecular value,
e.g. partial charges to the formal charge).

:class:`LevelHeads` reads the encoded atom states: the atom head each atom's, the bond head each
bond's two atoms (symmetrically) and its bond features. Like the molecule-level regression targets,
atom and bond targets are standardised with training statistics stored in the model; a constrained
atom target is corrected per molecule in target units, each atom taking a learned positive share
``w_i / sum_j w_j`` of what the sum misses (as chemprop's constrained atom outputs), so the sum
holds exactly whatever the network predicts.

The labels travel with the molecular graph: ``ndata["atom_targets"]`` ``[N, A]``,
``edata["bond_targets"]`` ``[E, C]`` (NaN where missing; both directions of a bond hold its value)
and the constrained sums ``ndata["atom_totals"]`` ``[N, S]`` (the molecule's values on each of its
atoms); bond ``i`` of a molecule is its edges ``2i`` and ``2i + 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..featurize.molecule import ATOM_TOTALS
from ..nn import graph_ops as ops
from ..nn.graph_tensors import GraphLike
from .encoders import FeatureEncoder

#: The most atom or bond targets.
MAX_LEVEL_TARGETS = 1024


@dataclass(frozen=True)
class LevelOptions:
    """The atom- and bond-level outputs of a model (the ``model.levels`` config section, set from
    the data's ``data.atom_targets`` / ``data.bond_targets`` / ``data.atom_sums``, never by hand).

    Args:
        atom_tasks: atom-level regression targets.
        bond_tasks: bond-level regression targets.
        atom_sums: the atom targets (0-based indices) whose values are constrained to add up to a
            molecular value given with each molecule (``ndata["atom_totals"]``, in this order).

    Example:
        >>> LevelOptions(atom_tasks=2, atom_sums=(1,)).any
        True
        >>> LevelOptions(atom_tasks=1, atom_sums=(1,))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: levels.atom_sums must name distinct atom targets among the 1 (0-based), got (1,)
    """

    atom_tasks: int = 0
    bond_tasks: int = 0
    atom_sums: Tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("atom_tasks", "bond_tasks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LEVEL_TARGETS:
                raise ConfigError(f"levels.{name} must be an integer in [0, {MAX_LEVEL_TARGETS}], got {value!r}")
        sums = tuple(self.atom_sums)
        if len(set(sums)) != len(sums) or not all(isinstance(t, int) and 0 <= t < self.atom_tasks for t in sums):
            raise ConfigError(f"levels.atom_sums must name distinct atom targets among the {self.atom_tasks} (0-based), "
                              f"got {sums!r}")
        object.__setattr__(self, "atom_sums", sums)

    @property
    def any(self) -> bool:
        """Whether the model has atom- or bond-level outputs."""
        return bool(self.atom_tasks or self.bond_tasks)


class LevelOutputs(NamedTuple):
    """A model's outputs at every level, in training space (standardised): ``molecules`` ``[B, W]``
    (as ``forward`` returns them), ``atoms`` ``[N, A]`` and ``bonds`` ``[N_bonds, C]`` (bond ``i``
    of the batch: edges ``2i``, ``2i + 1`` of the molecular graph), ``None`` where the model has none."""

    molecules: torch.Tensor
    atoms: Optional[torch.Tensor]
    bonds: Optional[torch.Tensor]


def _mlp(width: int, hidden: int, outputs: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, outputs))


def bond_ends(graph: GraphLike) -> Tuple[torch.Tensor, torch.Tensor]:
    """The two atoms of every bond of a molecular graph ``([N_bonds], [N_bonds])``: the ends of
    its even edges (bond ``i`` is edges ``2i`` and ``2i + 1``, as every molecule has an even
    number of edges)."""
    src, dst = graph.edges()
    return src[0::2].long(), dst[0::2].long()


class LevelHeads(nn.Module):
    """The atom and bond heads of a model (see the module's description), with the statistics
    that standardise their targets.

    Example:
        >>> from dgl_graphtx.featurize import MoleculeFeaturizer
        >>> from dgl_graphtx.models import ModelConfig
        >>> heads = LevelHeads(ModelConfig(hidden_dim=8, num_heads=2, levels=LevelOptions(atom_tasks=1, bond_tasks=2)))
        >>> graph, _ = MoleculeFeaturizer()("CCO")
        >>> [tuple(t.shape) for t in heads(graph, torch.randn(3, 8))]
        [(3, 1), (2, 2)]
    """

    atom_mean: torch.Tensor  # buffers, registered in __init__
    atom_std: torch.Tensor
    bond_mean: torch.Tensor
    bond_std: torch.Tensor

    def __init__(self, config: Any) -> None:  # a ModelSettings (which imports this module)
        super().__init__()
        options, d = config.levels, config.hidden_dim
        self.sums = options.atom_sums
        self.atoms = _mlp(d, d, options.atom_tasks) if options.atom_tasks else None
        self.sum_weights = nn.Linear(d, len(self.sums)) if self.sums else None
        self.bond_features = (FeatureEncoder(config.bond_feature_dims, d, categorical=config.atom_features == "ogb", kind="bond")
                              if options.bond_tasks else None)
        self.bonds = _mlp(3 * d, d, options.bond_tasks) if options.bond_tasks else None
        for level, width in (("atom", options.atom_tasks), ("bond", options.bond_tasks)):
            self.register_buffer(f"{level}_mean", torch.zeros(width))
            self.register_buffer(f"{level}_std", torch.ones(width))

    def forward(self, graph: GraphLike, atoms: torch.Tensor) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """Atom outputs ``[N, A]`` and bond outputs ``[N_bonds, C]`` (standardised; ``None`` where
        the model has none) from the atom states ``atoms`` ``[N, d]`` of ``graph``."""
        atom_out = None if self.atoms is None else self._constrained(graph, atoms, self.atoms(atoms))
        if self.bonds is None or self.bond_features is None:
            return atom_out, None
        first, second = bond_ends(graph)
        ends = atoms.index_select(0, first), atoms.index_select(0, second)
        features = self.bond_features(graph.edata["feat"][0::2]).to(atoms.dtype)
        return atom_out, self.bonds(torch.cat([ends[0] + ends[1], ends[0] * ends[1], features], dim=-1))

    def _constrained(self, graph: GraphLike, atoms: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out`` with each constrained target shifted, per molecule, so that its values in target
        units add up to the molecule's total (where the total is given; NaN leaves it as it is)."""
        if not self.sums or self.sum_weights is None:
            return out
        if ATOM_TOTALS not in graph.ndata:
            raise ConfigError("this model constrains atom sums: give each molecule's totals (ndata['atom_totals'], "
                              "the --atom-sums sources it was trained with)")
        rows, counts = ops.node_graphs(graph), graph.batch_num_nodes()
        totals = graph.ndata[ATOM_TOTALS].to(out.dtype)[ops.first_nodes(graph)]  # [B, S]
        shares = F.softplus(self.sum_weights(atoms)).to(out.dtype) + 1e-6  # [N, S]
        columns = list(out.unbind(1))
        for j, t in enumerate(self.sums):
            mean, std = self.atom_mean[t].to(out.dtype), self.atom_std[t].to(out.dtype)
            current = ops.segment_sum(columns[t], rows, len(counts))  # standardised sum now
            wanted = (totals[:, j] - counts.to(out.dtype) * mean) / std
            gap = torch.where(torch.isnan(wanted), torch.zeros_like(wanted), wanted - current)
            share = shares[:, j] / ops.segment_sum(shares[:, j], rows, len(counts)).index_select(0, rows)
            columns[t] = columns[t] + share * gap.index_select(0, rows)
        return torch.stack(columns, dim=1)

    def to_target_space(self, level: str, values: torch.Tensor) -> torch.Tensor:
        """Standardised ``atom`` or ``bond`` outputs in target units."""
        return values * getattr(self, f"{level}_std") + getattr(self, f"{level}_mean")

    def normalize(self, level: str, labels: torch.Tensor) -> torch.Tensor:
        """``atom`` or ``bond`` labels in training space (standardised)."""
        return (labels - getattr(self, f"{level}_mean")) / getattr(self, f"{level}_std")

    def set_normalization(self, level: str, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Store the training statistics of the ``atom`` or ``bond`` targets."""
        getattr(self, f"{level}_mean").copy_(torch.as_tensor(mean, dtype=torch.float32))
        getattr(self, f"{level}_std").copy_(torch.as_tensor(std, dtype=torch.float32).clamp_min(1e-8))
