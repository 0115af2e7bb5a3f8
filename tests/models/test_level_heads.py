"""The atom and bond heads: the bond head against a hand-written reference, the sum constraint exact
in target units for every molecule of a batch (and off where no total is given), the settings' rules."""
from __future__ import annotations

import dataclasses
import math

import dgl
import pytest
import torch

from conftest_models import tiny_preset

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.featurize.molecule import ATOM_TOTALS
from dgl_graphtx.models import ModelConfig, build_model
from dgl_graphtx.models.levels import LevelHeads, LevelOptions, LevelOutputs

MOLECULES = ["CC(=O)[O-]", "c1ccccc1O", "C[N+](C)(C)C", "OCC"]


def _batch(smiles):
    graphs = [MoleculeFeaturizer()(s)[0] for s in smiles]
    return dgl.batch(graphs)


def test_constrained_atom_values_add_up_to_each_molecules_total():
    config = ModelConfig(hidden_dim=16, num_heads=2, num_tasks=0, levels=LevelOptions(atom_tasks=2, atom_sums=(1,)))
    torch.manual_seed(0)
    heads = LevelHeads(config)
    heads.set_normalization("atom", torch.tensor([0.5, -0.1]), torch.tensor([2.0, 0.3]))
    graph = _batch(MOLECULES)
    totals = torch.tensor([-1.0, 0.0, 1.0, math.nan])  # the last molecule gives none: unconstrained
    graph.ndata[ATOM_TOTALS] = torch.repeat_interleave(totals, graph.batch_num_nodes()).unsqueeze(1)
    atoms = torch.randn(graph.num_nodes(), 16)
    out, bonds = heads(graph, atoms)
    assert bonds is None
    free = heads.atoms(atoms)
    in_units = heads.to_target_space("atom", out)
    sums = torch.zeros(4).index_add_(0, torch.repeat_interleave(torch.arange(4), graph.batch_num_nodes()), in_units[:, 1].detach())
    assert torch.allclose(sums[:3], totals[:3], atol=1e-5)
    last = slice(int(graph.batch_num_nodes()[:3].sum()), None)
    assert torch.equal(out[last, 1], free[last, 1])  # no total, no shift
    assert torch.equal(out[:, 0], free[:, 0])  # the other target is never constrained
    without = dgl.batch([MoleculeFeaturizer()(s)[0] for s in MOLECULES])
    with pytest.raises(ConfigError, match="constrains atom sums"):
        heads(without, atoms)


def test_the_bond_head_reads_each_bonds_two_atoms_and_features():
    config = ModelConfig(hidden_dim=8, num_heads=2, num_tasks=0, levels=LevelOptions(bond_tasks=3))
    torch.manual_seed(1)
    heads = LevelHeads(config)
    graph = _batch(MOLECULES)
    atoms = torch.randn(graph.num_nodes(), 8)
    _, bonds = heads(graph, atoms)
    src, dst = graph.edges()
    rows = []
    for edge in range(0, graph.num_edges(), 2):
        u, v = int(src[edge]), int(dst[edge])
        assert (int(src[edge + 1]), int(dst[edge + 1])) == (v, u)  # bond i: edges 2i and 2i+1
        feature = heads.bond_features(graph.edata["feat"][edge:edge + 1])[0]
        rows.append(heads.bonds(torch.cat([atoms[u] + atoms[v], atoms[u] * atoms[v], feature])))
    assert torch.allclose(bonds, torch.stack(rows), atol=1e-6)
    assert bonds.shape == (graph.num_edges() // 2, 3)


def test_a_model_with_levels_gives_them_beside_its_molecule_outputs():
    preset = tiny_preset("gradformer")
    model = build_model(dataclasses.replace(preset.model, levels=LevelOptions(atom_tasks=1, bond_tasks=2))).eval()
    pairs = [MoleculeFeaturizer(preset.featurizer, preset.relation)(s) for s in MOLECULES]
    graph, relation = dgl.batch([g for g, _ in pairs]), dgl.batch([r for _, r in pairs])
    out = model(graph, relation, levels=True)
    assert isinstance(out, LevelOutputs)
    assert torch.equal(out.molecules, model(graph, relation))
    assert out.atoms.shape == (graph.num_nodes(), 1) and out.bonds.shape == (graph.num_edges() // 2, 2)


def test_molecule_targets_may_be_absent_only_with_atom_or_bond_targets():
    assert ModelConfig(num_tasks=0, levels=LevelOptions(atom_tasks=1)).prediction_width == 0
    with pytest.raises(ConfigError, match="num_tasks must be an integer in"):
        ModelConfig(num_tasks=0)


@pytest.mark.parametrize("settings, message", [
    (dict(task="classification"), "regression targets of a model without an uncertainty head"),
    (dict(uncertainty_head="mve"), "regression targets of a model without an uncertainty head"),
])
def test_levels_are_regression_without_uncertainty(settings, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(levels=LevelOptions(atom_tasks=1), **settings)


@pytest.mark.parametrize("options, message", [
    (dict(atom_tasks=-1), "levels.atom_tasks must be an integer"),
    (dict(atom_tasks=1, atom_sums=(0, 0)), "distinct atom targets"),
    (dict(bond_tasks=1, atom_sums=(0,)), "distinct atom targets among the 0"),
])
def test_level_options_are_checked(options, message):
    with pytest.raises(ConfigError, match=message):
        LevelOptions(**options)
