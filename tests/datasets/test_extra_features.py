"""Extra features: molecule-level generators and columns in the readout, atom-level features,
their scaling stored in checkpoints and reused at prediction time, and the command line."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from rdkit import Chem, rdBase

from cli_runner import assert_one_error_line, run_cli
from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import MoleculeDataset, freesolv
from dgl_graphtx.datasets import ExtraFeatures, add_extra_features
from dgl_graphtx.datasets.extra_features import FittedExtraFeatures, sdf_atom_properties
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.featurize.descriptors import FeatureScaler, compute_features, feature_names
from dgl_graphtx.inference import Predictor
from dgl_graphtx.models import get_preset
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig

GENERATORS = ("rdkit2d", "morgan_counts:radius=1:size=32")
TINY = dict(num_layers=1, hidden_dim=16, num_heads=2)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return freesolv()[:40][["smiles", "expt", "calc"]].reset_index(drop=True)


@pytest.fixture(scope="module")
def trained(frame, tmp_path_factory):
    preset = get_preset("vanilla", **TINY)
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer,
                                        relation=preset.relation, progress=False)
    add_extra_features(ds, ExtraFeatures(GENERATORS, ("calc",)), list(frame["smiles"]), frame)
    out = tmp_path_factory.mktemp("features")
    result = train_and_evaluate(ds, preset, TrainConfig(epochs=2, batch_size=8, progress=False), out_dir=out / "run")
    return result, out / "run" / "best.pt"


def test_scaler_is_fitted_on_training_rows_and_stored(frame, trained):
    result, path = trained
    stored = load_checkpoint(path).meta.extra.extra_features
    raw = np.concatenate([compute_features(GENERATORS, frame["smiles"]), frame[["calc"]].to_numpy()], axis=1)
    expected = FeatureScaler.fit(raw[result.split.train], ExtraFeatures(GENERATORS, ("calc",)).molecule_names)
    assert FeatureScaler.from_dict(stored["molecule_scaler"]) == expected
    assert stored["spec"]["generators"] == list(GENERATORS) and stored["spec"]["columns"] == ["calc"]
    assert result.model.config.molecule_features == raw.shape[1]


def test_prediction_reuses_stored_scaler_exactly(frame, trained):
    result, path = trained
    loaded = load_checkpoint(path)
    scaler = FeatureScaler.from_dict(loaded.meta.extra.extra_features["molecule_scaler"])
    smiles = list(frame["smiles"][:5])
    got = Predictor(path).predict(smiles, features=frame[["calc"]][:5])["expt_pred"].to_numpy()
    # independent path: featurize, scale the raw values with the stored statistics, run the model
    raw = np.concatenate([compute_features(GENERATORS, smiles), frame[["calc"]][:5].to_numpy()], axis=1)
    scaled = torch.from_numpy(scaler.transform(raw))
    model = loaded.model.eval()
    for i, s in enumerate(smiles):
        g, rel = smiles_to_graphs(s, loaded.meta.featurizer, loaded.meta.relation)
        g.ndata["mol_features"] = scaled[i].expand(g.num_nodes(), -1)
        assert float(model.predict(g, rel)[0, 0]) == pytest.approx(got[i], rel=1e-5, abs=1e-6)
    # and the test predictions written at training time match the predictor's
    test_rows = result.split.test
    again = Predictor(path).predict(list(frame["smiles"][test_rows]), features=frame[["calc"]].iloc[test_rows])
    np.testing.assert_allclose(again["expt_pred"].to_numpy(), result.test_predictions["expt_pred"].to_numpy(), rtol=1e-5)


def test_head_reads_the_feature_column(frame, trained):
    _, path = trained
    predictor = Predictor(path)
    smiles = list(frame["smiles"][:3])
    base = predictor.predict(smiles, features=frame[["calc"]][:3])["expt_pred"].to_numpy()
    shifted = predictor.predict(smiles, features=frame[["calc"]][:3] + 5.0)["expt_pred"].to_numpy()
    assert not np.allclose(base, shifted)


def test_missing_feature_column_is_one_clear_error(frame, trained, tmp_path):
    _, path = trained
    with pytest.raises(ConfigError, match="feature column 'calc'"):
        Predictor(path).predict(["CCO"])
    csv = tmp_path / "no_calc.csv"
    frame[["smiles", "expt"]].to_csv(csv, index=False)
    assert_one_error_line(run_cli(["predict", "--checkpoint", path, "--input", csv]), "feature column 'calc'", "--features-cols")


def test_a_feature_cell_that_is_not_a_number_fails_its_row_only(frame, trained, tmp_path):
    """"No input can stop a run": a text cell in a feature column is that row's error (it stopped
    the whole prediction, naming the molecule but not the row)."""
    _, path = trained
    rows = frame.head(6).copy()
    rows["calc"] = rows["calc"].astype(object)
    rows.loc[3, "calc"] = "abc"
    table = Predictor(path).predict(list(rows["smiles"]), features=rows[["calc"]])
    assert table["error"].notna().tolist() == [False, False, False, True, False, False]
    assert table.loc[3, "error"] == "feature column 'calc' holds 'abc', not a number; fix or blank it"
    assert np.isnan(table.loc[3, "expt_pred"]) and table["expt_pred"].drop(index=3).notna().all()
    clean = Predictor(path).predict(list(rows["smiles"].drop(index=3)), features=rows[["calc"]].drop(index=3))
    np.testing.assert_allclose(table["expt_pred"].drop(index=3), clean["expt_pred"], rtol=0, atol=1e-6)


def test_cli_trains_and_predicts_with_features(frame, tmp_path):
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / "run"
    code, stdout, err = run_cli(["train", csv, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "1",
                                 "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
                                 "--features-generators", "morgan_counts:radius=1:size=16", "--features-cols", "calc",
                                 "--no-progress", "-q"])
    assert code == 0, err
    data = yaml.safe_load((out / "config.yaml").read_text())["data"]
    assert data["features_generators"] == ["morgan_counts:radius=1:size=16"] and data["features_cols"] == ["calc"]
    assert load_checkpoint(out / "best.pt").model.config.molecule_features == 17
    code, stdout, err = run_cli(["predict", "--checkpoint", out / "best.pt", "--input", csv, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    predictions = pd.read_csv(tmp_path / "p.csv")
    assert len(predictions) == 40 and predictions["expt_pred"].notna().all()
    assert_one_error_line(run_cli(["train", csv, "--targets", "expt", "--out", tmp_path / "bad", "--features-generators", "mordred"]),
                          "unknown feature generator 'mordred'")


def _first_atom_index(mol: Chem.Mol) -> np.ndarray:
    """Atom-level feature: the atom's index in the input molecule and its atomic number."""
    return np.array([[atom.GetIdx(), atom.GetAtomicNum()] for atom in mol.GetAtoms()], dtype=float)


