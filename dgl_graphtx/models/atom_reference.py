"""Per-element reference energies ("dressed atoms", SchNet's atomrefs): an additive baseline
``sum over atoms of r[element, target]`` that a model adds to its output.

An extensive target such as a total or atomization energy is mostly a sum of per-element
contributions; fitting those by least squares on the training molecules' element counts and
letting the network learn only the rest (a few kcal/mol instead of hundreds) is the field's usual
recipe for quantum-chemistry energies. :class:`AtomReference` holds the table and sums it over each
molecule's atoms; :func:`fit_atom_references` fits it. Hydrogens count whether they are nodes
(``explicit_hydrogens``) or features of their heavy atoms, so the baseline is the same function
of the molecular formula either way.
"""
from __future__ import annotations

from typing import List

import numpy as np
import torch
from torch import nn

from ..featurize.elements import attached_hydrogens, element_classes, element_index, element_symbol, hydrogen_class
from ..nn import graph_ops as ops
from ..nn.graph_tensors import GraphLike


def fit_atom_references(counts: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Least-squares reference values ``[C, T]`` (float64) with ``counts @ r ~ labels``, fitted
    per target on the molecules whose label is observed (not NaN).

    ``counts`` ``[M, C]`` holds each molecule's number of atoms of each element class. There is no
    intercept (the model's target mean takes the constant). Elements absent from the fitted molecules get 0;
    among the others the solution is the minimum-norm one.

    Example:
        >>> counts = torch.tensor([[4., 1.], [6., 2.], [2., 2.]])  # H and C atoms of CH4, C2H6, C2H2
        >>> fit_atom_references(counts, counts @ torch.tensor([[-0.5], [-38.0]])).squeeze(1).round(decimals=6).tolist()
        [-0.5, -38.0]
    """
    x = counts.double().cpu().numpy()
    y = labels.double().cpu().numpy()
    out = np.zeros((x.shape[1], y.shape[1]))
    for t in range(y.shape[1]):
        rows = ~np.isnan(y[:, t])
        present = x[rows].any(axis=0)
        if present.any():
            out[present, t] = np.linalg.lstsq(x[rows][:, present], y[rows, t], rcond=None)[0]
    return torch.from_numpy(out)


class AtomReference(nn.Module):
    """The reference table ``values`` ``[C, T]`` (a buffer, saved with the model) over the element
    classes of an atom featurizer (:func:`~dgl_graphtx.featurize.elements.element_classes`) and
    its sum over the atoms of each molecule.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> ref = AtomReference("ogb", num_tasks=1)
        >>> ref.values[[0, 5, 7]] = torch.tensor([[-0.5], [-38.0], [-75.0]])  # H, C and O (atomic number - 1)
        >>> g, _ = smiles_to_graphs("CCO")  # C2H6O, its hydrogens as atom features
        >>> ref(g).tolist(), ref.counts(g)[0, [0, 5, 7]].tolist()
        ([[-154.0]], [6.0, 2.0, 1.0])
    """

    values: torch.Tensor  # a buffer, registered in __init__

    def __init__(self, atom_features: str, num_tasks: int) -> None:
        super().__init__()
        self.atom_features = atom_features
        self.register_buffer("values", torch.zeros(element_classes(atom_features), num_tasks))

    def extra_repr(self) -> str:
        return f"atom_features={self.atom_features!r}, elements={self.values.shape[0]}, tasks={self.values.shape[1]}"

    def node_counts(self, graph: GraphLike) -> torch.Tensor:
        """Atoms of each element class per node ``[N, C]``: the node's element, and in the
        hydrogen class the hydrogens it carries as a feature."""
        feat = graph.ndata["feat"]
        element = element_index(feat, self.atom_features)[:, None]  # one-hot without one_hot's range check (a device read)
        counts = self.values.new_zeros(feat.shape[0], self.values.shape[0]).scatter_(1, element, 1.0)
        counts[:, hydrogen_class(self.atom_features)] += attached_hydrogens(feat, self.atom_features).to(counts.dtype)
        return counts

    def counts(self, graph: GraphLike) -> torch.Tensor:
        """Atoms of each element class per molecule ``[B, C]`` (its molecular formula)."""
        return ops.readout(graph, self.node_counts(graph), "sum")

    def forward(self, graph: GraphLike) -> torch.Tensor:
        """The reference value of each molecule ``[B, T]``: the sum of its atoms' entries."""
        return ops.readout(graph, self.node_counts(graph) @ self.values, "sum")

    def describe(self, target_names: List[str]) -> List[str]:
        """One line per target naming the non-zero references by element symbol.

        Example:
            >>> ref = AtomReference("ogb", num_tasks=1)
            >>> ref.values[0, 0] = -0.5
            >>> ref.describe(["u0"])
            ['u0: H -0.5']
        """
        lines = []
        for t, name in enumerate(target_names):
            used = torch.nonzero(self.values[:, t]).flatten().tolist()
            parts = ", ".join(f"{element_symbol(c, self.atom_features)} {float(self.values[c, t]):.6g}" for c in used)
            lines.append(f"{name}: {parts or 'none'}")
        return lines
