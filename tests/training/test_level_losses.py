"""Atom- and bond-level targets in training: the loss against a numpy computation, the statistics
against numpy over the training labels, metrics per level, and a model that learns them."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem
from torch.utils.data import Subset

from conftest_models import freesolv_frame, tiny_preset

from dgl_graphtx.checkpoint import CheckpointMeta
from dgl_graphtx.datasets import load_labelled
from dgl_graphtx.datasets.level_targets import LevelTargets
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.models import build_model
from dgl_graphtx.models.levels import LevelOptions, LevelOutputs
from dgl_graphtx.training import Trainer, TrainConfig
from dgl_graphtx.training.levels import fit_level_statistics, level_loss, level_metrics, predict_levels
from dgl_graphtx.training.fast_steps import COMPILES_THE_STEP


def _charges_file(path, count=40):
    rows = []
    for smiles in freesolv_frame()["smiles"][:count]:
        mol = Chem.MolFromSmiles(smiles)
        AllChem.ComputeGasteigerCharges(mol)
        charges = [a.GetDoubleProp("_GasteigerCharge") + a.GetDoubleProp("_GasteigerHCharge") for a in mol.GetAtoms()]
        rows.append({"smiles": smiles, "q": str([round(q, 5) for q in charges]),
                     "order": str([b.GetBondTypeAsDouble() for b in mol.GetBonds()])})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _dataset(tmp_path, preset, count=40):
    spec = LevelTargets(("q",), ("order",), atom_sums=("q=formal_charge",))
    ds, _ = load_labelled(_charges_file(tmp_path / "q.csv", count), [], level_targets=spec, featurizer=preset.featurizer,
                          relation=preset.relation, progress=False)
    return ds, spec


def _model(preset):
    return build_model(tiny_preset("gradformer", num_tasks=0, levels=LevelOptions(1, 1, (0,))).model)


def test_the_level_loss_is_each_levels_masked_mean_squared_error(tmp_path):
    preset = tiny_preset("gradformer")
    ds, _ = _dataset(tmp_path, preset, 6)
    model = _model(preset)
    model.levels.set_normalization("atom", torch.tensor([0.1]), torch.tensor([2.0]))
    model.levels.set_normalization("bond", torch.tensor([1.2]), torch.tensor([0.5]))
    batch = ds.__getitems__(list(range(6)))
    batch.graph.ndata["atom_targets"][3] = float("nan")  # a missing label
    atoms, bonds = torch.randn(batch.graph.num_nodes(), 1), torch.randn(batch.graph.num_edges() // 2, 1)
    loss = level_loss(model, LevelOutputs(torch.zeros(6, 0), atoms, bonds), batch.graph)
    q = batch.graph.ndata["atom_targets"][:, 0].numpy()
    order = batch.graph.edata["bond_targets"][0::2, 0].numpy()
    seen = ~np.isnan(q)
    expected = np.mean((atoms[:, 0].numpy()[seen] - (q[seen] - 0.1) / 2.0) ** 2) + np.mean((bonds[:, 0].numpy() - (order - 1.2) / 0.5) ** 2)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


def test_level_statistics_are_those_of_the_training_labels(tmp_path):
    preset = tiny_preset("gradformer")
    ds, _ = _dataset(tmp_path, preset, 12)
    model = _model(preset)
    train = Subset(ds, [0, 3, 5, 7, 9])
    trainer = Trainer(model, TrainConfig(epochs=1, batch_size=2, progress=False, device="cpu"))
    fit_level_statistics(model, trainer.loader(train), {"atom": ["q"], "bond": ["order"]})
    q = torch.cat([ds[i][0].ndata["atom_targets"] for i in train.indices]).double().numpy()[:, 0]
    order = torch.cat([ds[i][0].edata["bond_targets"][0::2] for i in train.indices]).double().numpy()[:, 0]
    assert float(model.levels.atom_mean[0]) == pytest.approx(np.nanmean(q), rel=1e-5)
    assert float(model.levels.atom_std[0]) == pytest.approx(np.nanstd(q), rel=1e-4)
    assert float(model.levels.bond_std[0]) == pytest.approx(np.std(order), rel=1e-4)
    ds.graphs.ndata["atom_targets"][:] = float("nan")
    with pytest.raises(ConfigError, match="no observed training label for \\[\"atom target 'q'\"\\]"):
        fit_level_statistics(model, trainer.loader(train), {"atom": ["q"]})


def test_a_model_learns_atom_and_bond_targets_and_watches_their_metric(tmp_path):
    preset = tiny_preset("gradformer")
    ds, spec = _dataset(tmp_path, preset)
    model = _model(preset)
    meta = CheckpointMeta(preset.featurizer, preset.relation, [], {"levels": spec.to_dict()})
    trainer = Trainer(model, TrainConfig(epochs=8, batch_size=8, lr=3e-3, progress=False, device="cpu"), meta=meta)
    assert trainer.metric == "atom_rmse"
    result = trainer.fit(Subset(ds, range(32)), Subset(ds, range(32, 40)))
    losses = result.history["train_loss"].tolist()
    assert losses[-1] < 0.5 * losses[0]
    assert {"valid_atom_rmse", "valid_bond_mae"} <= set(result.history.columns)
    predicted, levels = predict_levels(model, trainer.loader(Subset(ds, range(32, 40))), trainer.device)
    assert predicted.shape == (8, 0)
    found = levels["atom"]
    seen = ~np.isnan(found.labels[:, 0])
    assert level_metrics(levels, ["rmse"])["atom_rmse"] == pytest.approx(
        float(np.sqrt(np.mean((found.predicted[seen, 0] - found.labels[seen, 0]) ** 2))), rel=1e-6)
    for molecule in np.unique(found.molecule):  # the constraint holds: each molecule's charges add up to its formal charge
        assert found.predicted[found.molecule == molecule, 0].sum() == pytest.approx(np.nansum(found.labels[found.molecule == molecule, 0]),
                                                                                     abs=2e-3)


@pytest.mark.skipif(not COMPILES_THE_STEP, reason="step_mode 'compiled' needs torch 2.6 or newer")
def test_padded_step_modes_are_refused_for_levels_and_auto_steps_eagerly(tmp_path):
    """A padded batch's slots hold one molecule each and no atom labels: a model of atom-level
    targets (or of rows of several molecules) trains on unpadded batches."""
    preset = tiny_preset("gradformer")
    ds, _ = _dataset(tmp_path, preset, 8)
    trainer = Trainer(_model(preset), TrainConfig(epochs=1, batch_size=4, progress=False, device="cpu", step_mode="compiled"))
    with pytest.raises(ConfigError, match="step_mode 'compiled' trains on padded batches, which a model of atom- or bond-level"):
        trainer.fit(ds)
    assert Trainer(_model(preset), TrainConfig(epochs=1, batch_size=4, progress=False, device="cpu")).fit(ds).best_epoch == 1