def test_atom_function_values_follow_input_atoms():
    smiles = ["OCC", "CCN", "c1ccccc1O"]
    ds = MoleculeDataset(smiles, [[1.0], [2.0], [3.0]], progress=False)
    values = add_extra_features(ds, ExtraFeatures(), smiles, atom_function=_first_atom_index)
    assert values.spec.atom_width == 2 and values.spec.atom_function == "_first_atom_index"
    graphs = ds.graphs
    input_atom = graphs.ndata["input_atom"].numpy()
    # raw column 0 is the input atom index of every node, column 1 its element
    np.testing.assert_array_equal(values.atom[:, 0], input_atom)
    for index, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        start, count = int(graphs.node_offsets[index]), int(graphs.num_nodes[index])
        elements = [mol.GetAtomWithIdx(int(a)).GetAtomicNum() for a in input_atom[start:start + count]]
        np.testing.assert_array_equal(values.atom[start:start + count, 1], elements)
    fitted = values.fit([0, 1, 2])
    assert ds[2][0].ndata["atom_extra"].shape == (7, 2)
    np.testing.assert_allclose(ds.graphs.ndata["atom_extra"].numpy(), fitted.atom_scaler.transform(values.atom))


def test_model_with_atom_function_predicts_the_same_for_any_smiles_order(tmp_path):
    smiles = ["OCC", "CCN", "c1ccccc1O", "CC(=O)O", "CCCl", "NCCO"]
    preset = get_preset("grpe", **TINY)
    ds = MoleculeDataset(smiles, [[float(i)] for i in range(6)], featurizer=preset.featurizer, relation=preset.relation, progress=False)
    add_extra_features(ds, ExtraFeatures(), smiles, atom_function=lambda m: [[a.GetDegree()] for a in m.GetAtoms()])
    from dgl_graphtx.datasets import Split
    train_and_evaluate(ds, preset, TrainConfig(epochs=1, batch_size=2, progress=False), split=Split([0, 1, 2, 3], [4], [5]),
                       out_dir=tmp_path / "run")
    path = tmp_path / "run" / "best.pt"
    assert load_checkpoint(path).model.config.atom_extra_features == 1
    with pytest.raises(ConfigError, match="pass it as atom_function"):
        Predictor(path).predict(["CCO"])
    predictor = Predictor(path, atom_function=lambda m: [[a.GetDegree()] for a in m.GetAtoms()])
    a, b = predictor.predict(["OCC(N)c1ccccc1", "c1ccccc1C(N)CO"])["target_0_pred"].to_numpy()
    assert a == pytest.approx(b, abs=1e-5)


