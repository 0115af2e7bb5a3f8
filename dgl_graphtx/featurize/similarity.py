"""Nearest-neighbour Tanimoto similarity of molecules to a reference set (the training part),
on Morgan bit fingerprints (radius 2, 2,048 bits) packed 8 bits a byte: 256 bytes a molecule,
so 100k training molecules take 25 MB in a checkpoint. Intersections are counted by a matrix
product of the unpacked bits, block by block, so memory stays bounded whatever the set sizes.
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
from rdkit import rdBase
from rdkit.Chem import rdFingerprintGenerator

from ..errors import InvalidMoleculeError
from .molecule import MoleculeLike, to_heavy_atom_mol

#: Morgan radius and bit count of the similarity fingerprints.
FINGERPRINT_RADIUS = 2
FINGERPRINT_BITS = 2048
#: Rows of the query and of the reference compared at once by :func:`nearest_similarity`
#: (two ``[block, 2048]`` float32 bit matrices and one ``[block, block]`` product: 48 MB).
SIMILARITY_BLOCK = 2048
#: Name of the column of prediction tables holding each molecule's nearest-neighbour similarity to the training part.
SIMILARITY_COLUMN = "similarity_to_training"


def packed_fingerprints(molecules: Iterable[MoleculeLike]) -> np.ndarray:
    """Morgan bit fingerprints (radius 2, 2,048 bits) of ``molecules``, packed: ``[N, 256]`` uint8.
    A molecule RDKit cannot read gets no bits (similarity 0 to everything).

    Example:
        >>> fps = packed_fingerprints(["CCO", "c1ccccc1", "not a smiles"])
        >>> fps.shape, fps.dtype.name, [int(np.unpackbits(f).sum()) for f in fps]
        ((3, 256), 'uint8', [6, 3, 0])
    """
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=FINGERPRINT_RADIUS, fpSize=FINGERPRINT_BITS)
    rows = []
    with rdBase.BlockLogs():
        for molecule in molecules:
            try:
                bits = generator.GetFingerprintAsNumPy(to_heavy_atom_mol(molecule)).astype(bool)
            except (InvalidMoleculeError, ValueError, RuntimeError):
                bits = np.zeros(FINGERPRINT_BITS, bool)
            rows.append(np.packbits(bits))
    return np.stack(rows) if rows else np.zeros((0, FINGERPRINT_BITS // 8), np.uint8)


def nearest_similarity(query: np.ndarray, reference: np.ndarray, block: int = SIMILARITY_BLOCK) -> np.ndarray:
    """Each ``query`` fingerprint's largest Tanimoto similarity ``|a & b| / |a | b|`` to the
    ``reference`` fingerprints (both packed, as :func:`packed_fingerprints`); two empty
    fingerprints have similarity 0, as in RDKit. ``[M]`` float64, NaN for all rows when the
    reference is empty.

    Example:
        >>> train = packed_fingerprints(["CCO", "CCCO"])
        >>> nearest_similarity(packed_fingerprints(["CCO", "CCCCO"]), train).round(3).tolist()
        [1.0, 0.583]
    """
    query, reference = np.asarray(query, np.uint8), np.asarray(reference, np.uint8)
    best = np.full(len(query), np.nan if not len(reference) else 0.0)
    reference_counts = _bit_counts(reference)
    for start in range(0, len(query), block):
        query_bits = np.unpackbits(query[start:start + block], axis=1).astype(np.float32)
        query_counts = query_bits.sum(axis=1, dtype=np.float64)
        found: Optional[np.ndarray] = None
        for offset in range(0, len(reference), block):
            reference_bits = np.unpackbits(reference[offset:offset + block], axis=1).astype(np.float32)
            shared = (query_bits @ reference_bits.T).astype(np.float64)  # exact: counts <= 2048
            union = query_counts[:, None] + reference_counts[None, offset:offset + block] - shared
            with np.errstate(invalid="ignore", divide="ignore"):
                similarity = np.where(union > 0, shared / union, 0.0)
            top = similarity.max(axis=1)
            found = top if found is None else np.maximum(found, top)
        if found is not None:
            best[start:start + block] = found
    return best


def _bit_counts(packed: np.ndarray) -> np.ndarray:
    """Set bits per packed fingerprint (``[N]`` float64)."""
    return np.unpackbits(packed, axis=1).sum(axis=1, dtype=np.float64) if len(packed) else np.zeros(0)
