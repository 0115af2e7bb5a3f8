"""Which element each node of a molecular graph is, and how many hydrogens it carries as a
feature rather than as nodes, read back from its atom features.

Both atom featurizers encode the element: OGB's first column is the atomic number minus one,
dgllife's canonical features start with a one-hot of :data:`CANONICAL_ELEMENTS` (all zeros for any
other element). Both encode the number of attached hydrogens (OGB's fifth column; the canonical
features' last five columns, a one-hot of 0-4). Per-element quantities, such as the reference
values of :mod:`dgl_graphtx.models.atom_reference`, index by these element classes.
"""
from __future__ import annotations

from typing import Tuple

import torch
from rdkit import Chem

from .ogb_features import OGB_ATOM_FEATURE_DIMS

#: The element one-hot of dgllife's ``CanonicalAtomFeaturizer`` (``atom_type_one_hot``'s default
#: set), in column order; class ``len(CANONICAL_ELEMENTS)`` stands for every other element.
CANONICAL_ELEMENTS: Tuple[str, ...] = (
    "C", "N", "O", "S", "F", "Si", "P", "Cl", "Br", "Mg", "Na", "Ca", "Fe", "As", "Al", "I", "B", "V", "K", "Tl",
    "Yb", "Sb", "Sn", "Ag", "Pd", "Co", "Se", "Ti", "Zn", "H", "Li", "Ge", "Cu", "Au", "Ni", "Cd", "In", "Mn", "Zr",
    "Cr", "Pt", "Hg", "Pb",
)
#: OGB's column of the number of attached hydrogens (``GetTotalNumHs``).
OGB_HYDROGENS_COLUMN = 4
#: Width of the canonical features' one-hot of attached hydrogens (0-4), their last columns.
CANONICAL_HYDROGENS_WIDTH = 5


def element_classes(atom_features: str) -> int:
    """Number of element classes of an atom featurizer: 119 for ``ogb`` (atomic numbers 1-118 and
    "other"), 44 for ``canonical`` (its 43 elements and "other").

    Example:
        >>> element_classes("ogb"), element_classes("canonical")
        (119, 44)
    """
    return OGB_ATOM_FEATURE_DIMS[0] if atom_features == "ogb" else len(CANONICAL_ELEMENTS) + 1


def element_index(feat: torch.Tensor, atom_features: str) -> torch.Tensor:
    """The element class ``[N]`` (int64) of each node from its features ``ndata["feat"]``.

    Example:
        >>> from dgl_graphtx.featurize import FeaturizerConfig, smiles_to_graphs
        >>> g, _ = smiles_to_graphs("OC(F)Cl")
        >>> [element_symbol(int(i), "ogb") for i in element_index(g.ndata["feat"], "ogb")]
        ['O', 'C', 'F', 'Cl']
        >>> g, _ = smiles_to_graphs("OC(F)Cl", FeaturizerConfig(atom_features="canonical"))
        >>> [element_symbol(int(i), "canonical") for i in element_index(g.ndata["feat"], "canonical")]
        ['O', 'C', 'F', 'Cl']
    """
    if atom_features == "ogb":
        return feat[:, 0].long()
    one_hot = feat[:, : len(CANONICAL_ELEMENTS)]
    return torch.where(one_hot.amax(dim=1) > 0, one_hot.argmax(dim=1), len(CANONICAL_ELEMENTS))


def hydrogen_class(atom_features: str) -> int:
    """The element class of hydrogen.

    Example:
        >>> hydrogen_class("ogb"), hydrogen_class("canonical")
        (0, 29)
    """
    return 0 if atom_features == "ogb" else CANONICAL_ELEMENTS.index("H")


def attached_hydrogens(feat: torch.Tensor, atom_features: str) -> torch.Tensor:
    """The hydrogens ``[N]`` (int64) each node carries in its features: its implicit and
    explicit hydrogens when they are not nodes (0 on every atom when they are, as after
    ``Chem.AddHs``). The canonical features encode 0-4; more count as 0.

    Example:
        >>> from dgl_graphtx.featurize import FeaturizerConfig, smiles_to_graphs
        >>> g, _ = smiles_to_graphs("CC=O")
        >>> attached_hydrogens(g.ndata["feat"], "ogb").tolist()
        [3, 1, 0]
        >>> g, _ = smiles_to_graphs("CC=O", FeaturizerConfig(atom_features="canonical", explicit_hydrogens=True))
        >>> attached_hydrogens(g.ndata["feat"], "canonical").tolist()
        [0, 0, 0, 0, 0, 0, 0]
    """
    if atom_features == "ogb":
        return feat[:, OGB_HYDROGENS_COLUMN].long()
    one_hot = feat[:, -CANONICAL_HYDROGENS_WIDTH:]
    return torch.where(one_hot.amax(dim=1) > 0, one_hot.argmax(dim=1), 0)


def element_symbol(index: int, atom_features: str) -> str:
    """The element symbol of class ``index`` (``"other"`` for the catch-all class).

    Example:
        >>> element_symbol(0, "ogb"), element_symbol(29, "canonical"), element_symbol(43, "canonical")
        ('H', 'H', 'other')
    """
    if atom_features == "ogb":
        return Chem.GetPeriodicTable().GetElementSymbol(index + 1) if index < OGB_ATOM_FEATURE_DIMS[0] - 1 else "other"
    return CANONICAL_ELEMENTS[index] if index < len(CANONICAL_ELEMENTS) else "other"