def test_sdf_atom_properties_are_read_from_records(tmp_path):
    mol = Chem.MolFromSmiles("OCC")
    mol.SetProp("atom.dprop.charge", "-0.4 0.1 0.05")
    mol.SetProp("y", "1.5")
    path = tmp_path / "m.sdf"
    with Chem.SDWriter(str(path)) as writer:
        writer.write(mol)
        writer.write(mol)
    reread = next(iter(Chem.SDMolSupplier(str(path))))
    np.testing.assert_allclose(sdf_atom_properties(["charge"])(reread)[:, 0], [-0.4, 0.1, 0.05])
    with pytest.raises(ConfigError, match="no atom property 'spin'"):
        sdf_atom_properties(["spin"])(reread)


def test_ensemble_with_feature_columns_predicts_and_requires_them(frame, tmp_path):
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / "ens"
    code, _, err = run_cli(["train", csv, "--targets", "expt", "--out", out, "--model", "vanilla", "--epochs", "1",
                            "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
                            "--features-cols", "calc", "--ensemble-size", "2", "-q"])
    assert code == 0, err
    code, _, err = run_cli(["predict", "--checkpoint", out, "--input", csv, "--output", tmp_path / "p.csv"])
    assert code == 0, err
    assert pd.read_csv(tmp_path / "p.csv")["expt_std"].notna().all()
    no_calc = tmp_path / "no_calc.csv"
    frame[["smiles"]].to_csv(no_calc, index=False)
    assert_one_error_line(run_cli(["predict", "--checkpoint", out, "--input", no_calc]), "feature column 'calc'")


def test_text_in_a_feature_column_is_an_error_naming_molecule_and_column(frame):
    ds = MoleculeDataset.from_dataframe(frame[:3], target_cols=["expt"], progress=False)
    bad = frame[:3].assign(calc=["1.0", "abc", ""])
    with pytest.raises(ConfigError, match=re.escape(f"molecule {frame['smiles'][1]!r}: feature column 'calc' holds 'abc'")):
        add_extra_features(ds, ExtraFeatures(columns=("calc",)), list(bad["smiles"]), bad)
    values = add_extra_features(ds, ExtraFeatures(columns=("calc",)), list(bad["smiles"]), bad.assign(calc=["1.0", "", "3"]))
    assert values.molecule[:, 0].tolist()[0] == 1.0 and np.isnan(values.molecule[1, 0])  # blank: missing, imputed when scaled


