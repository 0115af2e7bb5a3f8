"""MoiréGT's ``3d-energy`` preset: its settings, predictions that do not move when the molecules
are rotated or translated, and the recipe from the command line: an SDF of QM9 geometries with
hydrogens trained with ``--preset 3d-energy``, predicted again from its checkpoint."""
from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem
from scipy.spatial.transform import Rotation

from cli_runner import run_cli
from conftest_models import TINY
from dgl_graphtx.datasets import example_sdf_path, read_molecules
from dgl_graphtx.datasets.collate import collate_molecules
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.predict import Predictor


def test_the_preset_is_the_3d_network_for_extensive_targets():
    p, plain = get_preset("moire", "3d-energy"), get_preset("moire", "3d")
    assert p.featurizer.explicit_hydrogens and p.featurizer.coordinates == "auto" and p.model.moire.distance == "dist"
    assert p.model.readout == "atomwise" and p.model.atom_reference
    assert (p.model.moire.rbf, p.model.moire.rbf_cutoff) == (32, 8.0)
    same = ("num_layers", "hidden_dim", "num_heads", "input_mlp", "head_layers", "virtual_node")
    assert all(getattr(p.model, name) == getattr(plain.model, name) for name in same)
    assert not plain.featurizer.explicit_hydrogens and plain.model.readout == "max"  # the 3d preset is unchanged


def _moved(mol: Chem.Mol, matrix: np.ndarray, shift: np.ndarray) -> Chem.Mol:
    moved = Chem.Mol(mol)
    conformer = moved.GetConformer()
    for atom, xyz in enumerate(mol.GetConformer().GetPositions() @ matrix.T + shift):
        conformer.SetAtomPosition(atom, xyz.tolist())
    return moved


def _outputs(model, featurizer, mols):
    graphs = [featurizer(mol) for mol in mols]
    batch = collate_molecules([(g, r, torch.zeros(1), torch.ones(1, dtype=torch.bool)) for g, r in graphs])
    with torch.no_grad():
        return model(batch.graph, batch.relation_graph)


def test_predictions_do_not_move_with_the_molecules():
    p = get_preset("moire", "3d-energy", **TINY)
    mols = list(read_molecules(example_sdf_path(), featurizer=FeaturizerConfig(explicit_hydrogens=True)).molecules)
    assert all(m.GetNumAtoms() > Chem.RemoveHs(m).GetNumAtoms() for m in mols)  # the file's hydrogens are nodes
    torch.manual_seed(0)
    model = build_model(p.model).eval()
    with torch.no_grad():
        model.atom_reference.values.normal_()
    featurizer = MoleculeFeaturizer(p.featurizer, p.relation)
    before = _outputs(model, featurizer, mols)
    rng = np.random.default_rng(0)
    for rotation in Rotation.random(3, random_state=1).as_matrix():
        after = _outputs(model, featurizer, [_moved(m, rotation, rng.normal(scale=20.0, size=3)) for m in mols])
        torch.testing.assert_close(after, before, atol=1e-4, rtol=1e-5)
    stretched = _outputs(model, featurizer, [_moved(m, np.diag([1.3, 1.0, 1.0]), np.zeros(3)) for m in mols])
    assert (stretched - before).abs().max() > 1e-3  # the geometry does reach the outputs


@pytest.mark.skipif(importlib.util.find_spec("qm9pack") is None, reason='needs qm9pack: pip install -e ".[test]"')
def test_cli_trains_the_preset_on_an_sdf_and_predicts_it_again(tmp_path):
    from dgl_graphtx.datasets import qm9
    from dgl_graphtx.datasets.qm9 import GeometryMolecules

    table = qm9(targets=("u0_atom",), subset=40, seed=7)
    sdf = tmp_path / "qm9.sdf"
    with Chem.SDWriter(str(sdf)) as writer:
        for mol, energy in zip(GeometryMolecules(table, hydrogens=True), table["u0_atom"]):
            if isinstance(mol, Chem.Mol):
                mol.SetProp("u0_atom", f"{energy:.6f}")
                writer.write(mol)
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(["train", sdf, "--targets", "u0_atom", "--model", "moire", "--preset", "3d-energy",
                                    "--epochs", "1", "--out", out, "--device", "cpu", "--no-progress"])
    assert code == 0, stderr
    predictor = Predictor(out / "best.pt", device="cpu")
    assert predictor.meta.featurizer.explicit_hydrogens and predictor.model.config.readout == "atomwise"
    assert predictor.model.atom_reference.values.abs().sum() > 0  # fitted, and saved in the checkpoint
    tested = pd.read_csv(out / "test_predictions.csv")
    again = predictor.predict_file(sdf)
    np.testing.assert_allclose(again["u0_atom_pred"].to_numpy()[tested["row"]], tested["u0_atom_pred"], rtol=1e-6)
