"""Explanations of predictions (``Predictor.explain``, ``predict --explain``, ``plot explain``) on
real molecules: the columns and the long table, completeness against the model's own outputs, the
same molecule written another way, hydrogens, classification, faithfulness to Crippen logP's known
atom contributions, and the one-line errors."""
from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem

from cli_runner import assert_one_error_line, run_cli
from conftest_models import freesolv_rows, seeded_model, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.datasets.splits import Split
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs import train_and_evaluate
from dgl_graphtx.training import TrainConfig, seed_everything

from benchmarks.common.attribution import crippen_atom_logp, per_molecule_spearman, random_explanations
from benchmarks.common.molecules import zinc_like_smiles

MOLECULES = list(freesolv_rows(0, 40)["smiles"])


def _checkpoint(path, variant="gradformer", targets=("y", "z"), hydrogens=False, **overrides):
    preset = tiny_preset(variant, num_tasks=len(targets), **overrides)
    preset = dataclasses.replace(preset, featurizer=dataclasses.replace(preset.featurizer, explicit_hydrogens=hydrogens))
    model = seeded_model(preset)
    model.set_target_normalization(torch.tensor([1.5, -2.0][:len(targets)]), torch.tensor([2.0, 0.5][:len(targets)]))
    return save_checkpoint(path, model, CheckpointMeta(preset.featurizer, preset.relation, list(targets)))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return _checkpoint(tmp_path_factory.mktemp("explain") / "m.pt")


def _contributions(table, target):
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else np.asarray(v, float) for v in table[f"{target}_contributions"]]


def _assert_complete(contributions, differences):
    """The contributions sum to the prediction minus the baseline, up to the integral's error (1% of
    the largest difference with 32 steps on these untrained ReLU models)."""
    sums, differences = np.array([v.sum() for v in contributions]), np.asarray(differences, float)
    assert np.abs(differences).max() > 0.01
    np.testing.assert_allclose(sums, differences, rtol=0, atol=0.01 * np.abs(differences).max())


def test_explain_adds_per_atom_contributions_that_complete_each_prediction(checkpoint):
    found = Predictor(checkpoint).explain(MOLECULES + ["C1CC"], target="z", steps=32)
    table = found.table
    assert table.columns.tolist()[-4:] == ["z_baseline", "z_contributions", "error", "warning"]
    contributions = _contributions(table, "z")
    assert contributions[-1] is None and np.isnan(table["z_baseline"].iloc[-1]) and table["error"].iloc[-1]
    assert [len(v) for v in contributions[:-1]] == [Chem.MolFromSmiles(s).GetNumAtoms() for s in MOLECULES]
    _assert_complete(contributions[:-1], table["z_pred"][:-1] - table["z_baseline"][:-1])
    atoms = found.atoms
    assert atoms.columns.tolist() == ["row", "smiles", "atom", "element", "contribution"]
    first = atoms[atoms["row"] == 0]
    assert first["element"].tolist() == [a.GetSymbol() for a in Chem.MolFromSmiles(MOLECULES[0]).GetAtoms()]
    np.testing.assert_allclose(first["contribution"], contributions[0])
    assert set(atoms["row"]) == set(range(len(MOLECULES)))


def test_a_series_keeps_its_index_in_the_table_and_the_atoms_rows(checkpoint):
    """A Series left by a filter: the table keeps its index and each atom's ``row`` is its
    molecule's label there, as with predict (round fifteen, row 3)."""
    given = pd.Series(MOLECULES[:3], index=[30, 10, 20])
    predictor = Predictor(checkpoint)
    found, plain = predictor.explain(given, target="z", steps=8), predictor.explain(list(given), target="z", steps=8)
    assert found.table.index.tolist() == [30, 10, 20] and plain.table.index.tolist() == [0, 1, 2]
    assert found.atoms["row"].tolist() == [[30, 10, 20][r] for r in plain.atoms["row"]]
    for label, atoms in found.atoms.groupby("row"):
        assert atoms["smiles"].iloc[0] == found.table.loc[label, "smiles"]
        np.testing.assert_allclose(atoms["contribution"], found.table.loc[label, "z_contributions"])


def test_no_molecule_gives_the_columns_of_explanations_and_no_row(checkpoint, tmp_path):
    found = Predictor(checkpoint).explain([], target="z")  # was a KeyError
    assert found.table.columns.tolist() == Predictor(checkpoint).explain(["CO"], target="z").table.columns.tolist()
    assert len(found.table) == 0 and found.atoms.columns.tolist() == ["row", "smiles", "atom", "element", "contribution"]
    empty = tmp_path / "empty.csv"
    empty.write_text("smiles\n")
    assert run_cli(["predict", "--checkpoint", checkpoint, "--input", empty, "--explain", "--explain-target", "z",
                    "--output", tmp_path / "x.csv"])[0] == 0
    assert (tmp_path / "x.csv").read_text().split() == [",".join(found.table.columns)]
    mc = Predictor(checkpoint, uncertainty="mc_dropout")
    assert mc.predict([]).columns.tolist() == mc.predict(["CO"]).columns.tolist()  # the std columns too


