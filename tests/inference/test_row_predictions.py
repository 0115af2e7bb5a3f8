"""Predictions of a model of several molecules per row: rows as tuples or a file's columns, every
writing of a row's molecules giving the same prediction, the row and the molecules named in the
table, an ensemble averaging rows; wrong rows and what such a model cannot do are one clear line.

Models are untrained but randomly initialised, so every input reaches the output."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from rdkit import Chem

from cli_runner import assert_one_error_line, run_cli
from conftest_models import tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets.molecule_columns import MoleculeColumns
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.explain import ExplainSettings
from dgl_graphtx.inference.prediction_job import PredictionJob, run_prediction
from dgl_graphtx.models import build_model
from dgl_graphtx.models.molecule_sets import MoleculeSetOptions

COLUMNS = MoleculeColumns(("solute", "solvent"), mixture_weights=("x1", "x2"))


def _checkpoint(folder, seed, options=MoleculeSetOptions(count=2, backbones="separate", combine="sum", weighted=True),
                columns=COLUMNS):
    preset = tiny_preset("gradformer")
    torch.manual_seed(seed)
    model = build_model(dataclasses.replace(preset.model, molecules=options)).eval()
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["dG"], {"molecule_columns": columns.to_dict()})
    return save_checkpoint(folder / "best.pt", model, meta)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("rows"), 0)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("rows-data") / "pairs.csv"
    path.write_text("id,solute,solvent,x1,x2\nA,OCC,O,0.2,0.8\nB,c1ccccc1O,CCCCO,0.5,0.5\nC,C1CC,O,1,0\nD,CC(=O)[O-].[Na+],ClC(Cl)Cl,0.9,0.1\n")
    return path


def test_a_file_and_tuples_give_the_same_predictions_and_every_writing_too(checkpoint, table):
    predictor = Predictor(checkpoint)
    from_file = predictor.predict_file(table, id_col="id")
    assert from_file.columns.tolist()[:3] == ["id", "smiles", "canonical_smiles"]
    assert from_file["smiles"].tolist()[0] == "OCC.O" and from_file["canonical_smiles"].tolist()[0] == "CCO.O"
    assert from_file["error"].notna().tolist() == [False, False, True, False]
    assert "molecule 1 of the row: SMILES syntax error" in from_file["error"][2]
    rows = [("OCC", "O"), ("c1ccccc1O", "CCCCO"), ("C1CC", "O"), ("CC(=O)[O-].[Na+]", "ClC(Cl)Cl")]
    weights = from_file[["id"]].assign(x1=[0.2, 0.5, 1, 0.9], x2=[0.8, 0.5, 0, 0.1])
    as_tuples = predictor.predict(rows, features=weights)
    assert np.allclose(as_tuples["dG_pred"], from_file["dG_pred"], equal_nan=True)
    for (solute, solvent), weight in zip(rows[:2], [(0.2, 0.8), (0.5, 0.5)]):
        writings = [(a, b) for a in Chem.MolToRandomSmilesVect(Chem.MolFromSmiles(solute), 3, randomSeed=1)
                    for b in Chem.MolToRandomSmilesVect(Chem.MolFromSmiles(solvent), 2, randomSeed=2)]
        found = predictor.predict([(solute, solvent), *writings], features=weights.iloc[[0] * (len(writings) + 1)].assign(
            x1=weight[0], x2=weight[1]).reset_index(drop=True))
        assert np.allclose(found["dG_pred"], found["dG_pred"][0], atol=1e-5)


def test_an_ensemble_of_such_models_averages_each_row(checkpoint, table, tmp_path):
    other = _checkpoint(tmp_path, 1)
    both = run_prediction(PredictionJob([checkpoint, other], input=table)).table
    alone = [Predictor(path).predict_file(table)["dG_pred"].to_numpy() for path in (checkpoint, other)]
    assert np.allclose(both["dG_pred"], np.mean(alone, axis=0), equal_nan=True)
    assert "dG_std" in both.columns


def test_rows_that_do_not_fit_the_model_are_one_clear_error(checkpoint, table):
    predictor = Predictor(checkpoint)
    with pytest.raises(ConfigError, match=r"reads 2 molecule\(s\) per row; got 'CCO': give each row as a tuple of 2 molecules "
                                          r"\(solute, solvent\)"):
        predictor.predict(["CCO"])
    with pytest.raises(ConfigError, match="got 'CCO.O.C'"):
        predictor.predict([("CCO", "O", "C")])
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "CCO"]), "reads 2 molecules per row (solute, solvent)",
                          "--input")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", table, "--smiles-cols", "solute"]),
                          "reads 2 molecule(s) per row with mixture weights", "--smiles-cols solute,solvent", "hold 1")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", table, "--smiles-cols", "solute,solvent",
                                   "--mixture-weights", "x1,id"]), "mixture weight column 'id' holds 'A'")
    single = Predictor(_checkpoint(table.parent / "single", 2, MoleculeSetOptions(), MoleculeColumns()))
    with pytest.raises(ConfigError, match="reads 1 molecule\\(s\\) per row; got 'CCO.O': give one molecule per row, not a tuple"):
        single.predict([("CCO", "O")])


def test_what_such_a_model_cannot_do_is_one_clear_line(checkpoint, tmp_path):
    assert_one_error_line(run_cli(["export", "--checkpoint", checkpoint, "--out", tmp_path / "m.pt2"]), "rows of 2 molecules")
    with pytest.raises(ConfigError, match="embed gives one molecule's representation"):
        Predictor(checkpoint).embed([("CCO", "O")])
    with pytest.raises(ConfigError, match="explanations cover models of one molecule per row"):
        Predictor(checkpoint, explain=ExplainSettings())
