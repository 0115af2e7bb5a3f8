"""Masked-atom pretraining: the mask vector replaces exactly the drawn atoms' embedded input, the
element loss is the cross-entropy against RDKit's atomic numbers, the ``atoms`` objective trains
the backbone on that loss alone, and a run resumes to the same weights and leaves a backbone that
fine-tuning and prediction load without the pretext parts."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from rdkit import Chem

from cli_runner import run_cli
from pretraining_helpers import assert_same_backbone, interrupted_at_epoch
from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.datasets import freesolv
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.inference import Predictor, get_pretrained
from dgl_graphtx.inference.backbones import describe
from dgl_graphtx.models import build_model, get_preset
from dgl_graphtx.runs import PretrainConfig, pretrain
from dgl_graphtx.runs.fine_tuning import load_backbone, pretrained_preset
from dgl_graphtx.models.masked_atoms import MaskedAtomNetwork, MaskedAtoms
from dgl_graphtx.runs.pretraining import MaskedDescriptorTrainer
from dgl_graphtx.training import TrainConfig, masked_loss

TINY = dict(num_layers=1, hidden_dim=16, num_heads=2)
SMILES = "OC(=O)c1ccc(Cl)cc1N"


PRESET = get_preset("gradformer", **TINY)


def _model(num_tasks=3):
    return build_model(get_preset("gradformer", num_tasks=num_tasks, **TINY).model)


def _graphs():
    return smiles_to_graphs(SMILES, PRESET.featurizer, PRESET.relation)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.smi"
    path.write_text("\n".join(freesolv()["smiles"][:40]))
    return path


def _pretrain(corpus, out, objective="both", **kwargs):
    preset = get_preset("gradformer", **TINY)
    config = TrainConfig(epochs=3, batch_size=8, lr=1e-3, progress=False)
    return pretrain(corpus, out, preset, config, PretrainConfig(objective=objective, valid_share=0.2, atom_mask_share=0.3),
                    name="tiny", **kwargs)


def test_the_mask_vector_replaces_exactly_the_masked_atoms():
    """The mask is an input of the model's encoding (no hook): the masked atoms' embedded inputs are
    the mask vector, the others' and an unmasked encoding stay as they were."""
    model = _model()
    g, rel = _graphs()
    plain = model.encode_atoms(g)
    pretext = MaskedAtoms(model, share=0.5)
    masked = torch.zeros(g.num_nodes(), dtype=torch.bool)
    masked[[1, 6]] = True
    embedded = model.encode_atoms(g, masked=pretext.mask(masked))
    rest = plain - model.atom_encoder(g.ndata["feat"])  # the random-walk encodings added to every atom's input
    assert model.input_mlp is None and rest.abs().sum() > 0
    torch.testing.assert_close(embedded[masked], pretext.mask_embedding + rest[masked], rtol=0, atol=1e-6)
    assert torch.equal(embedded[~masked], plain[~masked])
    assert torch.equal(model.encode_atoms(g), plain)
    with model.eval_mode():
        atoms, _, _ = model.encode(g, rel, masked=pretext.mask(masked))
        unmasked, _, _ = model.encode(g, rel)
        assert not torch.allclose(atoms, unmasked) and torch.equal(model.encode(g, rel)[0], unmasked)
    assert not any("mask" in key for key in model.state_dict())


def test_every_atom_can_be_drawn_and_at_least_one_is():
    pretext = MaskedAtoms(_model(), share=0.25)
    torch.manual_seed(0)
    draws = torch.stack([pretext.draw(40, torch.device("cpu")) for _ in range(200)]).float()
    assert draws.sum(dim=1).min() >= 1
    assert abs(float(draws.mean()) - 0.25) < 0.02 and bool((draws.sum(dim=0) > 0).all())


def test_the_element_loss_is_the_cross_entropy_against_rdkit_elements():
    model = _model()
    pretext = MaskedAtoms(model, share=0.5)
    g, rel = _graphs()
    atoms = torch.randn(g.num_nodes(), 16)
    masked = torch.tensor([i % 3 == 0 for i in range(g.num_nodes())])
    canonical = Chem.MolFromSmiles(Chem.MolToSmiles(Chem.MolFromSmiles(SMILES)))  # the graphs' atom order
    truth = torch.tensor([a.GetAtomicNum() - 1 for a in canonical.GetAtoms()])[masked]
    assert len(set(truth.tolist())) == 3
    with torch.no_grad():
        logits = atoms[masked] @ pretext.classifier.weight.T + pretext.classifier.bias
        loss, correct = pretext.element_loss(g, atoms, masked)
    assert float(loss) == pytest.approx(float(F.cross_entropy(logits, truth)), rel=1e-6)
    assert int(correct) == int((logits.argmax(dim=1) == truth).sum())


