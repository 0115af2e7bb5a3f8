"""benchmarks/checks/gpu_speed.py must keep running: its CPU smoke path (our networks only, a couple of
steps on tiny batches) and the batch formats it feeds the authors' networks."""
from __future__ import annotations

import math

import numpy as np
import torch

from dgl_graphtx.featurize import smiles_to_graphs

from benchmarks.checks import gpu_speed
from benchmarks.checks.authors import grpe_batch, molecule_arrays, moire_batch


def test_quick_cpu_run_times_our_networks_and_an_epoch(tmp_path, capsys):
    rows = gpu_speed.main(["--device", "cpu", "--quick", "--no-authors", "--configs", "grpe-tiny", "gradformer-molhiv",
                           "--moses-dir", str(tmp_path / "no-wheel"), "--epoch", "--csv", str(tmp_path / "out.csv")])
    table, epoch = rows[:-1], rows[-1]
    assert [(r["model"], r["molecules"].split(" ")[0]) for r in table] == [
        ("grpe", "MolHIV-sized"), ("grpe", "QM9-sized"), ("gradformer", "MolHIV-sized"), ("gradformer", "QM9-sized")]
    for row in table:
        assert row["batch"] == 4 and row["train"] > 0 and row["infer"] > 0 and math.isnan(row["peak_mib"])
    # mean heavy atoms of each size class lie in its range
    atoms = [float(r["molecules"].split(", ")[-1].split(" ")[0]) for r in table]
    assert 24 <= atoms[0] <= 27 and 8 <= atoms[1] <= 9
    assert epoch["molecules"].startswith("16 MolHIV-sized") and epoch["epoch_s"] > 0
    assert (tmp_path / "out.csv").read_text().count("\n") == 5
    assert "joined from FreeSolv" in capsys.readouterr().out  # the fallback source is said, not silent


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
