"""Prediction limits: size budgets, out-of-memory
fallback, chunked streaming with progressive and resumable output, clear errors for bad calls."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem

from conftest_models import freesolv_rows, tiny_checkpoint, tiny_preset
from memory_pressure import broken, larger_than, out_of_memory_above
from cli_runner import assert_one_error_line, run_cli_without_runtime_warnings as run_cli

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import SizeLimits
from dgl_graphtx.inference import Predictor, predict_smiles
from dgl_graphtx.inference import predictor as predictor_module
from dgl_graphtx.insight import repeated_batch

NORMAL = list(freesolv_rows(0, 100)["smiles"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("pred"), "vanilla", seed=7, num_layers=1)


@pytest.fixture(scope="module")
def reference(checkpoint):
    """Predictions of the normal molecules alone, one at a time (batch of one)."""
    predictor = Predictor(checkpoint, device="cpu", batch_size=1)
    return predictor.predict(NORMAL)["y_pred"].to_numpy()


# --------------------------------------------------------------------------------------------
# one oversized molecule never costs the others their predictions
# --------------------------------------------------------------------------------------------
def test_oversized_molecule_gets_nan_and_a_reason_the_rest_are_predicted(checkpoint, reference):
    inputs = NORMAL[:50] + ["C" * 1200] + NORMAL[50:]
    table = Predictor(checkpoint, device="cpu").predict(inputs)
    assert len(table) == 101 and table["smiles"].tolist() == inputs
    assert np.isnan(table.loc[50, "y_pred"]) and "1200 atoms" in table.loc[50, "error"] and "max_atoms" in table.loc[50, "error"]
    rest = table.drop(index=50)
    assert rest["error"].isna().all()
    np.testing.assert_allclose(rest["y_pred"].to_numpy(), reference, rtol=0, atol=1e-5)


def test_relation_edge_budget(checkpoint):
    limits = SizeLimits(max_relation_edges=50)
    table = Predictor(checkpoint, device="cpu", limits=limits).predict(["CCO", "CCCCCCCCCC"])
    # CCO: 3 atoms + virtual node -> 16 edges; decane: 11 nodes -> 121 edges
    assert table["error"].isna().tolist() == [True, False]
    assert "121 edges" in table["error"][1] and "max_relation_edges" in table["error"][1]


def test_batches_cut_by_edge_budget_give_the_same_predictions(checkpoint, reference):
    table = Predictor(checkpoint, device="cpu", batch_size=1000, batch_edges=300).predict(NORMAL)
    np.testing.assert_allclose(table["y_pred"].to_numpy(), reference, rtol=0, atol=1e-5)


def test_batches_hold_molecules_of_like_size_and_the_table_keeps_the_input_order(checkpoint, reference, monkeypatch):
    held = []

    def recorded(graphs, relations, positions, copies=1, *args, **kwargs):
        held.append((list(positions), copies))
        return repeated_batch(graphs, relations, positions, copies, *args, **kwargs)

    monkeypatch.setattr(predictor_module, "repeated_batch", recorded)
    predictor = Predictor(checkpoint, device="cpu", batch_size=8)
    table = predictor.predict(NORMAL)
    np.testing.assert_allclose(table["y_pred"].to_numpy(), reference, rtol=0, atol=1e-5)
    atoms = [Chem.MolFromSmiles(s).GetNumAtoms() for s in NORMAL]
    sizes = [[atoms[p] for p in positions] for positions, _ in held]
    assert sorted(p for positions, _ in held for p in positions) == list(range(len(NORMAL)))
    assert all(max(a) <= min(b) for a, b in zip(sizes, sizes[1:]))  # each batch no larger than the next
    assert max(map(max, sizes)) > min(map(min, sizes)) and atoms != sorted(atoms)  # sizes differ, the input is unsorted
    held.clear()
    predictor.explain(NORMAL[:20], steps=4)  # an explanation's pass holds batch_size molecules, each once per step
    assert [len(p) for p, copies in held if copies == 4] == [8, 8, 4]


def test_out_of_memory_batch_is_split_and_only_the_culprit_fails(checkpoint, reference, monkeypatch):
    predictor = Predictor(checkpoint, device="cpu", batch_size=64)
    limit = 12  # "memory" enough for batches whose largest molecule has at most 12 atoms
    monkeypatch.setattr(predictor.model, "predict", out_of_memory_above(predictor.model.predict, limit))
    table = predictor.predict(NORMAL)
    culprits = larger_than(NORMAL, limit)
    assert table.loc[culprits, "error"].str.contains("out of memory").all()
    assert table.loc[~culprits, "error"].isna().all()
    np.testing.assert_allclose(table.loc[~culprits, "y_pred"].to_numpy(), reference[~culprits], rtol=0, atol=1e-5)


def test_other_runtime_errors_are_not_swallowed(checkpoint, monkeypatch):
    predictor = Predictor(checkpoint, device="cpu")
    monkeypatch.setattr(predictor.model, "predict", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        predictor.predict(["CCO"])


# --------------------------------------------------------------------------------------------
# section 3: chunked streaming, progressive and resumable output
# --------------------------------------------------------------------------------------------
def test_chunks_come_in_input_order_and_match_one_pass(checkpoint, reference):
    chunks = list(Predictor(checkpoint, device="cpu", chunk_size=30).predict_chunks(NORMAL + ["C1CC"]))
    assert [len(c) for c in chunks] == [30, 30, 30, 11]
    table = pd.concat(chunks, ignore_index=True)
    assert table["smiles"].tolist() == NORMAL + ["C1CC"]
    np.testing.assert_allclose(table["y_pred"].to_numpy()[:100], reference, rtol=0, atol=1e-5)
    assert table["error"].notna().tolist() == [False] * 100 + [True]


def test_generator_input_is_consumed_lazily(checkpoint):
    seen = []

    def molecules():
        for s in NORMAL[:10]:
            seen.append(s)
            yield s

    chunks = Predictor(checkpoint, device="cpu", chunk_size=4).predict_chunks(molecules())
    first = next(chunks)
    assert len(first) == 4 and len(seen) == 4


def test_interrupted_cli_prediction_keeps_its_rows_and_resumes(checkpoint, tmp_path, monkeypatch):
    inputs = tmp_path / "in.csv"
    pd.DataFrame({"smiles": NORMAL[:40] + ["not smiles"]}).to_csv(inputs, index=False)
    complete = tmp_path / "complete.csv"
    argv = ["predict", "--checkpoint", checkpoint, "--input", inputs, "--device", "cpu", "--chunk-size", "10"]
    assert run_cli([*argv, "--output", complete])[0] == 0
    real = Predictor._predict_chunk
    calls = {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(Predictor, "_predict_chunk", interrupted)
    output = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt):
        run_cli([*argv, "--output", output])
    partial = tmp_path / "out.csv.partial"
    assert not output.exists() and len(pd.read_csv(partial)) == 20  # two chunks kept, nothing lost
    monkeypatch.setattr(Predictor, "_predict_chunk", real)
    code, stdout, err = run_cli([*argv, "--output", output, "--resume"])
    assert code == 0, err
    assert "resumed after 20 rows" in stdout and not partial.exists()
    pd.testing.assert_frame_equal(pd.read_csv(output), pd.read_csv(complete))


def test_cli_size_budget_options(checkpoint):
    code, stdout, _ = run_cli(["predict", "--checkpoint", checkpoint, "--device", "cpu", "--max-atoms", "5", "CCO", "CCCCCCCC"])
    assert code == 0 and "8 atoms" in stdout
    assert_one_error_line(run_cli(["predict", "--checkpoint", checkpoint, "--max-atoms", "0", "CCO"]), "--max-atoms")


# --------------------------------------------------------------------------------------------
# wrong argument types are clear errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 5, 3.5, object()])
def test_predict_smiles_with_a_non_iterable_is_a_clear_error(checkpoint, bad):
    with pytest.raises(ConfigError, match="expected a SMILES string"):
        predict_smiles(bad, checkpoint, device="cpu")


def test_predictor_settings_are_validated(checkpoint):
    for kwargs in (dict(batch_size=0), dict(batch_edges=-1), dict(chunk_size=0), dict(limits={"max_atoms": 3})):
        with pytest.raises(ConfigError):
            Predictor(checkpoint, device="cpu", **kwargs)


# --------------------------------------------------------------------------------------------
# out-of-domain inputs are predicted with a warning, not silently
# --------------------------------------------------------------------------------------------
def test_out_of_domain_inputs_get_a_warning(checkpoint):
    mixture = ".".join(["CCO"] * 100)
    table = Predictor(checkpoint, device="cpu").predict(["CCO", "*C", "[He]", "[U]", mixture, "not smiles"])
    warnings = table["warning"].tolist()
    assert pd.isna(warnings[0]) and pd.isna(warnings[5])  # in domain; invalid (its error says why)
    assert "dummy atom" in warnings[1]
    assert "element He" in warnings[2] and "element U" in warnings[3]
    assert "100 fragments" in warnings[4]
    assert np.isfinite(table["y_pred"][:5]).all()  # still predicted


def test_training_domain_is_recorded_and_used(tmp_path):
    from dgl_graphtx.runs import train_and_evaluate
    from dgl_graphtx.datasets import MoleculeDataset
    from dgl_graphtx.training import TrainConfig

    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    frame = freesolv_rows(0, 30)
    ds = MoleculeDataset.from_dataframe(frame, target_cols=["expt"], featurizer=preset.featurizer, relation=preset.relation, progress=False)
    train_and_evaluate(ds, preset, TrainConfig(epochs=1, progress=False, device="cpu"), out_dir=tmp_path / "r")
    train_rows = [Chem.MolFromSmiles(s) for s in frame["smiles"]]
    largest = max(m.GetNumHeavyAtoms() for m in train_rows)
    table = Predictor(tmp_path / "r" / "best.pt", device="cpu").predict(["C" * (largest + 5), "CCO"])
    assert f"{largest + 5} heavy atoms, more than any training molecule ({largest})" in table["warning"][0]
    assert pd.isna(table["warning"][1])
