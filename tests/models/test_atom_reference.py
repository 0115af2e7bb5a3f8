"""Per-element reference values: the least-squares fit against the normal equations, the sum over
atoms against a hand sum over RDKit's atoms (hydrogens included, as nodes or not), the Trainer's
fit on the training part only, and a checkpoint that carries them to the Predictor."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from rdkit import Chem
from torch.utils.data import Subset

from conftest_models import TINY
from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.featurize.elements import element_symbol
from dgl_graphtx.models import ModelConfig, build_model, get_preset
from dgl_graphtx.models.atom_reference import AtomReference, fit_atom_references
from dgl_graphtx.predict import Predictor
from dgl_graphtx.training import TrainConfig, Trainer

SMILES = ["C", "CC", "CCC", "CO", "CCO", "OCCO", "CCCC", "CN", "CCN", "NCCO", "CC(=O)O", "CC#N", "NC(=O)N",
          "c1ccccc1", "c1ccncc1", "OC1CCCCC1", "CCOCC", "FC(F)F", "CC(F)O", "NCCN"]
#: Made-up per-element values (kcal/mol-like magnitudes) that the labels are built from.
TRUE = {"H": -60.0, "C": -140.0, "N": -100.0, "O": -95.0, "F": -90.0}
PERIODIC = Chem.GetPeriodicTable()


def with_hydrogens(smiles):
    return [Chem.AddHs(Chem.MolFromSmiles(s)) for s in smiles]


def element_counts(smiles, elements):
    """Atoms of each element per molecule (its formula, hydrogens included), straight from RDKit."""
    return np.array([[sum(a.GetSymbol() == e for a in m.GetAtoms()) for e in elements] for m in with_hydrogens(smiles)], float)


def labels_for(smiles):
    counts = element_counts(smiles, list(TRUE))
    wiggle = np.sin(np.arange(len(smiles)))  # what the network is left to learn
    return counts @ np.array(list(TRUE.values())) + wiggle


def test_fit_solves_the_normal_equations_per_target_on_observed_labels():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 6, size=(40, 4)).astype(float)
    counts[:, 2] = 0  # an element no molecule has
    labels = counts @ rng.normal(size=(4, 2)) + rng.normal(scale=0.1, size=(40, 2))
    labels[::3, 1] = np.nan
    fitted = fit_atom_references(torch.tensor(counts), torch.tensor(labels)).numpy()
    for t in range(2):
        rows = ~np.isnan(labels[:, t])
        x = counts[rows][:, [0, 1, 3]]
        expected = np.linalg.solve(x.T @ x, x.T @ labels[rows, t])
        np.testing.assert_allclose(fitted[[0, 1, 3], t], expected, rtol=1e-10)
        assert fitted[2, t] == 0.0


@pytest.mark.parametrize("atom_features", ["ogb", "canonical"])
@pytest.mark.parametrize("hydrogens", [False, True])
def test_reference_of_a_batch_is_the_sum_over_its_atoms(atom_features, hydrogens):
    config = FeaturizerConfig(atom_features=atom_features, explicit_hydrogens=hydrogens)
    ds = MoleculeDataset(SMILES, np.zeros((len(SMILES), 1)), featurizer=config, progress=False)
    reference = AtomReference(atom_features, num_tasks=2)
    torch.manual_seed(0)
    reference.values.normal_()
    batch = ds.__getitems__(list(range(len(ds))))
    symbols = [element_symbol(c, atom_features) for c in range(reference.values.shape[0])]
    table = {s: reference.values[c].numpy() for c, s in enumerate(symbols) if s in TRUE}
    by_hand = np.array([sum(table[a.GetSymbol()] for a in m.GetAtoms()) for m in with_hydrogens(SMILES)])
    np.testing.assert_allclose(reference(batch.graph).numpy(), by_hand, rtol=1e-5)
    counts = reference.counts(batch.graph).numpy()[:, [symbols.index(e) for e in TRUE]]
    np.testing.assert_array_equal(counts, element_counts(SMILES, list(TRUE)))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny MoiréGT with atom references trained one epoch on the first 14 molecules."""
    preset = get_preset("moire", "2d", atom_reference=True, **TINY)
    featurizer = FeaturizerConfig(explicit_hydrogens=True)
    y = labels_for(SMILES)
    ds = MoleculeDataset(SMILES, y[:, None], featurizer=featurizer, relation=preset.relation, progress=False)
    train = Subset(ds, list(range(14)))
    model = build_model(preset.model)
    trainer = Trainer(model, TrainConfig(epochs=1, batch_size=5, progress=False))
    trainer.fit(train)
    path = save_checkpoint(tmp_path_factory.mktemp("ref") / "best.pt", model, CheckpointMeta(featurizer, preset.relation, ["energy"]))
    return model, trainer, ds, y, path


def test_trainer_fits_the_references_on_the_training_part_only(trained):
    model, _, _, y, _ = trained
    counts = element_counts(SMILES[:14], list(TRUE))
    present = counts.any(axis=0)
    expected, *_ = np.linalg.lstsq(counts[:, present], y[:14], rcond=None)
    fitted = {e: float(model.atom_reference.values[PERIODIC.GetAtomicNumber(e) - 1, 0]) for e in TRUE}  # OGB class: Z - 1
    np.testing.assert_allclose([fitted[e] for e, p in zip(TRUE, present) if p], expected, rtol=1e-5)
    assert fitted["F"] == 0.0  # no fluorine among the training molecules
    residual = y[:14] - counts[:, present] @ expected
    assert float(model.target_mean) == pytest.approx(residual.mean(), abs=1e-4)
    assert float(model.target_std) == pytest.approx(residual.std(), rel=1e-4)


def test_outputs_add_the_reference_to_what_the_head_predicts(trained):
    model, trainer, ds, _, _ = trained
    with_reference = trainer.predict(ds)[:, 0]
    saved = model.atom_reference.values.clone()
    model.atom_reference.values.zero_()
    try:
        without = trainer.predict(ds)[:, 0]
    finally:
        model.atom_reference.values.copy_(saved)
    table = {e: float(saved[PERIODIC.GetAtomicNumber(e) - 1, 0]) for e in TRUE}
    by_hand = [sum(table[a.GetSymbol()] for a in m.GetAtoms()) for m in with_hydrogens(SMILES)]
    np.testing.assert_allclose(with_reference - without, by_hand, rtol=1e-5)


def test_checkpoint_carries_the_references_to_the_predictor(trained):
    model, trainer, ds, _, path = trained
    predictor = Predictor(path, device="cpu")
    assert torch.equal(predictor.model.atom_reference.values, model.atom_reference.values)
    np.testing.assert_allclose(predictor.predict(SMILES)["energy_pred"].to_numpy(), trainer.predict(ds)[:, 0], rtol=1e-6)


def test_atom_reference_is_for_regression():
    with pytest.raises(ConfigError, match="atom_reference is for regression"):
        ModelConfig(task="classification", atom_reference=True)
    plain = build_model(ModelConfig(num_layers=1, hidden_dim=8, num_heads=2))
    assert plain.atom_reference is None and not any("atom_reference" in key for key in plain.state_dict())
