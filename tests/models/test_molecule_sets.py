"""Models of several molecules per row: each molecule taken out of the row's graph is the molecule
featurized alone, on both carriers; the forward pass equals encoding every molecule alone with its
backbone (shared or separate) and joining the pooled encodings by hand; the rules of the section."""
from __future__ import annotations

import dataclasses

import dgl
import pytest
import torch
from rdkit import Chem

from conftest_models import tiny_preset

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MoleculeFeaturizer
from dgl_graphtx.featurize.components import MIXTURE_WEIGHTS
from dgl_graphtx.models import ModelConfig, build_model
from dgl_graphtx.models.molecule_sets import MoleculeSetOptions, molecule_part
from dgl_graphtx.nn.graph_tensors import GraphTensors
from dgl_graphtx.relation_graph import RelationConfig

ROWS = [("CCO", "O"), ("c1ccccc1O", "CC(=O)C"), ("N", "ClC(Cl)Cl"), ("CC(=O)[O-].[Na+]", "CCCCO")]


def _batch(featurizer, rows):
    pairs = [featurizer(row) for row in rows]
    return dgl.batch([g for g, _ in pairs]), dgl.batch([r for _, r in pairs])


@pytest.mark.parametrize("carrier", ["dgl", "tensors"])
def test_each_molecule_taken_out_of_the_rows_is_the_molecule_featurized_alone(carrier):
    featurizer = MoleculeFeaturizer(relation=RelationConfig(virtual_node=True))
    graph, relation = _batch(featurizer, ROWS)
    if carrier == "tensors":
        graph, relation = GraphTensors.from_graph(graph), GraphTensors.from_graph(relation, blocks=True)
    for k in range(2):
        part = molecule_part(graph, relation, k, 2)
        alone_graph, alone_relation = _batch(featurizer, [row[k] for row in ROWS])
        for got, want in ((part.graph, alone_graph), (part.relation_graph, alone_relation)):
            assert got.batch_num_nodes().tolist() == want.batch_num_nodes().tolist()
            assert [t.tolist() for t in got.edges()] == [t.tolist() for t in want.edges()]
            for key, value in want.ndata.items():
                assert torch.equal(got.ndata[key], value), key
            for key, value in want.edata.items():
                assert torch.equal(got.edata[key], value), key
        assert int(part.relation_edges.sum()) == alone_relation.num_edges()


def _pooled_alone(encoder, featurizer, smiles):
    graph, relation = featurizer(smiles)
    atoms, virtual, _ = encoder.encode(graph, relation)
    return encoder.pool(graph, atoms, virtual)


@pytest.mark.parametrize("variant", ["gradformer", "grpe"])
@pytest.mark.parametrize("backbones", ["shared", "separate"])
def test_a_row_is_its_molecules_encoded_alone_then_joined(variant, backbones):
    """The reference encodes each molecule alone (molecule 2 with the second backbone when they are
    separate) and concatenates the pooled encodings before the head; both carriers agree with it."""
    preset = tiny_preset(variant)
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=2, backbones=backbones))).eval()
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    graph, relation = _batch(featurizer, ROWS)
    with torch.no_grad():
        expected = torch.cat([model.head(torch.cat([_pooled_alone(model if k == 0 or backbones == "shared" else model.molecule_encoders[0],
                                                                  featurizer, smiles) for k, smiles in enumerate(row)], dim=1))
                              for row in ROWS])
        assert torch.allclose(model(graph, relation), expected, atol=1e-5)
        tensors = model(GraphTensors.from_graph(graph), GraphTensors.from_graph(relation, blocks=True))
        assert torch.allclose(tensors, expected, atol=1e-5)
    assert len(model.molecule_encoders) == (1 if backbones == "separate" else 0)


def test_concatenation_keeps_the_order_and_the_sum_ignores_it():
    preset = tiny_preset("gradformer")
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    swapped = [(b, a) for a, b in ROWS]
    for combine, same in (("concat", False), ("sum", True)):
        torch.manual_seed(1)
        model = build_model(dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=2, combine=combine))).eval()
        with torch.no_grad():
            first, second = model(*_batch(featurizer, ROWS)), model(*_batch(featurizer, swapped))
        assert torch.allclose(first, second, atol=1e-5) == same, combine


def test_mixture_weights_weigh_each_molecules_encoding():
    preset = tiny_preset("gradformer")
    options = MoleculeSetOptions(count=2, combine="sum", weighted=True)
    torch.manual_seed(2)
    model = build_model(dataclasses.replace(preset.model, molecules=options)).eval()
    featurizer = MoleculeFeaturizer(preset.featurizer, preset.relation)
    graph, relation = _batch(featurizer, ROWS)
    weights = torch.tensor([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5], [0.1, 3.0]])
    graph.ndata[MIXTURE_WEIGHTS] = torch.repeat_interleave(weights, graph.batch_num_nodes(), dim=0)
    with torch.no_grad():
        expected = torch.cat([model.head(sum(w * _pooled_alone(model, featurizer, smiles) for w, smiles in zip(row_weights, row)))
                              for row_weights, row in zip(weights.tolist(), ROWS)])
        assert torch.allclose(model(graph, relation), expected, atol=1e-5)
    del graph.ndata[MIXTURE_WEIGHTS]
    with pytest.raises(ConfigError, match="mixture weights"):
        model(graph, relation)


