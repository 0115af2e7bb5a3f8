"""Child process of the suite's AttentiveFP tool: train dgllife's AttentiveFP on a split file as
benchmarks/pretrained_gain.py does (canonical atom features, the default model's recipe, best
validation epoch) and write its test predictions by row.

Usage: python attentivefp_child.py DATA.csv TASK EPOCHS SEED PREDICTIONS.csv
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _baselines import attentive_fp_predictions  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.featurize import FeaturizerConfig  # noqa: E402
from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402


def main(data: str, task: str, epochs: str, seed: str, predictions: str) -> None:
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
