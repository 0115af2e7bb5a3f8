"""The suite's AttentiveFP tool: dgllife's AttentiveFP behind the interface the library's Trainer
uses, trained on a split file with the default model's recipe (canonical atom features, best
validation epoch), run as a child process that writes its test predictions by row.

Usage: python -m benchmarks.suite.attentivefp DATA.csv TASK EPOCHS SEED PREDICTIONS.csv
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Sequence, Tuple

import dgl_graphtx  # noqa: F401,I001  (first: selects DGL's PyTorch backend and stands in for graphbolt before dgllife imports dgl)
import numpy as np
import pandas as pd
import torch
from dgllife.model import AttentiveFPPredictor
from torch import nn

from dgl_graphtx.models.levels import LevelOptions
from dgl_graphtx.models.molecule_sets import MoleculeSetOptions

#: Widths of dgllife's canonical atom and bond features (``FeaturizerConfig(atom_features="canonical")``).
CANONICAL_ATOM_FEATURES, CANONICAL_BOND_FEATURES = 74, 12


class AttentiveFPBaseline(nn.Module):
    """dgllife's AttentiveFP behind the small interface the Trainer uses (task, target scaling)."""

    def __init__(self, node_feat_size: int = CANONICAL_ATOM_FEATURES, edge_feat_size: int = CANONICAL_BOND_FEATURES,
                 num_tasks: int = 1, graph_feat_size: int = 200, dropout: float = 0.1, task: str = "regression") -> None:
        super().__init__()
        self.config = SimpleNamespace(task=task, num_tasks=num_tasks, prediction_width=num_tasks,
                                      uncertainty_head="none", levels=LevelOptions(), molecules=MoleculeSetOptions())
        self.net = AttentiveFPPredictor(node_feat_size, edge_feat_size, num_layers=2, num_timesteps=2,
                                        graph_feat_size=graph_feat_size, n_tasks=num_tasks, dropout=dropout)
        self.register_buffer("target_mean", torch.zeros(num_tasks))
        self.register_buffer("target_std", torch.ones(num_tasks))

    def forward(self, graph, relation_graph):
        return self.net(graph, graph.ndata["feat"], graph.edata["feat"])

    def set_target_normalization(self, mean, std):
        self.target_mean.copy_(mean)
        self.target_std.copy_(std.clamp_min(1e-8))

    def normalize_targets(self, labels):
        return labels if self.config.task == "classification" else (labels - self.target_mean) / self.target_std

    def to_target_space(self, output):
        return torch.sigmoid(output) if self.config.task == "classification" else output * self.target_std + self.target_mean


def attentive_fp_predictions(dataset, train_rows: Sequence[int], valid_rows: Sequence[int], test_rows: Sequence[int],
                             task: str, recipe, epochs: int, seed: int) -> Tuple[np.ndarray, int]:
    """Test predictions ``[M, T]`` of :class:`AttentiveFPBaseline` trained by the library's Trainer
    with ``recipe`` (a preset's ``train``) for ``epochs``, from its best validation epoch (also
    returned); ``dataset`` has canonical atom features and the rows are dataset indices."""
    from torch.utils.data import Subset

    from dgl_graphtx.training import Trainer, TrainConfig, seed_everything

    seed_everything(seed)
    model = AttentiveFPBaseline(num_tasks=len(dataset.target_names), task=task)
    trainer = Trainer(model, TrainConfig.from_recipe(recipe, epochs=epochs, seed=seed, progress=False, device="cpu"))
    result = trainer.fit(Subset(dataset, list(train_rows)), Subset(dataset, list(valid_rows)))
    return trainer.predict(Subset(dataset, list(test_rows))), result.best_epoch


def main(data: str, task: str, epochs: str, seed: str, predictions: str) -> None:
    from dgl_graphtx.datasets import MoleculeDataset
    from dgl_graphtx.featurize import FeaturizerConfig
    from dgl_graphtx.models import get_preset
    from dgl_graphtx.relation_graph import RelationConfig

    frame = pd.read_csv(data)
    dataset = MoleculeDataset.from_dataframe(frame, target_cols=["target"], featurizer=FeaturizerConfig(atom_features="canonical"),
                                             relation=RelationConfig(), progress=False)
    parts = frame["split"].to_numpy()[dataset.rows.numpy()]
    index = {part: [i for i, p in enumerate(parts) if p == part] for part in ("train", "val", "test")}
    recipe = get_preset("gradformer", task=task).train
    predicted, _ = attentive_fp_predictions(dataset, index["train"], index["val"], index["test"], task, recipe, int(epochs), int(seed))
    rows = dataset.rows.numpy()[index["test"]]
    pd.DataFrame({"row": rows, "prediction": predicted[:, 0]}).to_csv(predictions, index=False)


if __name__ == "__main__":
    main(*sys.argv[1:])
