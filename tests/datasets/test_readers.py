"""One input reader: CSV/TSV (sniffed or given delimiter, gzipped), SDF and .sdf.gz, .smi; the same
inputs through train, predict --input, evaluate; split columns and separate valid/test files; and
regression tests for the reader's former failure modes (each failed before the reader existed)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem

from conftest_models import freesolv_rows

from dgl_graphtx.datasets import MoleculeDataset, example_sdf_path, load_labelled, read_molecules
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.inference import Predictor
from dgl_graphtx.training import regression_metrics
from cli_runner import assert_one_error_line, run_cli

SDF_TARGET = "r_mmffld_Potential_Energy-OPLS_2005"
ROWS = [("CCO", "-5.0", "a"), ("c1ccccc1O", "-6.6", "b"), ("C1CC", "1.0", "c"), ("CCN", "", "d")]



def _write_table(path: Path, delimiter: str, rows=ROWS, header=("smiles", "y", "name"), compress=False) -> Path:
    text = "\n".join(delimiter.join(r) for r in [header, *rows]) + "\n"
    if compress:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    return path


# --------------------------------------------------------------------------------------------
# formats
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,delimiter,given,compress", [
    ("d.csv", ",", None, False), ("d.tsv", "\t", None, False), ("d.txt", ";", None, False),
    ("d.txt", "|", "|", False), ("d.csv.gz", ",", None, True), ("d.tsv.gz", "\t", None, True),
])
def test_tables_read_the_same_whatever_the_delimiter(tmp_path, name, delimiter, given, compress):
    path = _write_table(tmp_path / name, delimiter, compress=compress)
    table = read_molecules(path, delimiter=given)
    assert table.kind == "table"
    assert table.molecules == [r[0] for r in ROWS]
    values = table.targets(["y"])["y"].tolist()
    assert values[:3] == [-5.0, -6.6, 1.0] and np.isnan(values[3])
    assert table.column("name") == ["a", "b", "c", "d"]


def test_sdf_and_gzipped_sdf_match_rdkit_and_the_raw_text(tmp_path, sdf_records):
    gz = tmp_path / "cdk2.sdf.gz"
    gz.write_bytes(gzip.compress(Path(example_sdf_path()).read_bytes()))
    expected = [Chem.MolToSmiles(m) for m in Chem.SDMolSupplier(str(example_sdf_path()))]
    for path in (example_sdf_path(), gz):
        table = read_molecules(path)
        assert table.kind == "sdf"
        assert [Chem.MolToSmiles(m) for m in table.molecules] == expected == table.identifiers
        assert table.targets([SDF_TARGET])[SDF_TARGET].astype(float).tolist() == pytest.approx(
            [float(r["props"][SDF_TARGET]) for r in sdf_records])
        coords = table.molecules[0].GetConformer().GetPositions()
        heavy = [i for i, s in enumerate(sdf_records[0]["symbols"]) if s != "H"]
        np.testing.assert_allclose(coords, sdf_records[0]["coords"][heavy], atol=1e-4)


def test_smi_file_with_header_comments_and_names(tmp_path):
    path = tmp_path / "m.smi"
    path.write_text("SMILES Name\n# a comment\nCCO ethanol\nc1ccccc1\tbenzene ring\nC1CC\n")
    table = read_molecules(path)
    assert table.molecules == ["CCO", "c1ccccc1", "C1CC"]
    assert table.columns["name"].tolist() == ["ethanol", "benzene ring", ""]


def test_dataset_from_any_file_equals_dataset_from_csv(tmp_path):
    frame = freesolv_rows(0, 12)[["smiles", "expt"]]
    csv_path = tmp_path / "a.csv"
    frame.to_csv(csv_path, index=False)
    tsv_gz = tmp_path / "a.tsv.gz"
    frame.to_csv(tsv_gz, sep="\t", index=False, compression="gzip")
    a = MoleculeDataset.from_file(csv_path, ["expt"], progress=False)
    b = MoleculeDataset.from_file(tsv_gz, ["expt"], progress=False)
    assert a.identifiers == b.identifiers == list(frame["smiles"])
    assert a.raw_labels.tolist() == b.raw_labels.tolist()


# --------------------------------------------------------------------------------------------
# hardening: each of these failed (traceback or misleading message) before the reader
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("readers") / "run"
    data = out.parent / "train.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(data, index=False)
    code, _, err = run_cli(["train", data, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "1",
                         "--device", "cpu", "--no-progress", "--set", "model.num_layers=1", "model.hidden_dim=16",
                         "model.num_heads=2"])
    assert code == 0, err
    return out


def _train(data, out, *extra):
    return run_cli(["train", data, "--out", out, "--model", "vanilla", "--epochs", "1", "--device", "cpu", "--no-progress",
                 "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2", *extra])


def test_train_on_empty_sdf_is_a_user_error(tmp_path):
    empty = tmp_path / "empty.sdf"
    empty.write_text("")
    assert_one_error_line(_train(empty, tmp_path / "o", "--targets", "y"), "empty.sdf", "empty")


def test_train_on_binary_sdf_is_a_user_error(tmp_path):
    binary = tmp_path / "binary.sdf"
    binary.write_bytes(np.random.default_rng(0).bytes(3000))
    assert_one_error_line(_train(binary, tmp_path / "o", "--targets", "y"), "binary.sdf", "binary")


def test_gzipped_sdf_is_read_as_sdf_by_train_predict_and_evaluate(tmp_path, model_dir):
    gz = tmp_path / "cdk2.sdf.gz"
    gz.write_bytes(gzip.compress(Path(example_sdf_path()).read_bytes()))
    code, out, err = _train(gz, tmp_path / "sdf_run", "--targets", SDF_TARGET, "--split-col", "nope")
    assert "nope" in err and SDF_TARGET in err  # read as SDF: the SD properties are its columns, not a CSV header
    mols = list(Chem.SDMolSupplier(str(example_sdf_path())))
    expected = Predictor(model_dir / "best.pt", device="cpu").predict(mols)
    code, stdout, err = run_cli(["predict", "--checkpoint", model_dir / "best.pt", "--input", gz, "--output",
                              tmp_path / "p.csv", "--device", "cpu"])
    assert code == 0, err
    table = pd.read_csv(tmp_path / "p.csv")
    assert table["smiles"].tolist() == [Chem.MolToSmiles(m) for m in mols]
    np.testing.assert_allclose(table["expt_pred"], expected["expt_pred"], atol=1e-6)


def test_sdf_missing_the_target_property_names_file_and_property(tmp_path):
    line = assert_one_error_line(_train(example_sdf_path(), tmp_path / "o", "--targets", "logS"), "logS", "cdk2_sample.sdf")
    assert "every target needs" not in line


def test_broken_sdf_record_is_named_by_record_number(tmp_path, model_dir, caplog):
    text = Path(example_sdf_path()).read_text()
    records = text.split("$$$$\n")
    lines = records[2].splitlines()
    lines[3] = "xx" + lines[3][2:]  # corrupt the counts line of record 2
    records[2] = "\n".join(lines) + "\n"
    broken = tmp_path / "broken.sdf"
    broken.write_text("$$$$\n".join(records))
    start_line = 1 + sum(len(r.splitlines()) + 1 for r in records[:2])
    table = read_molecules(broken)
    assert table.molecules[2] is None
    assert table.identifiers[2] == f"SDF record 2 (line {start_line}: {lines[0].strip()})"
    assert broken.read_text().splitlines()[start_line - 1] == lines[0]  # the named line is the record's first
    code, _, err = run_cli(["predict", "--checkpoint", model_dir / "best.pt", "--input", broken, "--output",
                         tmp_path / "p.csv", "--device", "cpu"])
    assert code == 0, err
    predicted = pd.read_csv(tmp_path / "p.csv")
    assert predicted.loc[2, "smiles"].startswith("SDF record 2 (line") and predicted["error"].notna().tolist() == [
        False, False, True, False, False, False, False, False]
    dataset = MoleculeDataset.from_file(broken, [SDF_TARGET], progress=False)
    assert dataset.report.skipped[0].row == 2 and "SDF record 2" in dataset.report.summary()


def test_repeated_column_names_are_an_error(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("smiles,expt,expt\nCCO,1,2\n")
    with pytest.raises(ConfigError, match=r"repeated column names \['expt'\]"):
        read_molecules(path)
    assert_one_error_line(_train(path, tmp_path / "o", "--targets", "expt"), "dup.csv", "expt")


def test_repeated_target_is_an_error_not_a_two_output_model(tmp_path):
    path = tmp_path / "d.csv"
    freesolv_rows(0, 20)[["smiles", "expt"]].to_csv(path, index=False)
    assert_one_error_line(_train(path, tmp_path / "o", "--targets", "expt,expt"), "'expt' given 2 times")
    assert not (tmp_path / "o" / "best.pt").exists()
    with pytest.raises(ConfigError, match="given 2 times"):
        MoleculeDataset(["C", "CC"], [[1.0, 1.0], [2.0, 2.0]], target_names=["y", "y"])


def test_other_table_mistakes_name_the_file(tmp_path):
    binary = tmp_path / "bin.csv"
    binary.write_bytes(np.random.default_rng(1).bytes(2000))
    with pytest.raises(ConfigError, match="bin.csv.*binary"):
        read_molecules(binary)
    assert_one_error_line(_train(tmp_path / "absent.smi", tmp_path / "o", "--targets", "y"), "absent.smi", "not found")
    empty = tmp_path / "e.smi"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="e.smi is empty"):
        read_molecules(empty)
    bad = tmp_path / "s.csv"
    bad.write_text("smiles,split\nC,train\nCC,holdout\n")
    with pytest.raises(ConfigError, match="row 1 of .*s.csv.*'holdout'"):
        load_labelled(bad, [], split_col="split", progress=False)


# --------------------------------------------------------------------------------------------
# the same inputs for every command
# --------------------------------------------------------------------------------------------
def test_evaluate_an_sdf_and_a_tsv(tmp_path, model_dir):
    frame = freesolv_rows(40, 52)[["smiles", "expt"]]
    tsv = tmp_path / "e.tsv"
    frame.to_csv(tsv, sep="\t", index=False)
    code, stdout, err = run_cli(["evaluate", tsv, "--checkpoint", model_dir / "best.pt", "--device", "cpu"])
    assert code == 0, err
    predicted = Predictor(model_dir / "best.pt", device="cpu").predict(list(frame["smiles"]))
    manual = regression_metrics(frame[["expt"]].to_numpy(), predicted[["expt_pred"]].to_numpy(dtype=float))
    assert json.loads(stdout)["rmse"] == pytest.approx(manual["rmse"], rel=1e-5)
    sdf = tmp_path / "labelled.sdf"
    with Chem.SDWriter(str(sdf)) as writer:
        for smi, value in zip(frame["smiles"], frame["expt"]):
            mol = Chem.MolFromSmiles(smi)
            mol.SetProp("expt", str(value))
            writer.write(mol)
    code, stdout, err = run_cli(["evaluate", sdf, "--checkpoint", model_dir / "best.pt", "--device", "cpu"])
    assert code == 0, err
    report = json.loads(stdout)
    assert report["molecules"] == 12 and report["rmse"] == pytest.approx(manual["rmse"], rel=1e-4)


def test_split_column_and_separate_files_define_the_parts(tmp_path):
    frame = freesolv_rows(0, 30)[["smiles", "expt"]].copy()
    frame["part"] = ["train"] * 20 + ["val"] * 5 + ["TEST"] * 5
    frame.loc[3, "smiles"] = "C1CC"  # invalid training row: left out, the parts stay right
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    code, _, err = _train(data, tmp_path / "col", "--targets", "expt", "--split-col", "part")
    assert code == 0, err
    summary = json.loads((tmp_path / "col" / "metrics.json").read_text())
    assert summary["sizes"] == {"train": 19, "valid": 5, "test": 5}
    tested = pd.read_csv(tmp_path / "col" / "test_predictions.csv")
    assert tested["smiles"].tolist() == frame["smiles"][25:].tolist()

    files = [tmp_path / f"{name}.csv" for name in ("tr", "va", "te")]
    for path, part in zip(files, (frame[:20], frame[20:25], frame[25:])):
        part[["smiles", "expt"]].to_csv(path, index=False)
    code, _, err = _train(files[0], tmp_path / "files", "--targets", "expt", "--valid", files[1], "--test", files[2])
    assert code == 0, err
    summary_files = json.loads((tmp_path / "files" / "metrics.json").read_text())
    assert summary_files["sizes"] == summary["sizes"]
    assert pd.read_csv(tmp_path / "files" / "test_predictions.csv")["smiles"].tolist() == tested["smiles"].tolist()
    assert_one_error_line(_train(files[0], tmp_path / "x", "--targets", "expt", "--valid", files[1]), "--test")


def test_a_target_without_any_training_label_is_named(tmp_path):
    frame = freesolv_rows(0, 20)[["smiles", "expt"]].copy()
    frame["logP"] = ["", "n/a"] * 10
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    assert_one_error_line(_train(path, tmp_path / "o", "--targets", "expt,logP"), "target 'logP'",
                          "has no usable label: every value is blank")


# --------------------------------------------------------------------------------------------
# XYZ files: coordinates, bonds perceived from them
# --------------------------------------------------------------------------------------------
XYZ_MOLECULES = [("CCO", 0, "-0.77"), ("c1ccccc1", 0, "-0.87"), ("CC(=O)[O-]", -1, "-2.1"), ("C[NH3+]", 1, "-1.5")]


def _xyz_block(smiles: str, properties: str) -> str:
    """An XYZ block of ``smiles`` with seeded ETKDG coordinates (hydrogens included)."""
    from rdkit.Chem import AllChem
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    assert AllChem.EmbedMolecule(mol, randomSeed=7) == 0
    lines = Chem.MolToXYZBlock(mol).splitlines()
    return "\n".join([lines[0], properties, *lines[2:]]) + "\n"


@pytest.fixture()
def xyz_file(tmp_path) -> Path:
    blocks = [_xyz_block(s, f"charge={q} dG={y} name=m{i}") for i, (s, q, y) in enumerate(XYZ_MOLECULES)]
    blocks.append(_xyz_block("CC(=O)[O-]", "dG=0.5"))  # the anion without its charge: no valid structure
    path = tmp_path / "mols.xyz"
    path.write_text("".join(blocks))
    return path


def test_xyz_blocks_are_read_with_bonds_perceived_from_the_coordinates(xyz_file):
    """`.xyz` used to be read as a one-column table ("column 'smiles' not in ...xyz")."""
    table = read_molecules(xyz_file)
    assert table.kind == "xyz" and len(table) == 5
    assert table.identifiers[:4] == [Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s, _, _ in XYZ_MOLECULES]
    assert [m.GetNumAtoms() for m in table.molecules[:4]] == [Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s, _, _ in XYZ_MOLECULES]
    assert all(m.GetConformer().Is3D() for m in table.molecules[:4])
    assert table.names[:4] == ["m0", "m1", "m2", "m3"] and table.targets(["dG"])["dG"].tolist() == ["-0.77", "-0.87", "-2.1", "-1.5", "0.5"]
    assert "XYZ record 4 (line" in table.identifiers[4] and "total charge 0" in table.molecules[4].reason
    with_h = read_molecules(xyz_file, featurizer=FeaturizerConfig(explicit_hydrogens=True))
    assert with_h.molecules[0].GetNumAtoms() == 9  # ethanol with its hydrogens


def test_xyz_files_are_read_for_training_and_prediction_with_bad_blocks_reported(xyz_file, model_dir, tmp_path):
    code, _, err = run_cli(["predict", "--checkpoint", model_dir / "best.pt", "--input", xyz_file, "--output", tmp_path / "p.csv",
                            "--keep-cols", "dG"])
    assert code == 0, err
    table = pd.read_csv(tmp_path / "p.csv")
    assert table["name"].tolist()[:4] == ["m0", "m1", "m2", "m3"] and table["dG"].tolist() == [-0.77, -0.87, -2.1, -1.5, 0.5]
    assert table["error"][:4].isna().all() and "no bonds perceived from the geometry (total charge 0)" in table["error"][4]
    dataset, _ = load_labelled(xyz_file, ["dG"], progress=False)
    assert len(dataset) == 4 and dataset.report.num_skipped == 1
    assert dataset.graphs.ndata["input_atom"].shape[0] == sum(Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s, _, _ in XYZ_MOLECULES)


def test_a_malformed_xyz_file_is_one_error_naming_the_line(tmp_path):
    bad = tmp_path / "bad.xyz"
    bad.write_text("3\nwater\nO 0 0 0\nH 0.96 0 0\n")
    with pytest.raises(ConfigError, match=r"XYZ block at line 1 of .*bad.xyz announces 3 atoms, but the file ends after 2"):
        read_molecules(bad)
    bad.write_text("water\n3\n")
    with pytest.raises(ConfigError, match=r"line 1 of .*bad.xyz should give the atom count"):
        read_molecules(bad)


def test_a_table_with_carriage_returns_alone_ends_its_lines_there(tmp_path):
    """Line breaks of classic Mac OS (and some spreadsheet exports): the reader raised the csv
    module's 'new-line character seen in unquoted field'."""
    path = tmp_path / "mac.csv"
    path.write_bytes(_write_table(tmp_path / "unix.csv", ",").read_bytes().replace(b"\n", b"\r"))
    table = read_molecules(path)
    assert table.molecules == [r[0] for r in ROWS] and table.column("name") == ["a", "b", "c", "d"]
    assert table.targets(["y"])["y"].tolist()[:3] == [-5.0, -6.6, 1.0]
    mixed = tmp_path / "mixed.csv"  # a carriage return inside a file with newlines stays as it is
    mixed.write_bytes(b'smiles,note\nCCO,"a\rb"\n')
    assert read_molecules(mixed).column("note") == ["a\rb"]


def test_a_store_without_its_manifest_is_named_as_an_unfinished_store(tmp_path):
    from dgl_graphtx.datasets.readers import check_file
    store = tmp_path / "store"
    (store / "shards").mkdir(parents=True)
    (store / "plan.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"is a folder, not a data file: it looks like a featurized store that is not finished "
                                          r"\(it has no manifest.json\); run dgl-graphtx featurize again"):
        check_file(store, "data")
    with pytest.raises(ConfigError, match=r"is a folder, not a data file$"):
        check_file(tmp_path, "data")