def test_every_parameter_of_separate_backbones_learns():
    """No parameter is left without a gradient (distributed training would stop on one)."""
    preset = tiny_preset("gradformer")
    model = build_model(dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=3, backbones="separate")))
    graph, relation = _batch(MoleculeFeaturizer(preset.featurizer, preset.relation), [("CCO", "O", "CC"), ("N", "CO", "C=C")])
    model(graph, relation).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    assert "head.weight" not in dict(model.molecule_encoders[0].named_parameters())


def test_a_single_molecule_given_to_a_model_of_rows_is_one_clear_error():
    preset = tiny_preset("gradformer")
    model = build_model(dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=2))).eval()
    graph, relation = MoleculeFeaturizer(preset.featurizer, preset.relation)("CCO")
    with pytest.raises(ConfigError, match="rows of 2 molecules"):
        model(graph, relation)
    graph, relation = _batch(MoleculeFeaturizer(preset.featurizer, preset.relation), [("CCO", "O", "C")])
    with pytest.raises(ConfigError, match="holds 3 molecules; this model reads rows of 2"):
        model(graph, relation)  # never the first two alone, the third left out
    assert model(*_batch(MoleculeFeaturizer(preset.featurizer, preset.relation), [("CCO", "O")])).shape == (1, 1)


@pytest.mark.parametrize("settings, message", [
    (dict(atom_reference=True), "no atom_reference"),
    (dict(readout="atomwise"), "no atom_reference and no atomwise"),
])
def test_settings_of_rows_are_checked(settings, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig(molecules=MoleculeSetOptions(count=2), **settings)


@pytest.mark.parametrize("options, message", [
    (dict(count=0), "molecules.count must be an integer"),
    (dict(count=2, backbones="each"), "molecules.backbones must be one of"),
    (dict(count=2, combine="mean"), "molecules.combine must be one of"),
])
def test_molecule_set_options_are_checked(options, message):
    with pytest.raises(ConfigError, match=message):
        MoleculeSetOptions(**options)


def test_old_model_configs_read_one_molecule_and_no_levels():
    stored = ModelConfig(num_layers=1, hidden_dim=16, num_heads=2).to_dict()
    del stored["molecules"], stored["levels"]  # a checkpoint written before the sections
    config = ModelConfig.from_dict(stored)
    assert config.molecules == MoleculeSetOptions() and not config.levels.any
    assert ModelConfig.from_dict(ModelConfig(molecules=MoleculeSetOptions(count=3, combine="sum")).to_dict()).molecules.count == 3


def test_a_fingerprint_kernel_blends_a_rows_output_read_from_all_its_molecules():
    from dgl_graphtx.datasets import ExtraFeatures, MoleculeDataset, add_extra_features, collate_molecules
    from dgl_graphtx.featurize.descriptors import kernel_fingerprints
    from dgl_graphtx.models.kernel import FingerprintKernel, fit_fingerprint_kernel

    spec = "morgan_counts:radius=2:size=2048"
    rows = [(a, b) for a in ["CCO", "c1ccccc1O", "CC(=O)C", "N", "CCCl", "OCCO"] for b in ["O", "CCCCO"]]
    preset = tiny_preset("gradformer")
    data = MoleculeDataset(rows, [[float(i)] for i in range(len(rows))], featurizer=preset.featurizer, relation=preset.relation,
                           progress=False)
    add_extra_features(data, ExtraFeatures(kernel=spec), rows)
    torch.manual_seed(4)
    model = build_model(dataclasses.replace(preset.model, molecules=MoleculeSetOptions(count=2))).eval()
    batch = collate_molecules([data[i] for i in range(len(rows))])
    plain = model.predict(batch.graph, batch.relation_graph)
    whole = torch.from_numpy(kernel_fingerprints(spec, [Chem.MolToSmiles(Chem.MolFromSmiles(".".join(r))) for r in rows]))
    labels = data.raw_labels
    fit = fit_fingerprint_kernel(whole[:8], labels[:8], whole[8:], labels[8:], torch.zeros(4, 1), weights=(0.5,))
    model.attach_kernel(FingerprintKernel.from_fit(fit))
    expected = 0.5 * plain + 0.5 * FingerprintKernel.from_fit(fit).predictions(whole)
    assert torch.allclose(model.predict(batch.graph, batch.relation_graph), expected, atol=1e-5)
