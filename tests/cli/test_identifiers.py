"""Identifiers travel with each molecule through predict, embed and evaluate (CLI and Python):
SDF titles and .smi names as ``name``, ``--id-col`` / ``--keep-cols`` for tables, the user's own
SMILES next to RDKit's canonical one; outputs in the format their name asks for."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem

from conftest_models import freesolv_rows, tiny_preset
from cli_runner import assert_one_error_line, run_cli

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import example_sdf_path
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything

TARGET = "expt"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    seed_everything(0)
    preset = tiny_preset("vanilla", num_tasks=2)
    path = tmp_path_factory.mktemp("ids") / "best.pt"
    return save_checkpoint(path, build_model(preset.model), CheckpointMeta(preset.featurizer, preset.relation, [TARGET, "logp"]))


@pytest.fixture(scope="module")
def table_csv(tmp_path_factory):
    """Written SMILES deliberately non-canonical, with a compound id, a note column and labels."""
    frame = freesolv_rows(0, 6)[["smiles", "expt"]].copy()
    frame["smiles"] = [Chem.MolToSmiles(Chem.MolFromSmiles(s), doRandom=True, canonical=False) for s in frame["smiles"]]
    frame.loc[2, "smiles"] = "C1CC("  # invalid: keeps its row and ids
    frame["cid"] = [f"CPD-{i:03d}" for i in range(len(frame))]
    frame["note"] = list("abcdef")
    frame["logp"] = np.linspace(-1, 1, len(frame))
    path = tmp_path_factory.mktemp("in") / "mols.csv"
    frame.to_csv(path, index=False)
    return path, frame


def _canonical(smiles):
    mol = Chem.MolFromSmiles(smiles)
    return Chem.MolToSmiles(mol) if mol is not None else None


def test_predict_csv_carries_id_and_kept_columns_and_both_smiles(checkpoint, table_csv, tmp_path):
    path, frame = table_csv
    out = tmp_path / "p.csv"
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--id-col", "cid", "--keep-cols", "note",
                            "--output", out, "--device", "cpu"])
    assert code == 0, err
    table = pd.read_csv(out, keep_default_na=False)
    assert list(table.columns[:4]) == ["cid", "note", "smiles", "canonical_smiles"]
    assert table["cid"].tolist() == frame["cid"].tolist() and table["note"].tolist() == frame["note"].tolist()
    assert table["smiles"].tolist() == frame["smiles"].tolist()  # the user's own text
    assert table["canonical_smiles"].tolist() == [_canonical(s) or "" for s in frame["smiles"]]
    assert table.loc[2, "error"] != "" and table.loc[2, "cid"] == "CPD-002"


def test_resumed_prediction_keeps_ids_in_step(checkpoint, table_csv, tmp_path, monkeypatch):
    path, frame = table_csv
    out = tmp_path / "p.csv"
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--id-col", "cid", "--output", out,
                            "--device", "cpu", "--chunk-size", "2"])
    assert code == 0, err
    whole = pd.read_csv(out)
    out.unlink()
    real = Predictor._predict_chunk
    calls = {"n": 0}

    def killed_after_two_chunks(self, *args):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(Predictor, "_predict_chunk", killed_after_two_chunks)
    with pytest.raises(KeyboardInterrupt):
        run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--id-col", "cid", "--output", out, "--device", "cpu",
                 "--chunk-size", "2"])
    assert len(pd.read_csv(out.with_name(out.name + ".partial"))) == 4
    monkeypatch.setattr(Predictor, "_predict_chunk", real)
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--id-col", "cid", "--output", out,
                            "--device", "cpu", "--chunk-size", "2", "--resume"])
    assert code == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(out), whole)


def test_sdf_titles_and_smi_names_are_carried_as_name(checkpoint, tmp_path):
    titles = [m.GetProp("_Name") for m in Chem.SDMolSupplier(str(example_sdf_path()))]
    table = Predictor(checkpoint).predict_file(example_sdf_path(), id_col="Cluster")
    assert table["name"].tolist() == titles and list(table.columns[:2]) == ["name", "Cluster"]
    smi = tmp_path / "m.smi"
    smi.write_text("CCO ethanol\nOCC\nc1ccccc1 benzene ring\n")
    table = Predictor(checkpoint).predict_file(smi)
    assert table["name"].tolist() == ["ethanol", "", "benzene ring"]
    assert table["smiles"].tolist() == ["CCO", "OCC", "c1ccccc1"] and table["canonical_smiles"].tolist() == ["CCO", "CCO", "c1ccccc1"]


def test_embed_carries_ids(checkpoint, table_csv, tmp_path):
    path, frame = table_csv
    out = tmp_path / "e.tsv"
    code, _, err = run_cli(["embed", "--checkpoint", checkpoint, "--input", path, "--id-col", "cid", "--output", out, "--device", "cpu"])
    assert code == 0, err
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns[:4]) == ["cid", "smiles", "canonical_smiles", "error"]
    assert table["cid"].tolist() == frame["cid"].tolist()
    expected = Predictor(checkpoint).embed(list(frame["smiles"])).molecules
    np.testing.assert_allclose(table.filter(regex=r"^e\d+$").to_numpy(dtype=float), expected, atol=1e-5)


def test_evaluate_output_rows_carry_ids_measured_and_predicted(checkpoint, table_csv, tmp_path):
    path, frame = table_csv
    out = tmp_path / "rows.csv"
    code, stdout, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--id-col", "cid", "--output", out, "--device", "cpu"])
    assert code == 0, err
    report = json.loads(stdout)
    rows = pd.read_csv(out)
    assert list(rows.columns) == ["cid", "smiles", "canonical_smiles", TARGET, f"{TARGET}_pred", "logp", "logp_pred", "error"]
    assert rows["cid"].tolist() == frame["cid"].tolist()
    np.testing.assert_allclose(rows[TARGET], frame["expt"])
    predicted = Predictor(checkpoint).predict(list(frame["smiles"]))
    np.testing.assert_allclose(rows[f"{TARGET}_pred"], predicted[f"{TARGET}_pred"], atol=1e-6)
    # per-target metrics, each by hand on the valid rows
    valid = predicted["error"].isna().to_numpy()
    for name, column in ((TARGET, "expt"), ("logp", "logp")):
        err_ = predicted.loc[valid, f"{name}_pred"].to_numpy() - frame.loc[valid, column].to_numpy()
        assert report["per_target"][name]["rmse"] == pytest.approx(float(np.sqrt(np.mean(err_ ** 2))), rel=1e-6)
        assert report["per_target"][name]["mae"] == pytest.approx(float(np.mean(np.abs(err_))), rel=1e-6)
    assert report["rmse"] == pytest.approx(np.mean([report["per_target"][n]["rmse"] for n in (TARGET, "logp")]), rel=1e-6)


def test_the_measured_value_can_be_kept_beside_the_prediction(checkpoint, table_csv, tmp_path):
    """predict named the prediction 'expt' while evaluate and test_predictions.csv said 'expt_pred',
    so --keep-cols expt (the measured value) was refused as a clash: one naming everywhere."""
    path, frame = table_csv
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--keep-cols", "expt,logp",
                            "--output", tmp_path / "p.csv", "--device", "cpu"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    assert list(predicted.columns) == ["expt", "logp", "smiles", "canonical_smiles", "expt_pred", "logp_pred", "error", "warning"]
    np.testing.assert_allclose(predicted["expt"], frame["expt"])
    code, _, err = run_cli(["evaluate", path, "--checkpoint", checkpoint, "--output", tmp_path / "rows.csv", "--device", "cpu"])
    assert code == 0, err
    rows = pd.read_csv(tmp_path / "rows.csv")
    np.testing.assert_allclose(rows["expt_pred"], predicted["expt_pred"], atol=1e-6)  # the same column, the same values


def test_carried_column_mistakes_are_one_line(checkpoint, table_csv, tmp_path):
    path, _ = table_csv
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--id-col", "CID"]), "'CID'", "cid")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", path, "--keep-cols", "smiles"]),
                          "'smiles'", "output columns")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "CCO", "--id-col", "cid"]), "--input")
    smi = tmp_path / "m.smi"
    smi.write_text("CCO ethanol\n")
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--input", smi, "--keep-cols", "x"]), ".smi")


def test_tsv_output_has_tabs_and_parquet_without_pyarrow_names_the_extra(checkpoint, tmp_path):
    out = tmp_path / "p.tsv"
    code, _, err = run_cli(["predict", "--checkpoint", checkpoint, "CCO", "c1ccccc1", "--output", out])
    assert code == 0, err
    header = out.read_text().splitlines()[0]
    assert header.split("\t")[:3] == ["smiles", "canonical_smiles", f"{TARGET}_pred"] and "," not in header
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        for command in (["predict", "CCO"], ["embed", "CCO"]):
            assert_one_error_line(run_cli([*command, "--checkpoint", checkpoint, "--output", tmp_path / "x.parquet"]),
                                  "dgl_graphtx[parquet]")
        assert not (tmp_path / "x.parquet").exists()
    assert_one_error_line(run_cli(["predict", "CCO", "--checkpoint", checkpoint, "--output", tmp_path / "x.xlsx"]), ".tsv")


def test_smi_file_with_targets_says_it_cannot_hold_labels(tmp_path):
    smi = tmp_path / "m.smi"
    smi.write_text("CCO ethanol\nCCC propane\n")
    line = assert_one_error_line(run_cli(["train", smi, "--targets", "logS", "--out", tmp_path / "o"]), ".smi", "cannot hold the labels")
    assert "spelling" not in line


def test_an_output_naming_the_input_file_is_refused_and_the_input_kept(checkpoint, tmp_path):
    """The probe: embed (and predict) --output naming the --input file replaced it with their table."""
    source = tmp_path / "in.csv"
    source.write_text("id,smiles,expt,extra\nm1,CCO,1.0,a\nm4,c1ccccc1,2.0,d\n")
    before = source.read_bytes()
    same = str(tmp_path / "." / "in.csv")  # the same file by another path
    for command in (["predict", "--input", source, "--output", same], ["predict", "--input", source, "--sdf-output", source],
                    ["embed", "--input", source, "--output", same], ["evaluate", source, "--output", same]):
        assert_one_error_line(run_cli([*command, "--checkpoint", checkpoint]), "is the input file", "another file name")
        assert source.read_bytes() == before
