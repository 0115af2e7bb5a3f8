"""Progress off a terminal (log lines, not carriage returns), --quiet/--verbose, train.log; and
embeddings (Predictor.embed, dgl-graphtx embed) checked against the model's own head and pooling."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem

from conftest_models import freesolv_rows, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import example_sdf_path
from dgl_graphtx.inference import Predictor
from dgl_graphtx.logs import LogProgress, log_to_file, progress
from dgl_graphtx.models import build_model
from dgl_graphtx.training import seed_everything
from cli_runner import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _cli_subprocess(*args, timeout=180):
    """The CLI in a child process whose stderr is a pipe (not a terminal), as under CI or nohup."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), DGLBACKEND="pytorch", OUTDATED_IGNORE="1", OMP_NUM_THREADS="1")
    code = "import sys; from dgl_graphtx.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_training_off_a_terminal_logs_one_line_per_epoch_and_writes_train_log(tmp_path):
    data = tmp_path / "d.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(data, index=False)
    common = ["--targets", "expt", "--model", "vanilla", "--epochs", "3", "--device", "cpu",
              "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]
    proc = _cli_subprocess("train", data, "--out", tmp_path / "run", "--no-cache", *common)  # featurizes, whatever ran before
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr
    epoch_lines = [line for line in proc.stderr.splitlines() if "training: " in line and " epoch" in line]
    assert [line.split("training: ")[1].split()[0] for line in epoch_lines] == ["1/3", "2/3", "3/3"]
    assert all("val_rmse" in line for line in epoch_lines)
    assert any("featurizing: 40/40 mol" in line for line in proc.stderr.splitlines())
    log = (tmp_path / "run" / "train.log").read_text()
    assert "training: 3/3 epoch" in log and "MoleculeDataset: kept 40 of 40 rows" in log and "best epoch" in log

    quiet = _cli_subprocess("train", data, "--out", tmp_path / "quiet", "--quiet", *common)
    assert quiet.returncode == 0, quiet.stderr
    assert "INFO" not in quiet.stderr and "training:" not in quiet.stderr
    assert "best epoch" in (tmp_path / "quiet" / "train.log").read_text()  # the file keeps the summaries
    assert "test (" in quiet.stdout


def test_log_progress_interval_and_postfix(caplog):
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        bar = LogProgress(range(4), "work", "item", interval=0)
        for i in bar:
            bar.set_postfix(loss=f"{i:.1f}")
        lines = [r.getMessage() for r in caplog.records]
    assert [line.split()[1] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert "loss 3.0" in lines[-1]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dgl_graphtx"):
        assert list(LogProgress(range(50), "fast", "item", interval=3600)) == list(range(50))
    assert [r.getMessage().split()[1] for r in caplog.records] == ["50/50"]  # only the final line
    assert isinstance(progress(range(2), "x", "y"), LogProgress)  # pytest's stderr is not a terminal


def test_log_to_file_is_not_duplicated_when_nested(tmp_path):
    path = tmp_path / "train.log"
    with log_to_file(path), log_to_file(path):
        logging.getLogger("dgl_graphtx").info("once")
    assert path.read_text().count("once") == 1


# --------------------------------------------------------------------------------------------
# embeddings
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=["grpe", "gradformer"])
def checkpoint(request, tmp_path_factory):
    seed_everything(0)
    preset = tiny_preset(request.param)
    model = build_model(preset.model)
    model.set_target_normalization(torch.tensor([2.0]), torch.tensor([3.0]))
    return save_checkpoint(tmp_path_factory.mktemp("emb") / "m.pt", model, CheckpointMeta(preset.featurizer, preset.relation, ["y"]))


def test_embeddings_are_what_the_head_reads(checkpoint):
    smiles = ["CCO", "C1CC", "c1ccccc1O", "CC(=O)[O-].[Na+]"]
    predictor = Predictor(checkpoint, device="cpu", batch_size=2)
    emb = predictor.embed(smiles, atoms=True)
    assert emb.table["error"].notna().tolist() == [False, True, False, False]
    assert np.isnan(emb.molecules[1]).all() and emb.atoms[1] is None
    model = predictor.model
    valid = [0, 2, 3]
    head_out = model.to_target_space(model.head(torch.from_numpy(emb.molecules[valid]))).detach().numpy()[:, 0]
    np.testing.assert_allclose(head_out, predictor.predict(smiles)["y_pred"].to_numpy()[valid], rtol=1e-5, atol=1e-5)
    for row, smi in zip(valid, ["CCO", "c1ccccc1O", "CC(=O)[O-].[Na+]"]):
        assert emb.atoms[row].shape == (Chem.MolFromSmiles(smi).GetNumAtoms(), model.config.hidden_dim)
        if model.config.readout == "mean":  # the molecule vector is the mean of its atom states
            np.testing.assert_allclose(emb.atoms[row].mean(0), emb.molecules[row], rtol=1e-5, atol=1e-6)
    # batching does not change the result
    np.testing.assert_allclose(Predictor(checkpoint, device="cpu", batch_size=1).embed(smiles).molecules,
                               emb.molecules, rtol=1e-5, atol=1e-6)




def test_embed_command_writes_csv_npy_and_atom_states(checkpoint, tmp_path):
    smiles = ["CCO", "C1CC", "c1ccccc1O"]
    expected = Predictor(checkpoint, device="cpu").embed(smiles, atoms=True)
    code, stdout, err = run_cli(["embed", *smiles, "--checkpoint", checkpoint, "--output", tmp_path / "e.csv",
                              "--atoms", tmp_path / "a.npz", "--device", "cpu"])
    assert code == 0, err
    assert "wrote 3 embeddings" in stdout and "(1 invalid)" in stdout
    assert "predicting" not in err  # off a terminal, no progress bar (as predict)
    frame = pd.read_csv(tmp_path / "e.csv")
    dim = expected.molecules.shape[1]
    assert list(frame.columns) == ["smiles", "canonical_smiles", "error"] + [f"e{k}" for k in range(dim)]
    np.testing.assert_allclose(frame[[f"e{k}" for k in range(dim)]].to_numpy(), expected.molecules, rtol=1e-5, atol=1e-6)
    atoms = np.load(tmp_path / "a.npz")
    assert sorted(atoms.files) == ["mol_0", "mol_2"]
    np.testing.assert_allclose(atoms["mol_2"], expected.atoms[2], rtol=1e-6)
    code, _, err = run_cli(["embed", "--input", example_sdf_path(), "--checkpoint", checkpoint, "--output",
                         tmp_path / "e.npy", "--device", "cpu", "--quiet"])
    assert code == 0, err
    assert np.load(tmp_path / "e.npy").shape == (8, dim)
    code, _, err = run_cli(["embed", "CCO", "--checkpoint", checkpoint, "--output", tmp_path / "e.txt"])
    assert code == 2 and "--output must end in one of" in err
