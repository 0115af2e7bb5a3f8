"""The same molecule gives the same answer whatever the route (a file, or RDKit molecules in
Python), and values of atom or bond features never seen in training are flagged."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from conftest_models import seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.inference import Predictor


def _checkpoint(tmp_path, preset, name: str):
    return save_checkpoint(tmp_path / f"{name}.pt", seeded_model(preset), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))


@pytest.mark.parametrize("explicit_hydrogens", [False, True])
def test_rdkit_molecules_with_hydrogen_atoms_are_prepared_as_the_file_reader_does(sdf_path, sdf_mols_with_h, tmp_path,
                                                                               explicit_hydrogens):
    """Molecules read with SDMolSupplier(removeHs=False) used to become graphs with hydrogen nodes
    in Predictor.predict, while the file route removed them: a 3-D model moved by 140-330 kcal/mol."""
    preset = tiny_preset("moire", "3d")
    preset = dataclasses.replace(preset, featurizer=dataclasses.replace(preset.featurizer, explicit_hydrogens=explicit_hydrogens))
    predictor = Predictor(_checkpoint(tmp_path, preset, "moire3d"))
    from_file = predictor.predict_file(sdf_path)
    from_python = predictor.predict(sdf_mols_with_h)
    assert from_file["error"].isna().all() and from_python["error"].isna().all()
    np.testing.assert_allclose(from_python["y_pred"], from_file["y_pred"], rtol=0, atol=1e-6)
    assert from_python["warning"].tolist() == from_file["warning"].tolist()
    assert from_python["smiles"].tolist() == from_file["smiles"].tolist()
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    nodes = [featurizer.molecular_graph(mol).num_nodes() for mol in sdf_mols_with_h]
    expected = [mol.GetNumAtoms() if explicit_hydrogens else mol.GetNumHeavyAtoms() for mol in sdf_mols_with_h]
    assert nodes == expected


def test_prepared_molecules_keep_their_coordinates(sdf_mols_with_h, sdf_mols):
    """Removing the hydrogen atoms keeps the heavy atoms' 3-D coordinates, as the SDF reader does."""
    featurizer = MoleculeFeaturizer(FeaturizerConfig(coordinates="conformer"))
    for with_h, without_h in zip(sdf_mols_with_h, sdf_mols):
        a, b = featurizer.molecular_graph(with_h), featurizer.molecular_graph(without_h)
        np.testing.assert_array_equal(a.ndata["pos"].numpy(), b.ndata["pos"].numpy())
        np.testing.assert_array_equal(a.ndata["feat"].numpy(), b.ndata["feat"].numpy())


@pytest.fixture(scope="module")
def trained_without_stereo(tmp_path_factory):
    """A model trained on SMILES without any stereo (chirality 'none' and bond stereo 'none' only)."""
    from conftest_models import freesolv_rows
    from dgl_graphtx.datasets import MoleculeDataset
    from dgl_graphtx.runs import train_and_evaluate
    from dgl_graphtx.training import TrainConfig
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    frame = freesolv_rows(0, 60)
    frame = frame[~frame["smiles"].str.contains("@|/|\\\\", regex=True)].reset_index(drop=True)
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer,
                                             relation=preset.relation, progress=False)
    out = tmp_path_factory.mktemp("nostereo")
    train_and_evaluate(dataset, preset, TrainConfig(epochs=1, progress=False, device="cpu"), out_dir=out)
    return out / "best.pt"


def test_feature_values_never_seen_in_training_are_flagged(trained_without_stereo):
    """Stereo perceived from an SDF's coordinates gave a chirality the model never saw, and the
    applicability-domain check said nothing (a prediction 0.90 log units away)."""
    predictor = Predictor(trained_without_stereo)
    table = predictor.predict(["CC(N)CO", "C[C@H](N)CO", "C/C=C/CO", "CCCCO"])
    assert table["warning"][[0, 3]].isna().all()
    assert "atom chirality S never seen in training" in table["warning"][1]
    assert "bond stereo STEREOE never seen in training" in table["warning"][2]
    # the training molecules (SMILES without @ or /) have chirality "none" only
    recorded = predictor.domain.atom_values[1]
    assert recorded == (0.0,)


def test_old_checkpoints_without_recorded_values_are_not_flagged(trained_without_stereo, tmp_path):
    from dgl_graphtx.checkpoint import load_checkpoint
    loaded = load_checkpoint(trained_without_stereo)
    domain = {k: v for k, v in loaded.meta.extra.domain.items() if k not in ("atom_values", "bond_values")}
    meta = dataclasses.replace(loaded.meta, extra=dataclasses.replace(loaded.meta.extra, domain=domain))
    old = save_checkpoint(tmp_path / "old.pt", loaded.model, meta)
    table = Predictor(old).predict(["C[C@H](N)CO"])
    assert table["error"].isna().all() and table["warning"].isna().all()