def test_feature_values_beyond_float32_are_masked_and_reported(frame, tmp_path):
    """One 1e308 in a --features-cols column used to overflow the scaler (centre 3.2e306, scale 1):
    the whole column became the constant -10, with an empty input report. Such values (and
    infinite ones) are masked like missing values and reported; the column keeps its information."""
    from cli_runner import run_cli_without_runtime_warnings
    from dgl_graphtx.datasets.report import FEATURE_MASKED
    table = frame[["smiles", "expt"]].copy()
    table["feat"] = np.linspace(-1.0, 1.0, len(table))
    table["feat"] = table["feat"].astype(object)
    table.loc[3, "feat"], table.loc[7, "feat"] = "1e308", "-inf"
    table["part"] = ["train"] * 30 + ["valid"] * 5 + ["test"] * 5
    csv = tmp_path / "d.csv"
    table.to_csv(csv, index=False)
    out = tmp_path / "run"
    code, _, err = run_cli_without_runtime_warnings(["train", csv, "--targets", "expt", "--split-col", "part", "--out", out,
                                                     "--features-cols", "feat", "--features-generators", "none",
                                                     "--model", "vanilla", "--epochs", "1",
                                                     "--no-cache", "--device", "cpu", "--set", "model.num_layers=1",
                                                     "model.hidden_dim=16", "model.num_heads=2"])
    assert code == 0, err
    report = pd.read_csv(out / "input_report.csv")
    assert report[["row", "action"]].values.tolist() == [[3, FEATURE_MASKED], [7, FEATURE_MASKED]]
    assert "value 1e+308 of extra feature 'feat' is beyond float32's range" in report["reason"][0]
    assert "value -inf of extra feature 'feat' is not finite" in report["reason"][1]
    scaler = load_checkpoint(out / "best.pt").meta.extra.extra_features["molecule_scaler"]
    usable = np.linspace(-1.0, 1.0, len(table))[[r for r in range(30) if r not in (3, 7)]]  # the training rows kept
    assert scaler["center"][0] == pytest.approx(usable.mean()) and scaler["scale"][0] == pytest.approx(usable.std())
    # prediction masks the same values the same way, and says so
    predicted = Predictor(out / "best.pt").predict_file(csv)
    assert "extra feature 'feat' is beyond float32's range" in predicted["warning"][3]
    assert predicted["warning"][[0, 1, 2]].isna().all()


def test_training_data_with_extra_features_reads_each_file_once(frame, tmp_path, monkeypatch):
    """The files were read twice when extra features were on (once for the molecules, again for the features)."""
    from dgl_graphtx.datasets import readers
    from dgl_graphtx.runs import load_training_data, resolve_run_config
    csv = tmp_path / "d.csv"
    frame.to_csv(csv, index=False)
    reads = []
    read_table = readers.read_table
    monkeypatch.setattr(readers, "read_table", lambda path, *args: reads.append(path) or read_table(path, *args))
    config = resolve_run_config(overrides=[f"data.path={csv}", "data.targets=expt", "data.features_cols=calc",
                                           "data.features_generators=morgan_counts:radius=1:size=8", "data.cache=false",
                                           "train.progress=false"])
    dataset, _ = load_training_data(config)
    assert [str(p) for p in reads] == [str(csv)]
    np.testing.assert_allclose(dataset.extra_values.molecule[:, -1], frame["calc"].to_numpy())


def test_extra_values_is_a_declared_attribute_that_pickled_and_cached_datasets_read(frame, tmp_path):
    """extra_values defaults to None on every dataset (one from the cache, or pickled before it
    was declared) and travels with a pickled dataset that has it."""
    import pickle

    from dgl_graphtx.datasets.data_record import content_digest
    plain = MoleculeDataset.from_dataframe(frame[:6], target_cols=["expt"], cache_dir=tmp_path, progress=False)
    cached = MoleculeDataset.from_dataframe(frame[:6], target_cols=["expt"], cache_dir=tmp_path, progress=False)
    assert plain.extra_values is None and cached.extra_values is None and "extra_values" not in vars(cached)
    assert content_digest(plain) == content_digest(cached)
    add_extra_features(plain, ExtraFeatures(columns=("calc",)), list(frame["smiles"][:6]), frame[:6])
    restored = pickle.loads(pickle.dumps(plain))
    np.testing.assert_allclose(restored.extra_values.molecule[:, 0], frame["calc"][:6].to_numpy())
    assert content_digest(restored) == content_digest(plain) != content_digest(cached)