@pytest.mark.parametrize("probe", [True, False])
def test_the_atoms_objective_trains_the_backbone_on_the_element_loss_alone(probe):
    model = _model()
    network = MaskedAtomNetwork(model, MaskedAtoms(model, share=0.5), probe=probe)
    g, rel = _graphs()
    network(g, rel).sum().backward()  # the descriptor head's outputs only
    encoder = [p.grad for p in model.atom_encoder.parameters()]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.head.parameters())
    assert all(grad is None for grad in encoder) if probe else any(grad is not None and grad.abs().sum() > 0 for grad in encoder)
    model.zero_grad()
    network(g, rel)
    network.element_loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.atom_encoder.parameters())


def test_the_training_loss_adds_the_element_loss_to_the_masked_descriptor_loss():
    model = _model(num_tasks=4)
    trainer = MaskedDescriptorTrainer(model, TrainConfig(progress=False), mask_share=0.0, pretext=MaskedAtoms(model, share=0.5))
    g, rel = _graphs()
    output = trainer.training_module()(g, rel)
    labels, mask = torch.randn(1, 4), torch.ones(1, 4, dtype=torch.bool)
    batch = type("B", (), {"labels": labels, "mask": mask})()
    expected = masked_loss("regression", output, labels, mask) + trainer.network.element_loss
    assert float(trainer.batch_loss(output, batch).detach()) == pytest.approx(float(expected.detach()), rel=1e-6)


def test_an_interrupted_masked_atom_run_resumes_to_the_same_weights(corpus, tmp_path, monkeypatch):
    reference = _pretrain(corpus, tmp_path / "whole")
    with interrupted_at_epoch(monkeypatch, 2):
        _pretrain(corpus, tmp_path / "run")
    parts = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["training_state"]["parts"]
    assert set(parts["masked-atom heads"]) == {"mask_embedding", "classifier.weight", "classifier.bias"}
    resumed = _pretrain(corpus, tmp_path / "run", resume=True)
    assert resumed.card.heldout_element_accuracy == reference.card.heldout_element_accuracy
    assert_same_backbone(tmp_path / "run", tmp_path / "whole")
    assert not any("mask" in key for key in load_checkpoint(tmp_path / "whole" / "backbone.pt").model.state_dict())


@pytest.mark.parametrize("objective", ["atoms", "both"])
def test_a_masked_atom_backbone_fine_tunes_and_its_best_checkpoint_predicts(corpus, tmp_path, objective):
    result = _pretrain(corpus, tmp_path / objective, objective=objective)
    card = json.loads((tmp_path / objective / "card.json").read_text())
    assert card["recipe"]["pretrain"]["objective"] == objective and 0.0 <= card["heldout_element_accuracy"] <= 1.0
    assert result.card.heldout_element_accuracy == card["heldout_element_accuracy"]
    pretrained = get_pretrained(tmp_path / objective)
    line = describe(pretrained.card)
    assert f"({objective} objective), held-out masked-atom accuracy" in line and line.endswith("(probe)") == (objective == "atoms")
    model = build_model(pretrained_preset(pretrained, get_preset("gradformer", num_tasks=1)).model)
    assert load_backbone(model, pretrained) == []
    table = Predictor(tmp_path / objective / "best.pt").predict(["CCO", "c1ccccc1"])
    assert table["error"].isna().all() and table.filter(like="_pred").shape == (2, len(card["targets"]["names"]))


def test_cli_pretrain_takes_the_objective(corpus, tmp_path):
    code, out, err = run_cli(["pretrain", corpus, "--out", tmp_path / "pt", "--objective", "atoms", "--atom-mask-share", "0.2",
                              "--model", "vanilla", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2",
                              "--epochs", "1", "--batch-size", "8", "--valid-share", "0.25", "-q"])
    assert code == 0, err
    recipe = get_pretrained(tmp_path / "pt").card.recipe["pretrain"]
    assert recipe["objective"] == "atoms" and recipe["atom_mask_share"] == 0.2
    code, _, err = run_cli(["pretrain", corpus, "--out", tmp_path / "bad", "--objective", "masked"])
    assert code == 2 and err == "error: unknown pretraining objective 'masked'; choose one of descriptors, atoms, both\n"
