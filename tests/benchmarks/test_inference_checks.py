"""The checks behind docs/insight.md's explanation figures and docs/export.md's export figures keep
running (their quick modes), and the Crippen truth they score against is RDKit's logP split by atom;
the prediction check streams ``dgl-graphtx predict`` with flat memory."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rdkit import Chem
from rdkit.Chem import Crippen

from benchmarks.checks import explain_faithfulness, inference_speed, predict_memory
from benchmarks.common.attribution import crippen_atom_logp, per_molecule_spearman


@pytest.mark.parametrize("smiles", ["CCO", "c1ccccc1O", "CC(=O)Oc1ccccc1C(=O)O", "C[NH3+]", "ClC(Cl)Cl", "[Na+].[Cl-]"])
def test_the_crippen_truth_splits_rdkits_logp_over_the_heavy_atoms(smiles):
    truth = crippen_atom_logp(smiles)
    mol = Chem.MolFromSmiles(smiles)
    assert len(truth) == mol.GetNumAtoms() and truth.sum() == pytest.approx(Crippen.MolLogP(mol), abs=1e-9)


def test_per_molecule_spearman_is_undefined_for_constant_values_and_exact_for_monotone_ones():
    rho = per_molecule_spearman([[1.0, 2.0, 3.0], [1.0, 1.0], None, [3.0, 1.0, 2.0]], [[10, 20, 30], [1, 2], [1, 2], [1, 2, 3]])
    assert rho[0] == 1.0 and np.isnan(rho[1]) and np.isnan(rho[2]) and rho[3] == pytest.approx(-0.5)


def test_the_inference_speed_check_runs_quickly(tmp_path):
    assert inference_speed.main(["--quick", "--csv", str(tmp_path / "speed.csv")]) == 0
    table = pd.read_csv(tmp_path / "speed.csv").set_index("file")  # the export part, written last
    pt2 = table.loc["model.pt2 (torch.export)"]  # an untrained model: large outputs, float32 rounding of them
    assert pt2["max_diff"] < 1e-5 * max(1.0, pt2["scale"]) and table["size_mb"].min() > 0
    assert inference_speed.main(["--quick", "--parts", "explain", "--csv", str(tmp_path / "speed.csv")]) == 0
    table = pd.read_csv(tmp_path / "speed.csv")
    assert {"predict", "explain, 4 steps", "explain from SMILES (4 steps)"} <= set(table["what"]) and (table["per_s"] > 0).all()


def test_the_prediction_check_streams_the_command_line(tmp_path):
    assert predict_memory.main(["--quick", "--in-memory", "--workers", "1", "2", "--csv", str(tmp_path / "p.csv")]) == 0
    table = pd.read_csv(tmp_path / "p.csv")
    assert table[["smiles", "mode", "chunk", "workers"]].values.tolist() == [
        [300, "streaming", 128, 1], [300, "streaming", 128, 2], [300, "all in memory", 300, 1], [900, "streaming", 128, 1],
        [900, "streaming", 128, 2]]
    assert (table["code"] == 0).all() and (table["first_mib"] <= table["peak_mib"] + 1).all()  # RSS after a chunk within the peak


def test_the_prediction_check_times_given_checkpoints_named_by_their_folders(tmp_path):
    from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
    from dgl_graphtx.models import build_model, get_preset
    preset = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
    checkpoint = save_checkpoint(tmp_path / "my-model" / "best.pt", build_model(preset.model),
                                 CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
    assert predict_memory.main(["--quick", "--checkpoints", str(checkpoint), "--csv", str(tmp_path / "p.csv")]) == 0
    table = pd.read_csv(tmp_path / "p.csv")
    assert table[["smiles", "preset", "code"]].values.tolist() == [[300, "my-model", 0], [900, "my-model", 0]]


def test_the_faithfulness_check_runs_quickly(tmp_path):
    assert explain_faithfulness.main(["--quick", "--out", str(tmp_path), "--csv", str(tmp_path / "f.csv")]) == 0
    table = pd.read_csv(tmp_path / "f.csv")
    assert table["method"].str.startswith("integrated gradients").any() and table["molecules"].min() > 50