def test_a_calibration_dataset_without_the_extra_features_is_refused_by_name(frame):
    from dgl_graphtx.datasets import Split
    from dgl_graphtx.runs.calibration_part import CalibrationPart
    from dgl_graphtx.runs import RunPlan
    from dgl_graphtx.runs.experiment import Experiment, _fit_extra_features
    from dgl_graphtx.uncertainty import UncertaintyConfig
    preset = get_preset("vanilla", **TINY)
    data = MoleculeDataset.from_dataframe(frame[:8], target_cols=["expt"], progress=False)
    add_extra_features(data, ExtraFeatures(columns=("calc",)), list(frame["smiles"][:8]), frame[:8])
    other = MoleculeDataset.from_dataframe(frame[8:12], target_cols=["expt"], progress=False)
    experiment = Experiment(RunPlan(preset, TrainConfig(), uncertainty=UncertaintyConfig("mve")), data,
                            Split([0, 1, 2, 3], [4, 5], [6, 7]), CalibrationPart(other, [0, 1, 2, 3], "a file of its own"))
    with pytest.raises(ConfigError, match="calibration dataset has none"):
        _fit_extra_features(experiment)


def test_a_feature_column_blank_in_every_row_is_refused_before_featurizing(frame, tmp_path, monkeypatch):
    """An entirely blank --features-cols column was accepted silently (scaled to a constant 0)."""
    from cli_runner import must_not_be_called
    from dgl_graphtx.datasets import molecule_dataset

    csv = tmp_path / "d.csv"
    frame.assign(calc=["", " ", None, "nan"] * 10).to_csv(csv, index=False)
    monkeypatch.setattr(molecule_dataset, "featurize_and_pack", must_not_be_called("featurizing before the blank column was refused"))
    assert_one_error_line(run_cli(["train", csv, "--targets", "expt", "--out", tmp_path / "run", "--features-cols", "calc",
                                   "--model", "vanilla", "--epochs", "1", "--no-progress"]),
                          "feature column 'calc'", str(csv), "blank in all 40 rows")
    assert not (tmp_path / "run" / "best.pt").exists()


def test_a_model_whose_descriptors_this_rdkit_names_otherwise_is_refused_when_loaded():
    """RDKit adds descriptors from release to release (210 in 2023.09, 217 in 2026.09): a model
    fitted on another release's list is refused in one line naming both releases, before any
    prediction, instead of failing on a shape deep in a chunk (or reading shifted columns)."""
    names = feature_names(["rdkit2d"])
    values = np.random.default_rng(0).normal(size=(5, len(names)))
    fitted = FittedExtraFeatures(ExtraFeatures(generators=("rdkit2d",)), FeatureScaler.fit(values, names))
    stored = fitted.to_dict()
    assert stored["rdkit_version"] == rdBase.rdkitVersion and FittedExtraFeatures.from_dict(stored) == fitted
    older = FeatureScaler.fit(values[:, 1:], names[1:]).to_dict()  # a release without the first descriptor
    with pytest.raises(ConfigError, match=rf"reads {len(names) - 1} molecule-level features \(rdkit2d\) and RDKit "
                                          rf"{rdBase.rdkitVersion} gives {len(names)} \(missing \[\], new \['{names[0]}'\]\).*"
                                          r"trained with \(2023.09.6\)"):
        FittedExtraFeatures.from_dict({**stored, "molecule_scaler": older, "rdkit_version": "2023.09.6"})