def test_explaining_a_target_the_kernel_predicts_alone_says_so(caplog):
    from dgl_graphtx.inference.explain import ExplainSettings, explained_output
    from dgl_graphtx.models.kernel import FingerprintKernel
    model = seeded_model(tiny_preset("gradformer", num_tasks=2), seed=0)
    kernel = FingerprintKernel(references=3, size=8, tasks=2)
    kernel.weight.copy_(torch.tensor([0.4, 0.0]))  # the network's blend weight per target
    model.attach_kernel(kernel)
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        explained_output(model, ["y", "z"], ExplainSettings(target="y"))
        assert not caplog.records
        explained_output(model, ["y", "z"], ExplainSettings(target="z"))
    assert len(caplog.records) == 1 and "makes this model's whole prediction of 'z'" in caplog.records[0].getMessage()
    assert "--kernel none" in caplog.records[0].getMessage()


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_mc_dropout_on_a_target_the_kernel_predicts_alone_says_so(tmp_path, caplog, task):
    """The fix it names is one the task allows: the mve head is refused for classification."""
    from dgl_graphtx.models.kernel import FingerprintKernel
    preset = tiny_preset("gradformer", num_tasks=2, task=task)
    model = seeded_model(preset, seed=0)
    kernel = FingerprintKernel(references=3, size=8, tasks=2)
    kernel.weight.copy_(torch.tensor([0.4, 0.0]))
    model.attach_kernel(kernel)
    path = save_checkpoint(tmp_path / "k.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y", "z"]))
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        Predictor(path)
        assert not caplog.records
        Predictor(path, uncertainty="mc_dropout")
    assert len(caplog.records) == 1
    assert "whole prediction of z (the network's blend weight is 0): MC dropout gives them std 0" in caplog.records[0].getMessage()
    assert ("--uncertainty mve" in caplog.records[0].getMessage()) == (task == "regression")


def test_predictions_with_explanations_equal_those_without(checkpoint):
    plain = Predictor(checkpoint).predict(MOLECULES)
    explained = Predictor(checkpoint).explain(MOLECULES).table
    pd.testing.assert_frame_equal(explained[plain.columns], plain)


def test_the_same_molecule_written_another_way_gets_the_same_contributions_on_the_same_atoms(checkpoint):
    written = ["CC(=O)Oc1ccccc1C(=O)O", "OC(=O)c1ccccc1OC(C)=O"]
    table = Predictor(checkpoint).explain(written).table
    first, second = _contributions(table, "y")
    match = Chem.MolFromSmiles(written[1]).GetSubstructMatch(Chem.MolFromSmiles(written[0]))  # atom i of the first is match[i]
    assert len(match) == 13
    np.testing.assert_allclose(first, second[list(match)], atol=1e-5)


def test_explicit_hydrogens_are_folded_into_their_atoms(tmp_path):
    path = _checkpoint(tmp_path / "h.pt", hydrogens=True)
    table = Predictor(path).explain(["CCO", "c1ccccc1N"], steps=96).table
    contributions = _contributions(table, "y")
    assert [len(v) for v in contributions] == [3, 7]  # heavy atoms only
    _assert_complete(contributions, table["y_pred"] - table["y_baseline"])


def test_a_classifier_is_explained_in_logits(tmp_path):
    path = _checkpoint(tmp_path / "c.pt", targets=("active",), task="classification")
    table = Predictor(path).explain(MOLECULES[:10], steps=32).table
    logits = np.log(table["active_pred"] / (1 - table["active_pred"]))
    _assert_complete(_contributions(table, "active"), logits - table["active_baseline"])


def test_predict_explain_writes_the_columns_and_plot_explain_draws_them(checkpoint, tmp_path):
    source = tmp_path / "in.csv"
    pd.DataFrame({"smiles": MOLECULES[:8] + ["C1CC"]}).to_csv(source, index=False)
    out = tmp_path / "out.csv"
    code, stdout, err = run_cli(["predict", "--checkpoint", checkpoint, "--input", source, "--output", out, "--explain",
                                 "--explain-target", "z", "--explain-steps", "16"])
    assert code == 0, err
    written = pd.read_csv(out)
    lists = [ast.literal_eval(v) for v in written["z_contributions"].iloc[:8]]
    assert [len(v) for v in lists] == [Chem.MolFromSmiles(s).GetNumAtoms() for s in MOLECULES[:8]]
    assert written["z_contributions"].isna().tolist()[-1] and "y_contributions" not in written.columns
    api = Predictor(checkpoint).explain(MOLECULES[:8], target="z", steps=16).table
    np.testing.assert_allclose(np.concatenate(lists), np.concatenate(_contributions(api, "z")), rtol=1e-6)

    figure = tmp_path / "aspirin.png"
    code, stdout, err = run_cli(["plot", "explain", "--checkpoint", checkpoint, "--smiles", "CC(=O)Oc1ccccc1C(=O)O",
                                 "--target", "z", "--out", figure])
    assert code == 0, err
    assert figure.read_bytes()[:4] == b"\x89PNG" and "largest contributions:" in stdout
    atoms = pd.read_csv(tmp_path / "aspirin_atoms.csv")
    assert atoms.columns.tolist() == ["atom", "element", "contribution"] and len(atoms) == 13
    assert f"contributions {atoms['contribution'].sum():.4f}" in stdout


