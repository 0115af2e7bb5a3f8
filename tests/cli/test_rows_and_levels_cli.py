"""``train``, ``predict`` and ``evaluate`` on real data with atom- and bond-level targets and with
several molecules per row, from the command line.

Real data, read offline: FreeSolv's molecules with RDKit's Gasteiger group charges and Wildman-Crippen
logP contributions (summing to the molecules' formal charges and logP, which the constrained sums
are checked against), QM9's DFT Mulliken charges from the qm9pack package (all atoms, hydrogens too,
summing to 0), FreeSolv solutes paired with solvents, and FreeSolv molecules paired as reactions.
Bad input is one ``error:`` line naming the row."""
from __future__ import annotations

import ast
import csv
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem, Crippen

from benchmarks.common.attribution import crippen_atom_logp
from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_frame

from dgl_graphtx.datasets.geometry import molecule_from_geometry

TINY = ["--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2", "--epochs", "2", "--batch-size", "16",
        "--device", "cpu", "--no-progress", "--no-cache"]
SOLVENTS = ["O", "CCO", "CCCCCCCCO", "ClC(Cl)Cl", "c1ccccc1"]


def _values(values) -> str:
    return "[" + ", ".join(f"{v:.6f}" for v in values) + "]"


@pytest.fixture(scope="module")
def atoms_csv(tmp_path_factory):
    rows = []
    for smiles in freesolv_frame()["smiles"][:64]:
        mol = Chem.MolFromSmiles(smiles)
        AllChem.ComputeGasteigerCharges(mol)
        rows.append({"smiles": smiles, "logp": Crippen.MolLogP(mol),
                     "q": _values([a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge") for a in mol.GetAtoms()]),
                     "crippen": _values(crippen_atom_logp(smiles)), "order": _values([b.GetBondTypeAsDouble() for b in mol.GetBonds()])})
    path = tmp_path_factory.mktemp("atoms") / "atoms.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_atom_and_bond_targets_train_predict_and_evaluate(atoms_csv, tmp_path):
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", atoms_csv, "--targets", "logp", "--atom-targets", "q,crippen", "--bond-targets", "order",
                                 "--atom-sums", "q=formal_charge,crippen=logp", "--out", out, *TINY])
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"rmse", "atom_rmse", "atom_mae", "bond_rmse"} <= set(metrics["test"])
    assert {"logp", "q", "crippen", "order"} == set(metrics["test_per_target"])
    test_atoms = pd.read_csv(out / "test_atom_predictions.csv")
    assert test_atoms.columns.tolist() == ["row", "smiles", "atom", "element", "q", "q_pred", "crippen", "crippen_pred"]
    frame = pd.read_csv(atoms_csv)
    for row, atoms in test_atoms.groupby("row"):  # the labels are the file's, the sums the molecules' own values
        assert atoms["q"].to_numpy() == pytest.approx(ast.literal_eval(frame["q"][row]), abs=1e-6)
        assert atoms["q_pred"].sum() == pytest.approx(Chem.GetFormalCharge(Chem.MolFromSmiles(frame["smiles"][row])), abs=1e-4)
        assert atoms["crippen_pred"].sum() == pytest.approx(frame["logp"][row], abs=1e-3)
    assert run_cli(["train", "--config", out / "config.yaml", "--out", tmp_path / "again", "--no-cache"])[0] == 0
    again = pd.read_csv(tmp_path / "again" / "log.csv")["valid_atom_rmse"].tolist()
    assert again == pd.read_csv(out / "log.csv")["valid_atom_rmse"].tolist()

    code, stdout, err = run_cli(["predict", "--checkpoint", out, "--input", atoms_csv, "--output", tmp_path / "p.csv",
                                 "--sdf-output", tmp_path / "p.sdf", "--keep-cols", "logp"])
    assert code == 0, err
    assert "p_atoms.csv" in stdout and "p_bonds.csv" in stdout and "p.sdf" in stdout
    atoms = pd.read_csv(tmp_path / "p_atoms.csv")
    assert atoms.columns.tolist() == ["row", "logp", "smiles", "atom", "element", "q_pred", "crippen_pred"]
    first = Chem.MolFromSmiles(frame["smiles"][0])
    assert atoms[atoms["row"] == 0]["element"].tolist() == [a.GetSymbol() for a in first.GetAtoms()]
    bonds = pd.read_csv(tmp_path / "p_bonds.csv")
    assert len(bonds[bonds["row"] == 0]) == first.GetNumBonds()
    sdf = Chem.SDMolSupplier(str(tmp_path / "p.sdf"))[0]
    assert [a.GetDoubleProp("q_pred") for a in sdf.GetAtoms()] == pytest.approx(atoms[atoms["row"] == 0]["q_pred"].tolist(), abs=1e-6)

    code, stdout, err = run_cli(["evaluate", atoms_csv, "--checkpoint", out, "-q"])
    assert code == 0, err
    report = json.loads(stdout)
    assert report["molecules"] == 64 and {"atom_rmse", "bond_mae"} <= set(report) and "crippen" in report["per_target"]


