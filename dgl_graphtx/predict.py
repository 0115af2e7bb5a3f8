"""The prediction API under its first name, kept so that scripts written as the 0.1 README showed
(``from dgl_graphtx.predict import Predictor, predict_smiles``) go on working; it lives in
:mod:`dgl_graphtx.inference`, where new code imports it from."""
from .inference.predictor import Embeddings, Predictor, predict_smiles

__all__ = ["Embeddings", "Predictor", "predict_smiles"]
