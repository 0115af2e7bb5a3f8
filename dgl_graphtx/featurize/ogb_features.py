"""OGB's categorical atom and bond features as dgllife-compatible featurizer objects.

The features are those of :mod:`ogb.utils.features` (9 per atom, 3 per bond), stored as int64 so
that models can embed each column, with one change: the chirality column (atom column 1) holds the
atom's CIP label (1: R, 2: S; 3: a stereo tag RDKit could not label; 0: none) instead of RDKit's
local CW/CCW tag. The local tag is defined relative to the order of the atom's bonds, so it changes
with the way a SMILES is written and can even make enantiomers look alike; the CIP label does not.
The objects follow dgllife's featurizer protocol: calling one on an RDKit molecule returns
``{field: tensor}``, and ``feat_size()`` gives the column count, so they plug into
:func:`dgllife.utils.mol_to_bigraph` like ``CanonicalAtomFeaturizer``.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from ogb.utils.features import (
    allowable_features,
    atom_to_feature_vector,
    bond_to_feature_vector,
    get_atom_feature_dims,
    get_bond_feature_dims,
)
from rdkit import Chem

#: Number of categories of each OGB atom feature (atomic number, chirality, degree, formal charge,
#: number of hydrogens, radical electrons, hybridisation, aromatic, in ring).
OGB_ATOM_FEATURE_DIMS: Tuple[int, ...] = tuple(get_atom_feature_dims())
#: Number of categories of each OGB bond feature (bond type, stereo, conjugated).
OGB_BOND_FEATURE_DIMS: Tuple[int, ...] = tuple(get_bond_feature_dims())
#: Names of the atom and of the bond feature columns, in order.
OGB_FEATURE_NAMES: Dict[str, Tuple[str, ...]] = {
    "atom": ("atomic number", "chirality", "degree", "formal charge", "hydrogens", "radical electrons", "hybridisation",
             "aromatic", "in ring"),
    "bond": ("bond type", "stereo", "conjugated"),
}


def ogb_feature_value(level: str, column: int, value: int) -> str:
    """Words for category ``value`` of column ``column`` of the ``atom`` or ``bond`` features.

    Example:
        >>> ogb_feature_value("atom", 1, 1), ogb_feature_value("atom", 6, 3), ogb_feature_value("bond", 1, 2)
        ('chirality R', 'hybridisation SP3D', 'stereo STEREOE')
    """
    keys = [k for k in allowable_features if (k.startswith("possible_bond") or k == "possible_is_conjugated_list") == (level == "bond")]
    if level == "atom" and column == 1:
        labels: List[object] = ["none", *CIP_CATEGORIES, "stereo without a CIP label"]
    else:
        labels = list(allowable_features[keys[column]])
    shown = labels[value] if 0 <= value < len(labels) else value
    return f"{OGB_FEATURE_NAMES[level][column]} {shown}"


class _OGBFeaturizer:
    """Shared part of the OGB featurizers: the output field, category counts and dgllife protocol."""

    dims: Tuple[int, ...] = ()

    def __init__(self, field: str = "feat") -> None:
        self.field = field

    def feat_size(self, feat_name: Optional[str] = None) -> int:
        """Number of feature columns (dgllife protocol)."""
        return len(self.dims)

    def rows(self, mol: Chem.Mol) -> List[List[int]]:
        raise NotImplementedError

    def __call__(self, mol: Chem.Mol) -> Dict[str, torch.Tensor]:
        feats = torch.from_numpy(np.array(self.rows(mol), dtype=np.int64).reshape(-1, len(self.dims)))
        return {self.field: feats}


class OGBAtomFeaturizer(_OGBFeaturizer):
    """Atom featurizer producing OGB's 9 categorical atom features as int64.

    Args:
        field: key under which the features are returned (and stored in ``ndata``).

    Example:
        >>> from rdkit import Chem
        >>> feats = OGBAtomFeaturizer()(Chem.MolFromSmiles("CO"))
        >>> feats["feat"].shape, feats["feat"].dtype
        (torch.Size([2, 9]), torch.int64)
    """

    dims = OGB_ATOM_FEATURE_DIMS

    def rows(self, mol: Chem.Mol) -> List[List[int]]:
        return [_atom_row(atom) for atom in mol.GetAtoms()]


def _atom_row(atom: Chem.Atom) -> List[int]:
    """OGB's atom categories, with the CIP label as the chirality (:func:`cip_category`)."""
    row = atom_to_feature_vector(atom)
    row[1] = cip_category(atom)
    return row


#: Chirality categories of the atom features (same slots as OGB's CW / CCW / OTHER).
CIP_CATEGORIES = {"R": 1, "S": 2}


def cip_category(atom: Chem.Atom) -> int:
    """1 for an R centre, 2 for S, 3 for a stereo tag without a CIP label, 0 otherwise (RDKit's
    CIP labels, set by stereo perception when a molecule is parsed).

    Example:
        >>> from rdkit import Chem
        >>> [cip_category(a) for a in Chem.MolFromSmiles("N[C@@H](C)C(=O)O").GetAtoms()][:2]
        [0, 2]
    """
    if atom.HasProp("_CIPCode"):
        return CIP_CATEGORIES.get(atom.GetProp("_CIPCode"), 3)
    return 3 if atom.GetChiralTag() != Chem.ChiralType.CHI_UNSPECIFIED else 0


class OGBBondFeaturizer(_OGBFeaturizer):
    """Bond featurizer producing OGB's 3 categorical bond features as int64.

    Rows follow dgllife's bigraph convention: bond ``i`` gives rows ``2i`` (begin -> end) and
    ``2i + 1`` (end -> begin). A molecule without bonds gives a ``[0, 3]`` tensor, so graphs of
    single atoms batch with the rest.

    Args:
        field: key under which the features are returned (and stored in ``edata``).

    Example:
        >>> from rdkit import Chem
        >>> OGBBondFeaturizer()(Chem.MolFromSmiles("C=O"))["feat"]
        tensor([[1, 0, 0],
                [1, 0, 0]])
    """

    dims = OGB_BOND_FEATURE_DIMS

    def rows(self, mol: Chem.Mol) -> List[List[int]]:
        return [vec for bond in mol.GetBonds() for vec in [bond_to_feature_vector(bond)] * 2]
