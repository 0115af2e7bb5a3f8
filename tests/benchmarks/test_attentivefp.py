"""The dgllife baseline that the suite trains in the same run (benchmarks/suite/attentivefp.py)
must work with the library's Trainer end to end: fit, predict, evaluate."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Subset

from dgl_graphtx.datasets import MoleculeDataset, freesolv
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.training import Trainer, TrainConfig

from benchmarks.suite.attentivefp import AttentiveFPBaseline


def test_attentivefp_baseline_trains_and_predicts_through_the_trainer(tmp_path):
    frame = freesolv().head(40)
    ds = MoleculeDataset(list(frame["smiles"]), [[y, 2 * y] for y in frame["expt"]], target_names=["a", "b"],
                         featurizer=FeaturizerConfig(atom_features="canonical"), progress=False)
    torch.manual_seed(0)
    trainer = Trainer(AttentiveFPBaseline(num_tasks=2), TrainConfig(epochs=2, batch_size=16, progress=False),
                      out_dir=tmp_path)
    result = trainer.fit(Subset(ds, range(30)), Subset(ds, range(30, 40)))
    assert len(result.history) == 2 and (tmp_path / "log.csv").exists()
    preds = trainer.predict(Subset(ds, range(30, 40)))
    assert preds.shape == (10, 2) and np.isfinite(preds).all()
    assert np.isfinite(trainer.predict(Subset(ds, [])).sum()) and trainer.predict(Subset(ds, [])).shape == (0, 2)
    metrics = trainer.evaluate(Subset(ds, range(30, 40)))
    assert np.isfinite(metrics["rmse"])