def test_generator_values_are_cached_beside_the_featurized_molecules(frame, tmp_path, monkeypatch, caplog):
    """A rerun (a resume, each trial of a search) reads the descriptors from the cache instead of
    computing them again: the same values; another generator gets its own file; a damaged file is
    computed again with a warning; a dataset that is not cached caches nothing."""
    from dgl_graphtx.datasets import extra_features
    calls = []
    compute = extra_features.compute_features
    monkeypatch.setattr(extra_features, "compute_features", lambda specs, *a, **k: calls.append(specs) or compute(specs, *a, **k))
    smiles, spec = list(frame["smiles"][:8]), ExtraFeatures(generators=("rdkit2d",))

    def values(generators=spec, cache_dir=tmp_path):
        dataset = MoleculeDataset.from_dataframe(frame[:8], target_cols=["expt"], cache_dir=cache_dir, progress=False)
        return add_extra_features(dataset, generators, smiles).molecule

    first = values()
    cached = list(tmp_path.glob("features-*.npz"))
    assert len(calls) == 1 and len(cached) == 1
    np.testing.assert_array_equal(values(), first)
    assert len(calls) == 1  # read back, not computed
    values(ExtraFeatures(generators=("morgan_counts:radius=1:size=8",)))
    assert len(calls) == 2 and len(list(tmp_path.glob("features-*.npz"))) == 2
    cached[0].write_bytes(b"not an archive")
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        np.testing.assert_array_equal(values(), first)
    assert len(calls) == 3 and "computing the features again" in caplog.text
    for edit in ("zeros", "text"):  # a well-formed archive whose values were edited: caught by its digest or dtype
        stored = dict(np.load(cached[0]))
        stored["values"] = np.zeros_like(stored["values"]) if edit == "zeros" else stored["values"].astype("U10")
        np.savez(cached[0], **stored)
        caplog.clear()
        with caplog.at_level("WARNING", logger="dgl_graphtx"):
            np.testing.assert_array_equal(values(), first)
        assert ("changed after it was written" if edit == "zeros" else "not float64") in caplog.text
    assert len(calls) == 5
    before = sorted(tmp_path.iterdir())
    values(cache_dir=None)
    assert len(calls) == 6 and sorted(tmp_path.iterdir()) == before


def test_a_generator_named_twice_or_a_column_named_like_a_feature_is_one_short_line():
    with pytest.raises(ConfigError) as twice:
        ExtraFeatures(generators=("rdkit2d", "rdkit2d"))
    assert str(twice.value) == "feature generator rdkit2d is named more than once: give each generator once"
    with pytest.raises(ConfigError, match=r"extra feature names repeat: MolWt \(a feature column named like") as clash:
        ExtraFeatures(generators=("rdkit2d",), columns=("MolWt",))
    assert len(str(clash.value)) < 200  # was every one of the 218 names


def test_descriptors_rdkit_cannot_compute_are_reported_per_molecule_not_filled_silently(caplog):
    """The BCUT2D descriptors of salts and the partial charges of metal compounds are NaN in RDKit
    (10% of AqSolDB's draw): they are used as missing, and the input report and a warning say so
    for each such molecule, with as many values as RDKit's own CalcMolDescriptors leaves non-finite."""
    import logging
    import math

    from rdkit.Chem import Descriptors

    from dgl_graphtx.datasets.report import FEATURE_MASKED
    salts = ["[Na+].CNC([S-])=S", "O=[Cd]"]
    smiles = list(freesolv()["smiles"][:4]) + salts
    ds = MoleculeDataset(smiles, [[1.0]] * len(smiles), progress=False)
    with caplog.at_level(logging.WARNING, logger="dgl_graphtx"):
        add_extra_features(ds, ExtraFeatures(generators=("rdkit2d",)), smiles)
    issues = [(issue.row, issue.action, issue.reason) for issue in ds.report.issues]
    names = set(feature_names(["rdkit2d"]))
    expected = [sorted(k for k, v in Descriptors.CalcMolDescriptors(Chem.MolFromSmiles(s)).items()
                       if k in names and not math.isfinite(v)) for s in salts]
    assert [row for row, _, _ in issues] == [4, 5] and {action for _, action, _ in issues} == {FEATURE_MASKED}
    for (_, _, reason), missing in zip(issues, expected):
        assert missing and reason.startswith(f"{len(missing)} generated feature value(s) could not be computed (")
        shown = re.search(r"computed \((.*?)(?: and \d+ more)?\)", reason).group(1).split(", ")
        assert len(shown) == min(3, len(missing)) and set(shown) <= set(missing)
    assert "extra feature values of 2 molecule(s) used as missing" in caplog.text


def test_prediction_names_the_descriptors_rdkit_cannot_compute_in_the_rows_warning(frame, trained):
    """As at training time: a salt's 8 BCUT2D descriptors are NaN in RDKit; predict uses them as
    missing and says so in that row's warning, not in the others'."""
    _, path = trained
    table = Predictor(path).predict(["[Na+].CNC([S-])=S", frame["smiles"][0]], features=frame[["calc"]][:2])
    assert "8 generated feature value(s) could not be computed (BCUT2D_" in table.loc[0, "warning"]
    assert "could not be computed" not in str(table.loc[1, "warning"]) and table["expt_pred"].notna().all()
