"""benchmarks/checks/training_steps.py must keep running on the CPU (its quick modes): the compute
paths side by side, the step modes, the speed of the presets on two molecule sizes, and the
operation counts, in which a training step reads nothing back from its device; and the batch
formats its speed measure feeds the authors' networks (``--authors-dir``)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from benchmarks.checks import training_steps
from benchmarks.checks.authors import grpe_batch, molecule_arrays, moire_batch
from dgl_graphtx.featurize import smiles_to_graphs
from benchmarks.common.molecules import zinc_like_smiles


def test_quick_cpu_run_times_paths_and_speed(tmp_path, capsys):
    assert training_steps.main(["--quick", "--measure", "paths", "speed", "--moses-dir", str(tmp_path / "no-wheel"),
                                "--csv", str(tmp_path / "out.csv")]) == 0
    speed = pd.read_csv(tmp_path / "out.csv")  # the last measure's rows
    assert [(r.model, r.molecules.split(",")[0]) for r in speed.itertuples()] == [
        ("grpe", "MolHIV-sized"), ("grpe", "QM9-sized"), ("gradformer", "MolHIV-sized"), ("gradformer", "QM9-sized")]
    assert (speed["batch"] == 4).all() and (speed["train"] > 0).all() and (speed["infer"] > 0).all() and speed["peak_mib"].isna().all()
    atoms = [float(m.split("(")[-1].split(" ")[0]) for m in speed["molecules"]]  # mean heavy atoms of each size class
    assert 24 <= atoms[0] <= 27 and 8 <= atoms[1] <= 9
    out = capsys.readouterr().out
    assert "joined from FreeSolv" in out  # the fallback source is said, not silent
    assert out.count("'tensors_graphs_s'") == 4 and out.count("'ratio'") == 4  # both paths of the four tiny models on the CPU


def test_step_modes_and_operation_counts_without_host_syncs():
    smiles = zinc_like_smiles(64, min_atoms=20, max_atoms=30)
    rows = training_steps.time_modes("grpe/tiny", ["eager", "no-sync", "captured"], torch.device("cpu"), smiles, batches=2, warmup=1,
                                     repeats=1)
    assert [r["mode"] for r in rows] == ["eager", "no-sync", "captured"] and rows[2]["note"] == "needs CUDA"
    assert all(r["graphs_s"] > 0 for r in rows[:2])
    counted = training_steps.count_ops("grpe/tiny", smiles, 32)
    assert counted["syncs"] == 0 and counted["trainer_syncs"] == 0
    assert counted["ops"] == counted["forward"] + counted["backward"] + counted["optimizer"] and counted["trainer_ops"] > 0
    assert counted["forward"] > 100 and counted["optimizer"] > 0


def test_the_authors_networks_are_skipped_with_a_line_without_their_checkouts(tmp_path, capsys):
    assert training_steps.main(["--quick", "--measure", "speed", "--presets", "grpe/tiny", "--authors-dir", str(tmp_path / "none"),
                                "--moses-dir", str(tmp_path / "no-wheel"), "--csv", str(tmp_path / "out.csv"), "--no-docs"]) == 0
    assert "skipped the authors' grpe network" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "out.csv")["model"].tolist() == ["grpe", "grpe"]  # ours on both sizes, no authors' row


def test_authors_batches_hold_the_molecules_features_and_distances():
    graph, _ = smiles_to_graphs("CCO")
    ethanol, water = molecule_arrays(graph), molecule_arrays(smiles_to_graphs("O")[0])
    assert ethanol.hops.tolist() == [[0, 1, 2], [1, 0, 1], [2, 1, 0]]
    grpe = grpe_batch([ethanol, water])
    assert grpe.mask.tolist() == [[False, False, False], [False, True, True]]
    assert grpe.distance[1].tolist() == [[0, -1, -1], [-1, -1, -1], [-1, -1, -1]]
    assert grpe.edge_attr[0, 0, 1] == 0 and grpe.edge_attr[0, 0, 2] == -1  # single bond class 0; no bond
    # one embedding table: feature j of an atom at row 1 + 512 j + value
    assert torch.equal(grpe.x[0, 0], 1 + 512 * torch.arange(9) + graph.ndata["feat"][0])
    moire = moire_batch([ethanol, water], "spd")
    assert moire.mask.tolist() == [[True, True, True], [True, False, False]]
    assert np.allclose(moire.adj[0].numpy(), ethanol.hops)
