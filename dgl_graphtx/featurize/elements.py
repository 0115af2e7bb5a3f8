"""Which element each node of a molecular graph is, read back from its atom features.

Both atom featurizers encode the element: OGB's first column is the atomic number minus one,
dgllife's canonical features start with a one-hot of :data:`CANONICAL_ELEMENTS` (plus one slot
for any other element). Per-element quantities, such as the reference energies of
:mod:`dgl_graphtx.models.atom_reference`, index by these classes.
"""
from __future__ import annotations

from typing import Tuple

import torch
from rdkit import Chem

from .ogb_features import OGB_ATOM_FEATURE_DIMS

#: The element one-hot of dgllife's ``CanonicalAtomFeaturizer`` (``atom_type_one_hot``'s default
#: set), in column order; column ``len(CANONICAL_ELEMENTS)`` holds every other element.
CANONICAL_ELEMENTS: Tuple[str, ...] = (
    "C", "N", "O", "S", "F", "Si", "P", "Cl", "Br", "Mg", "Na", "Ca", "Fe", "As", "Al", "I", "B", "V", "K", "Tl",
    "Yb", "Sb", "Sn", "Ag", "Pd", "Co", "Se", "Ti", "Zn", "H", "Li", "Ge", "Cu", "Au", "Ni", "Cd", "In", "Mn", "Zr",
    "Cr", "Pt", "Hg", "Pb",
)


def element_classes(atom_features: str) -> int:
    """Number of element classes of an atom featurizer: 119 for ``ogb`` (atomic numbers 1-118 and
    "other"), 44 for ``canonical``.

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
    return feat[:, : element_classes(atom_features)].argmax(dim=1)


def element_symbol(index: int, atom_features: str) -> str:
    """The element symbol of class ``index`` (``"other"`` for the catch-all class).

    Example:
        >>> element_symbol(0, "ogb"), element_symbol(29, "canonical"), element_symbol(43, "canonical")
        ('H', 'H', 'other')
    """
    if atom_features == "ogb":
        return Chem.GetPeriodicTable().GetElementSymbol(index + 1) if index < OGB_ATOM_FEATURE_DIMS[0] - 1 else "other"
    return CANONICAL_ELEMENTS[index] if index < len(CANONICAL_ELEMENTS) else "other"
