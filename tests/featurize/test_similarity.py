"""Nearest-neighbour Tanimoto similarity on packed Morgan bits against RDKit's own."""
from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem, DataStructs
from rdkit.Chem import rdFingerprintGenerator

from conftest_models import freesolv_rows
from dgl_graphtx.featurize.similarity import nearest_similarity, packed_fingerprints


def test_nearest_similarity_matches_rdkit():
    smiles = freesolv_rows(0, 90)["smiles"].tolist()
    query, reference = smiles[:37], smiles[37:]
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
    reference_fps = [generator.GetFingerprint(Chem.MolFromSmiles(s)) for s in reference]
    expected = [max(DataStructs.BulkTanimotoSimilarity(generator.GetFingerprint(Chem.MolFromSmiles(s)), reference_fps)) for s in query]
    packed = packed_fingerprints(reference)
    assert packed.shape == (53, 256) and packed.dtype == np.uint8
    for block in (5, 2048):  # several blocks of query and reference, and one
        assert nearest_similarity(packed_fingerprints(query), packed, block=block) == pytest.approx(expected, abs=1e-12)
    assert np.isnan(nearest_similarity(packed_fingerprints(query), packed[:0])).all()


def test_an_unreadable_molecule_has_no_bits_and_similarity_zero():
    packed = packed_fingerprints(["not a smiles", "CCO"])
    assert not packed[0].any() and nearest_similarity(packed[:1], packed).tolist() == [0.0]  # RDKit: 0 for two empty ones