@pytest.mark.parametrize("argv, fragments", [
    (["--explain", "--explain-target", "logP"], ["cannot explain target 'logP'", "['y', 'z']"]),
    (["--explain-steps", "8"], ["--explain-steps", "add --explain"]),
    (["--explain", "--explain-steps", "1"], ["--explain-steps"]),
])
def test_predict_explain_refuses_bad_settings_in_one_line(checkpoint, argv, fragments):
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "CCO", *argv]), *fragments)


def test_an_ensemble_a_multiclass_model_and_a_bad_molecule_are_refused_in_one_line(checkpoint, tmp_path):
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--checkpoint", checkpoint, "CCO", "--explain"]),
                          "--explain explains one model", "2 checkpoints")
    multiclass = _checkpoint(tmp_path / "k.pt", targets=("kind",), task="multiclass", num_classes=3)
    assert_one_error_line(run_cli(["predict", "--checkpoint", multiclass, "CCO", "--explain"]), "multiclass")
    assert_one_error_line(run_cli(["plot", "explain", "--checkpoint", checkpoint, "--smiles", "C1CC", "--out", tmp_path / "x.png"]),
                          "cannot explain 'C1CC'", "SMILES")
    assert_one_error_line(run_cli(["plot", "explain", "--checkpoint", checkpoint, "--out", tmp_path / "x.png"]), "--smiles")


def test_explanations_of_crippen_logp_rank_atoms_like_the_true_contributions(tmp_path):
    """Faithfulness at small scale: a small Gradformer trained on Crippen logP of 800 drug-sized
    molecules; per held-out molecule, the rank correlation of the explanation with the known atom
    contributions. The bound is loose (benchmarks/checks/explain_faithfulness.py measures the real figure),
    and a random explanation fails it."""
    smiles = zinc_like_smiles(800, seed=0, min_atoms=10, max_atoms=16)
    truth = [crippen_atom_logp(s) for s in smiles]
    seed_everything(0)
    preset = tiny_preset("gradformer", hidden_dim=32)
    data = MoleculeDataset(smiles, [[t.sum()] for t in truth], target_names=["logP"], featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    split = Split(list(range(560)), list(range(560, 640)), list(range(640, 800)))
    config = TrainConfig(epochs=20, batch_size=32, lr=2e-3, warmup_epochs=0, patience=20, seed=0, progress=False)
    result = train_and_evaluate(data, preset, config, split=split, out_dir=tmp_path / "run")
    assert result.test_metrics["r2"] > 0.9  # the model learned logP
    held_out = [smiles[i] for i in split.test]
    held_truth = [truth[i] for i in split.test]
    explained = Predictor(tmp_path / "run").explain(held_out).table["logP_contributions"]
    ours = np.nanmean(per_molecule_spearman(explained, held_truth))
    chance = np.nanmean(per_molecule_spearman(random_explanations(held_truth), held_truth))
    assert ours > 0.1 > chance, (ours, chance)


def test_an_explained_output_resumes_only_with_the_same_explanation(checkpoint, tmp_path, monkeypatch):
    source = tmp_path / "in.csv"
    pd.DataFrame({"smiles": MOLECULES[:30]}).to_csv(source, index=False)
    argv = ["predict", "--checkpoint", checkpoint, "--input", source, "--chunk-size", "10", "--explain"]
    complete = tmp_path / "complete.csv"
    assert run_cli([*argv, "--output", complete])[0] == 0
    real, calls = Predictor._predict_chunk, {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return real(self, *args)

    out = tmp_path / "out.csv"
    with monkeypatch.context() as patch:
        patch.setattr(Predictor, "_predict_chunk", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_cli([*argv, "--output", out])
    assert_one_error_line(run_cli([*argv[:-1], "--output", out, "--resume"]), "explain")  # without --explain: other rows
    assert_one_error_line(run_cli([*argv, "--explain-steps", "8", "--output", out, "--resume"]), "explain")
    assert run_cli([*argv, "--output", out, "--resume"])[0] == 0
    assert out.read_text() == complete.read_text()


def test_an_old_checkpoint_is_explained_and_predicts_as_recorded():
    saved = Path(__file__).resolve().parents[1] / "data" / "saved_before_registry"
    recorded = json.loads((saved / "predictions.json").read_text())
    table = Predictor(saved / "gradformer.pt", device="cpu").explain(recorded["smiles"], steps=32).table
    np.testing.assert_allclose(table["y_pred"], recorded["predictions"]["gradformer"], rtol=1e-5, atol=1e-6)
    _assert_complete(_contributions(table, "y"), table["y_pred"] - table["y_baseline"])
