"""Molecule-level feature generators and FeatureScaler."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from dgl_graphtx.errors import ConfigError, InvalidMoleculeError
from dgl_graphtx.featurize.descriptors import (
    AtomPairCounts,
    AvalonCounts,
    FeatureScaler,
    MorganCounts,
    RDKit2D,
    compute_features,
    feature_names,
    generator_spec,
    get_generator,
    kernel_fingerprints,
    kernel_segments,
)
from rdkit import Chem
from rdkit.Avalon import pyAvalonTools
from rdkit.Chem import AllChem, Descriptors, rdMolDescriptors

MOLECULES = ["CCO", "c1ccccc1C(=O)O", "CN1CCC[C@H]1c1cccnc1", "FC(F)(F)c1ccc(Cl)cc1"]


def test_rdkit2d_equals_rdkit_descriptors():
    names = feature_names(["rdkit2d"])
    ours = compute_features(["rdkit2d"], MOLECULES)
    for row, smiles in enumerate(MOLECULES):
        reference = Descriptors.CalcMolDescriptors(Chem.MolFromSmiles(smiles))
        assert list(reference) == names
        expected = np.array([reference[n] if math.isfinite(reference[n]) else np.nan for n in names], dtype=np.float64)
        np.testing.assert_array_equal(ours[row], expected)


def test_rdkit2d_computes_the_e_state_indices_afresh_for_each_molecule():
    """The four E-state extremes share one computation per molecule; indices an earlier call left
    on a molecule object (RDKit keeps them as ``_eStateIndices``) are never read."""
    mol = Chem.MolFromSmiles("c1ccccc1O")
    mol._eStateIndices = np.array([100.0, -100.0])  # stale values from elsewhere
    row = RDKit2D().compute(mol)
    names = feature_names(["rdkit2d"])
    for name in ("MaxEStateIndex", "MinEStateIndex", "MaxAbsEStateIndex", "MinAbsEStateIndex"):
        assert row[names.index(name)] == dict(Descriptors._descList)[name](Chem.MolFromSmiles("c1ccccc1O")), name


def test_rdkit2d_of_sd_record_with_explicit_hydrogens_equals_smiles():
    mol = Chem.AddHs(Chem.MolFromSmiles("c1ccccc1O"))
    # equal up to the rounding of sums taken in another atom order (partial charges)
    np.testing.assert_allclose(compute_features(["rdkit2d"], [mol]), compute_features(["rdkit2d"], ["Oc1ccccc1"]), rtol=1e-12, atol=1e-12)


def _dense(sparse, size):
    """An RDKit sparse count fingerprint as a dense row of ``size`` bins."""
    row = np.zeros(size)
    for bit, count in sparse.GetNonzeroElements().items():
        row[bit] = count
    return row


def test_morgan_counts_equal_hashed_count_fingerprint():
    spec = "morgan_counts:radius=2:size=256"
    values = compute_features([spec], MOLECULES)
    for row, smiles in enumerate(MOLECULES):
        old_api = AllChem.GetHashedMorganFingerprint(Chem.MolFromSmiles(smiles), 2, nBits=256)
        np.testing.assert_array_equal(values[row], _dense(old_api, 256))
    assert values[0].sum() == 6  # CCO: 3 radius-0 and 3 radius-1 environments; radius 2 repeats the middle atom's


def test_atom_pair_and_avalon_counts_equal_rdkits_hashed_count_fingerprints():
    pairs, avalon = compute_features(["atom_pair_counts:size=512"], MOLECULES), compute_features(["avalon_counts:size=256"], MOLECULES)
    for row, smiles in enumerate(MOLECULES):
        mol = Chem.MolFromSmiles(smiles)
        np.testing.assert_array_equal(pairs[row], _dense(rdMolDescriptors.GetHashedAtomPairFingerprint(mol, nBits=512), 512))
        np.testing.assert_array_equal(avalon[row], _dense(pyAvalonTools.GetAvalonCountFP(mol, nBits=256), 256))
    n = Chem.MolFromSmiles(MOLECULES[2]).GetNumAtoms()
    assert pairs[2].sum() == n * (n - 1) // 2  # one count per pair of heavy atoms
    assert feature_names(["atom_pair_counts:size=2", "avalon_counts:size=2"]) == ["atompair_0", "atompair_1", "avalon_0", "avalon_1"]


def test_a_kernel_spec_joins_count_fingerprints_side_by_side_and_refuses_other_generators():
    spec = "morgan_counts:radius=1:size=16+atom_pair_counts:size=8+avalon_counts:size=32"
    joined = kernel_fingerprints(spec, MOLECULES)
    assert joined.dtype == np.uint8 and kernel_segments(spec) == (16, 8, 32)
    np.testing.assert_array_equal(joined, np.concatenate([kernel_fingerprints(part, MOLECULES) for part in spec.split("+")], axis=1))
    assert np.array_equal(kernel_fingerprints("atom_pair_counts:size=1", ["C" * 30]), [[255]])  # 435 pairs, clipped
    with pytest.raises(ConfigError, match="reads count fingerprints .*not 'rdkit2d' in 'morgan_counts\\+rdkit2d'"):
        kernel_fingerprints("morgan_counts+rdkit2d", MOLECULES)
    with pytest.raises(ConfigError, match="has an empty part: join count fingerprints by '\\+'"):
        kernel_fingerprints("morgan_counts+", MOLECULES)
    with pytest.raises(ConfigError, match="names morgan_counts:radius=2:size=2048 more than once"):
        kernel_fingerprints("morgan_counts+morgan_counts:radius=2", MOLECULES)
    assert kernel_segments("morgan_counts:radius=1+morgan_counts:radius=3") == (2048, 2048)  # two radii: two fingerprints
    with pytest.raises(ConfigError, match="atom_pair_counts size must be an integer from 1"):
        AtomPairCounts(size=0)
    with pytest.raises(ConfigError, match="avalon_counts size"):
        AvalonCounts(size=2.5)


def test_generators_concatenate_in_order_and_workers_agree():
    specs = ["morgan_counts:radius=1:size=16", "rdkit2d"]
    single = compute_features(specs, MOLECULES * 3)
    assert single.shape == (12, 16 + len(Descriptors._descList))
    assert feature_names(specs)[:2] == ["morgan1_0", "morgan1_1"] and feature_names(specs)[16] == Descriptors._descList[0][0]
    parallel = compute_features(specs, MOLECULES * 3, workers=2, chunk_size=5)
    np.testing.assert_array_equal(single, parallel)


def test_generator_specs_round_trip_and_bad_specs():
    assert get_generator("morgan_counts") == MorganCounts(2, 2048)
    assert get_generator(generator_spec(MorganCounts(3, 100))) == MorganCounts(3, 100)
    assert get_generator("rdkit2d") == RDKit2D()
    with pytest.raises(ConfigError, match="unknown feature generator 'mordred'"):
        get_generator("mordred")
    with pytest.raises(ConfigError, match="bad option 'bits=5'.*radius=INTEGER"):
        get_generator("morgan_counts:bits=5")
    with pytest.raises(ConfigError, match="option 'radius' is given twice"):  # the probe: the last one was taken
        get_generator("morgan_counts:radius=2:radius=3")
    with pytest.raises(InvalidMoleculeError, match="molecule 1 \\('C1CC'\\)"):
        compute_features(["rdkit2d"], ["CC", "C1CC"])


def test_standard_scaler_hand_computed_and_nonfinite_rule():
    values = np.array([[1.0, 2.0, 7.0], [3.0, np.nan, 7.0], [5.0, np.inf, 7.0]])
    scaler = FeatureScaler.fit(values, ["a", "b", "c"])
    # column a: mean 3, population std sqrt(8/3); b: only 2.0 finite -> std 0 -> scale 1; c: constant
    assert scaler.center == pytest.approx([3.0, 2.0, 7.0])
    assert scaler.scale == pytest.approx([math.sqrt(8 / 3), 1.0, 1.0])
    out = scaler.transform(np.array([[3.0 + math.sqrt(8 / 3), np.nan, 1e300], [-1e6, -np.inf, 7.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[1.0, 0.0, 10.0], [-10.0, 0.0, 0.0]], rtol=1e-6)


def test_robust_scaler_median_and_iqr():
    column = np.array([[1.0], [2.0], [3.0], [4.0], [100.0]])
    scaler = FeatureScaler.fit(column, ["x"], method="robust")
    assert scaler.center == [3.0]
    assert scaler.scale == pytest.approx([(4.0 - 2.0) / 1.349])


def test_scaler_survives_weights_only_checkpoint():
    scaler = FeatureScaler.fit(np.random.default_rng(0).normal(size=(20, 3)), ["a", "b", "c"], method="robust", clip=5.0)
    buffer = io.BytesIO()
    torch.save({"scaler": scaler.to_dict()}, buffer)
    buffer.seek(0)
    restored = FeatureScaler.from_dict(torch.load(buffer, weights_only=True)["scaler"])
    assert restored == scaler
    probe = np.random.default_rng(1).normal(size=(4, 3)) * 3
    np.testing.assert_array_equal(restored.transform(probe), scaler.transform(probe))


def test_scaler_rejects_mismatched_widths():
    scaler = FeatureScaler.fit(np.zeros((2, 2)), ["a", "b"])
    with pytest.raises(ConfigError, match="expects 2 columns"):
        scaler.transform(np.zeros((1, 3)))
    with pytest.raises(ConfigError, match="feature scaling must be one of"):
        FeatureScaler.fit(np.zeros((2, 2)), ["a", "b"], method="minmax")


def test_workers_compute_parts_in_the_shared_pool_with_molecules_intact():
    """Parts go to the shared featurizing pool (a few per process by default); RDKit molecules
    cross with their coordinates, and an unreadable molecule is named by its row."""
    from dgl_graphtx import worker_pool
    mols = [Chem.AddHs(Chem.MolFromSmiles(s)) for s in MOLECULES] * 40
    for mol in mols[:4]:
        AllChem.EmbedMolecule(mol, randomSeed=1)
    specs = ["rdkit2d", "morgan_counts:radius=1:size=16"]
    np.testing.assert_array_equal(compute_features(specs, mols, workers=2), compute_features(specs, mols))
    assert worker_pool._shared is not None and worker_pool._shared.workers == 2
    with pytest.raises(InvalidMoleculeError, match="molecule 160 "):
        compute_features(specs, MOLECULES * 40 + ["C1CC("], workers=2)
