"""3-D coordinates of a molecule: its own conformer, or an RDKit ETKDG embedding with a fixed seed."""
from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdDistGeom, rdForceFieldHelpers

from ..errors import InvalidMoleculeError


def has_3d_conformer(mol: Chem.Mol) -> bool:
    """Whether ``mol`` carries a 3-D conformer (an SDF with z coordinates, say)."""
    return mol.GetNumConformers() > 0 and mol.GetConformer().Is3D()


def embed_coordinates(mol: Chem.Mol, seed: int = 0xF00D, mmff: bool = False) -> np.ndarray:
    """Generate coordinates with ETKDGv3 (hydrogens added for the embedding, then dropped).

    Returns ``[N, 3]`` float64 coordinates for the atoms of ``mol`` in its own order. Raises
    :class:`InvalidMoleculeError` naming the reason when RDKit cannot embed the molecule.

    Example:
        >>> from rdkit import Chem
        >>> embed_coordinates(Chem.MolFromSmiles("CCO")).shape
        (3, 3)
    """
    with_h = Chem.AddHs(mol)
    params = rdDistGeom.ETKDGv3()
    params.randomSeed = int(seed)  # type: ignore[assignment]  # RDKit's stubs type its parameter properties as the class
    if rdDistGeom.EmbedMolecule(with_h, params) != 0:
        params.useRandomCoords = True  # type: ignore[assignment]  # RDKit's documented fallback for hard cases (its stubs type the property as the class)
        if rdDistGeom.EmbedMolecule(with_h, params) != 0:
            raise InvalidMoleculeError("3-D embedding failed: RDKit ETKDG found no conformer")
    if mmff and rdForceFieldHelpers.MMFFHasAllMoleculeParams(with_h):
        rdForceFieldHelpers.MMFFOptimizeMolecule(with_h, maxIters=500)
    coords = with_h.GetConformer().GetPositions()
    return np.asarray(coords[: mol.GetNumAtoms()], dtype=np.float64)


def molecule_coordinates(mol: Chem.Mol, mode: str, seed: int = 0xF00D, mmff: bool = False) -> np.ndarray:
    """Coordinates for ``mode`` in ``{"conformer", "etkdg", "auto"}`` (see ``FeaturizerConfig``).

    Example:
        >>> from rdkit import Chem
        >>> molecule_coordinates(Chem.MolFromSmiles("O"), "auto").shape
        (1, 3)
    """
    if mode in ("conformer", "auto") and has_3d_conformer(mol):
        return np.asarray(mol.GetConformer().GetPositions(), dtype=np.float64)
    if mode == "conformer":
        raise InvalidMoleculeError(
            "no 3-D conformer in the input; use coordinates='auto' or 'etkdg' to generate one"
        )
    return embed_coordinates(mol, seed=seed, mmff=mmff)
