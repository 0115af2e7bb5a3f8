"""Atom- and bond-level predictions of a checkpoint: every writing of a molecule gives the same value
on the same atom and bond; the constrained sums hold; the long tables and the SD file carry the
values of the list columns; evaluate scores them against the measured lists; what cannot be done
with such a model (export, explain without molecule targets, an ensemble) is one clear line.

Models are untrained but randomly initialised, so every input reaches every output."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_frame, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from dgl_graphtx.datasets import read_molecules
from dgl_graphtx.datasets.level_targets import LevelTargets
from dgl_graphtx.datasets.readers import check_property_lists
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.evaluation import evaluate_table
from dgl_graphtx.inference.explain import ExplainSettings
from dgl_graphtx.inference.export import unsupported
from dgl_graphtx.models import build_model
from dgl_graphtx.models.levels import LevelOptions

SPEC = LevelTargets(("q", "shift"), ("order",), atom_sums=("q=formal_charge",))
WRITINGS = 4


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    preset = tiny_preset("gradformer", num_tasks=1, levels=LevelOptions(2, 1, (0,)))
    torch.manual_seed(3)
    model = build_model(preset.model).eval()
    model.levels.set_normalization("atom", torch.tensor([0.0, 2.0]), torch.tensor([0.3, 1.5]))
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["logp"], {"levels": SPEC.to_dict()})
    return save_checkpoint(tmp_path_factory.mktemp("levels") / "best.pt", model, meta)


def _molecules():
    smiles = list(freesolv_frame()["smiles"][:30]) + ["CC(=O)[O-]", "C[N+](C)(C)C", "[NH3+]CC(=O)[O-]"]
    return [s for s in smiles if Chem.MolFromSmiles(s).GetNumAtoms() > 1]


def test_every_writing_of_a_molecule_gives_its_atoms_and_bonds_the_same_values(checkpoint):
    predictor = Predictor(checkpoint)
    for smiles in _molecules():
        reference = Chem.MolFromSmiles(smiles)
        writings = list(Chem.MolToRandomSmilesVect(reference, WRITINGS, randomSeed=11))
        found = predictor.predict_atoms([smiles, *writings]).table
        base = np.array(found["q_atoms"][0])
        for row, writing in enumerate(writings, start=1):
            mol = Chem.MolFromSmiles(writing)
            match = reference.GetSubstructMatch(mol, useChirality=True)  # atom i of the writing is atom match[i] of the reference
            assert len(match) == mol.GetNumAtoms()
            assert np.allclose(np.array(found["q_atoms"][row]), base[list(match)], atol=1e-5)
            assert np.allclose(np.array(found["shift_atoms"][row]), np.array(found["shift_atoms"][0])[list(match)], atol=1e-5)
            for bond, value in zip(mol.GetBonds(), found["order_bonds"][row]):
                same = reference.GetBondBetweenAtoms(match[bond.GetBeginAtomIdx()], match[bond.GetEndAtomIdx()])
                assert value == pytest.approx(found["order_bonds"][0][same.GetIdx()], rel=1e-5, abs=1e-5)
        assert sum(base) == pytest.approx(Chem.GetFormalCharge(reference), abs=1e-4)  # the constraint, in target units


def test_long_tables_and_the_sd_file_hold_the_list_values(checkpoint, tmp_path):
    smiles = ["OCC", "c1ccncc1", "C1CC", "CC(=O)[O-]"]
    found = Predictor(checkpoint).predict_atoms(smiles, carried=pd.DataFrame({"id": ["a", "b", "c", "d"]}))
    assert found.table["error"].notna().tolist() == [False, False, True, False]
    atoms = found.atoms
    assert atoms.columns.tolist() == ["row", "id", "smiles", "atom", "element", "q_pred", "shift_pred"]
    assert atoms[atoms["row"] == 0]["element"].tolist() == ["O", "C", "C"]  # the order of the SMILES as written
    assert atoms[atoms["row"] == 3]["q_pred"].tolist() == found.table["q_atoms"][3]
    bonds = found.bonds
    assert bonds[bonds["row"] == 1][["begin_atom", "end_atom"]].values.tolist() == [[b.GetBeginAtomIdx(), b.GetEndAtomIdx()]
                                                                                      for b in Chem.MolFromSmiles("c1ccncc1").GetBonds()]
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, *smiles, "--sdf-output", tmp_path / "p.sdf"])
    assert code == 0, err
    read = [m for m in Chem.SDMolSupplier(str(tmp_path / "p.sdf"))]
    assert len(read) == 3  # the invalid molecule is not written
    for mol in read:
        check_property_lists(mol)  # RDKit 2023.09 (the oldest tested set) leaves the bond lists as text
    assert [a.GetDoubleProp("q_pred") for a in read[2].GetAtoms()] == pytest.approx(found.table["q_atoms"][3], abs=1e-6)
    assert [b.GetDoubleProp("order_pred") for b in read[0].GetBonds()] == pytest.approx(found.table["order_bonds"][0], abs=1e-6)
    assert read[0].GetDoubleProp("logp_pred") == pytest.approx(found.table["logp_pred"][0], abs=1e-6)


def test_a_series_keeps_its_index_in_the_table_and_the_atom_and_bond_rows(checkpoint):
    given = pd.Series(["OCC", "c1ccncc1", "CC(=O)[O-]"], index=["x", "y", "z"])
    found = Predictor(checkpoint).predict_atoms(given)
    assert found.table.index.tolist() == ["x", "y", "z"]
    for long, column in ((found.atoms, "q_atoms"), (found.bonds, "order_bonds")):
        assert long["row"].unique().tolist() == ["x", "y", "z"]
        for label, rows in long.groupby("row"):
            assert rows["smiles"].iloc[0] == given[label]
            assert rows[column.split("_")[0] + "_pred"].tolist() == pytest.approx(found.table.loc[label, column], abs=1e-6)


def test_evaluate_scores_the_lists_against_the_measured_values(checkpoint, tmp_path):
    rows = []
    for smiles in _molecules()[:12]:
        mol = Chem.MolFromSmiles(smiles)
        AllChem.ComputeGasteigerCharges(mol)
        rows.append({"smiles": smiles, "logp": 1.0, "q": str([a.GetDoubleProp("_GasteigerCharge") for a in mol.GetAtoms()]),
                     "shift": str([float(a.GetAtomicNum()) for a in mol.GetAtoms()]),
                     "order": str([b.GetBondTypeAsDouble() for b in mol.GetBonds()])})
    pd.DataFrame(rows).to_csv(tmp_path / "m.csv", index=False)
    predictor = Predictor(checkpoint)
    report = evaluate_table([predictor], read_molecules(tmp_path / "m.csv")).report
    predicted = predictor.predict([r["smiles"] for r in rows])
    q_true = np.concatenate([eval(r["q"]) for r in rows])
    q_pred = np.concatenate(predicted["q_atoms"].tolist())
    assert report["per_target"]["q"]["mae"] == pytest.approx(float(np.abs(q_true - q_pred).mean()), rel=1e-5)
    order_true = np.concatenate([eval(r["order"]) for r in rows])
    order_pred = np.concatenate(predicted["order_bonds"].tolist())
    assert report["bond_rmse"] == pytest.approx(float(np.sqrt(((order_true - order_pred) ** 2).mean())), rel=1e-5)
    assert {"rmse", "atom_rmse", "atom_mae", "bond_r2"} <= set(report)


def test_what_such_a_model_cannot_do_is_one_clear_line(checkpoint, tmp_path):
    loaded = load_checkpoint(checkpoint)
    assert "atom- or bond-level targets" in unsupported(loaded)
    assert_one_error_line(run_cli(["export", "--checkpoint", checkpoint, "--out", tmp_path / "m.pt2"]), "atom- or bond-level")
    with pytest.raises(ConfigError, match="without an uncertainty method; drop --uncertainty mc_dropout"):
        Predictor(checkpoint, uncertainty="mc_dropout")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--checkpoint", checkpoint, "CCO"]),
                          "come from one model")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "CCO", "--output", tmp_path / "p.csv", "--resume"]),
                          "come from one model")
    preset = tiny_preset("gradformer", num_tasks=0, levels=LevelOptions(atom_tasks=1))
    atoms_only = save_checkpoint(tmp_path / "atoms.pt", build_model(preset.model),
                                 CheckpointMeta(preset.featurizer, preset.relation, [], {"levels": {"atom_targets": ["q"]}}))
    with pytest.raises(ConfigError, match="explanations cover molecule-level targets"):
        Predictor(atoms_only, explain=ExplainSettings())
