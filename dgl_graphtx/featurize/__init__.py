"""Molecules to DGL graphs: featurizers, 3-D coordinates and the combined :class:`MoleculeFeaturizer`."""
from .config import FeaturizerConfig, SizeLimits
from .conformer import embed_coordinates, has_3d_conformer, molecule_coordinates
from .molecule import (MOLECULE_BOND_VOCAB, MoleculeFeaturizer, RejectedMolecule, describe_molecule, featurize_each, parse_smiles,
                       smiles_to_graphs, to_heavy_atom_mol, to_mol)
from .ogb_features import OGB_ATOM_FEATURE_DIMS, OGB_BOND_FEATURE_DIMS, OGBAtomFeaturizer, OGBBondFeaturizer

__all__ = [
    "FeaturizerConfig",
    "MoleculeFeaturizer",
    "MOLECULE_BOND_VOCAB",
    "OGBAtomFeaturizer",
    "SizeLimits",
    "OGBBondFeaturizer",
    "OGB_ATOM_FEATURE_DIMS",
    "OGB_BOND_FEATURE_DIMS",
    "RejectedMolecule",
    "describe_molecule",
    "embed_coordinates",
    "featurize_each",
    "has_3d_conformer",
    "molecule_coordinates",
    "parse_smiles",
    "smiles_to_graphs",
    "to_heavy_atom_mol",
    "to_mol",
]
