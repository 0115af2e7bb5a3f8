"""The import paths of the 0.1 README's first example keep working: their names live in the
wings now (``dgl_graphtx.inference``), and the old modules hand the same objects on."""
from __future__ import annotations

from dgl_graphtx import inference


def test_the_prediction_api_keeps_its_first_path():
    from dgl_graphtx.predict import Embeddings, Predictor, predict_smiles

    assert (Predictor, predict_smiles, Embeddings) == (inference.Predictor, inference.predict_smiles, inference.Embeddings)