def _qm9_mulliken_sdf(path: Path, count: int) -> Path:
    """The first ``count`` molecules of qm9pack with their DFT geometries and Mulliken charges."""
    folder = Path(importlib.util.find_spec("qm9pack").submodule_search_locations[0]) / "data"
    writer = Chem.SDWriter(str(path))
    with open(folder / "qm9_part1.csv", newline="") as handle:
        for row, _ in zip(csv.DictReader(handle), range(count)):
            mol = molecule_from_geometry(ast.literal_eval(row["Elements"]), np.array(ast.literal_eval(row["XYZ_Ang"])))
            mol.SetProp("_Name", f"qm9_{row['Index']}")
            mol.SetProp("atom.dprop.mulliken", " ".join(f"{q:.6f}" for q in ast.literal_eval(row["Mulliken_pop"])))
            writer.write(mol)
    writer.close()
    return path


@pytest.mark.skipif(importlib.util.find_spec("qm9pack") is None, reason='needs qm9pack: pip install -e ".[test]"')
def test_dft_partial_charges_of_every_atom_from_an_sdf(tmp_path):
    sdf = _qm9_mulliken_sdf(tmp_path / "mulliken.sdf", 60)
    out = tmp_path / "q"
    code, _, err = run_cli(["train", sdf, "--atom-targets", "mulliken", "--atom-sums", "mulliken=formal_charge", "--out", out,
                            "--set", "featurizer.explicit_hydrogens=true", "featurizer.coordinates=conformer", *TINY])
    assert code == 0, err
    test_atoms = pd.read_csv(out / "test_atom_predictions.csv")
    assert set(test_atoms["element"]) >= {"H", "C"} and not test_atoms["mulliken"].isna().any()
    assert test_atoms.groupby("row")["mulliken_pred"].sum().abs().max() < 1e-4  # neutral molecules: the charges sum to 0
    code, stdout, err = run_cli(["predict", "--checkpoint", out, "--input", sdf, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p_atoms.csv")
    assert predicted["row"].nunique() == 60 and predicted.columns.tolist()[:3] == ["row", "name", "smiles"]


@pytest.fixture(scope="module")
def pairs_csv(tmp_path_factory):
    rows = []
    for index, smiles in enumerate(freesolv_frame()["smiles"][:60]):
        solvent = SOLVENTS[index % len(SOLVENTS)]
        fraction = (index % 4) / 4
        rows.append({"solute": smiles, "solvent": solvent, "x_solute": fraction, "x_solvent": 1 - fraction,
                     "dlogp": Crippen.MolLogP(Chem.MolFromSmiles(smiles)) - Crippen.MolLogP(Chem.MolFromSmiles(solvent))})
    path = tmp_path_factory.mktemp("pairs") / "pairs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("options", [["--backbones", "separate"], ["--combine", "sum", "--mixture-weights", "x_solute,x_solvent"]])
def test_two_molecules_per_row_train_predict_and_evaluate(pairs_csv, tmp_path, options):
    out = tmp_path / "run"
    code, _, err = run_cli(["train", pairs_csv, "--smiles-cols", "solute,solvent", "--targets", "dlogp", *options, "--out", out, *TINY])
    assert code == 0, err
    tested = pd.read_csv(out / "test_predictions.csv")
    assert tested["smiles"].str.count(r"\.").min() >= 1  # the row: solute.solvent
    code, stdout, err = run_cli(["predict", "--checkpoint", out, "--input", pairs_csv, "--id-col", "solute",
                                 "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    frame = pd.read_csv(pairs_csv)
    assert predicted["solute"].tolist() == frame["solute"].tolist() and predicted["dlogp_pred"].notna().all()
    assert (predicted["smiles"] == frame["solute"] + "." + frame["solvent"]).all()
    code, stdout, err = run_cli(["evaluate", pairs_csv, "--checkpoint", out, "-q"])
    assert code == 0, err
    assert json.loads(stdout)["molecules"] == 60


def test_reactions_are_read_as_their_two_sides(tmp_path):
    smiles = freesolv_frame()["smiles"][:40].tolist()
    rows = [{"rxn": f"{a}>>{b}", "dlogp": Crippen.MolLogP(Chem.MolFromSmiles(b)) - Crippen.MolLogP(Chem.MolFromSmiles(a))}
            for a, b in zip(smiles[0::2], smiles[1::2])]
    path = tmp_path / "rxn.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, _, err = run_cli(["train", path, "--reaction-cols", "rxn", "--targets", "dlogp", "--out", tmp_path / "run", *TINY])
    assert code == 0, err
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "reaction_cols:\n  - rxn" in config
    code, _, err = run_cli(["predict", "--checkpoint", tmp_path / "run", "--input", path, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    assert pd.read_csv(tmp_path / "p.csv")["canonical_smiles"][0] == ".".join(Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in smiles[:2])


def test_bad_rows_and_settings_are_one_error_line(atoms_csv, pairs_csv, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('smiles,q\nCCO,"[0.1, 0.2, 0.3]"\nc1ccccc1O,"[0.1, 0.2]"\n')
    assert_one_error_line(run_cli(["train", bad, "--atom-targets", "q", "--out", tmp_path / "a", *TINY]),
                          "row 1 of", "(c1ccccc1O)", "lists 2 values for the 7 atoms")
    reaction = tmp_path / "rxn.csv"
    reaction.write_text("rxn,y\nCC>>CCO,1\nCCO,2\n")
    assert_one_error_line(run_cli(["train", reaction, "--reaction-cols", "rxn", "--targets", "y", "--out", tmp_path / "b", *TINY]),
                          "row 1 of", "'CCO', which has no '>>'")
    assert_one_error_line(run_cli(["train", pairs_csv, "--targets", "dlogp", "--backbones", "separate", "--out", tmp_path / "c", *TINY]),
                          "--backbones separate")
    assert_one_error_line(run_cli(["train", atoms_csv, "--atom-targets", "q", "--ensemble-size", "2", "--out", tmp_path / "d", *TINY]),
                          "drop --ensemble-size")
    assert_one_error_line(run_cli(["train", pairs_csv, "--smiles-cols", "solute,solvent", "--mixture-weights", "x_solute,x_solvent",
                                   "--targets", "dlogp", "--out", tmp_path / "e", *TINY]), "--combine sum")
    assert_one_error_line(run_cli(["train", pairs_csv, "--smiles-cols", "solute,solvent", "--combine", "average", "--targets", "dlogp",
                                   "--out", tmp_path / "f", *TINY]), "molecules.combine must be one of")
    assert_one_error_line(run_cli(["train", atoms_csv, "--atom-targets", "q", "--atom-sums", "shift=formal_charge",
                                   "--out", tmp_path / "g", *TINY]), "'shift', which is not an atom target")
