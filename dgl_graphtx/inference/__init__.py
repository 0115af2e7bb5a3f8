"""Inference: trained models applied to new molecules. One checkpoint (:class:`Predictor`), an
ensemble of them, or a pretrained backbone; predictions (explained atom by atom when asked),
embeddings and scores on labelled files, streamed a chunk at a time, with the applicability domain
and uncertainty the checkpoint carries."""
from .backbones import Pretrained, get_pretrained, is_pretrained_reference, list_pretrained
from .checkpoint_paths import resolve_checkpoints, single_checkpoint
from .cross_conformal import CVPlus, stored_cv_plus
from .domain import Domain
from .ensemble import ensemble_chunks, ensemble_predict, stored_calibration
from .evaluation import Evaluation, evaluate_table
from .explain import ExplainSettings, Explanations
from .model_card import ModelCard
from .prediction_job import PredictionJob, PredictionSummary, run_prediction
from .predictor import Embeddings, Predictor, predict_smiles

__all__ = [
    "CVPlus",
    "Domain",
    "Embeddings",
    "Evaluation",
    "ExplainSettings",
    "Explanations",
    "ModelCard",
    "PredictionJob",
    "PredictionSummary",
    "Predictor",
    "Pretrained",
    "ensemble_chunks",
    "ensemble_predict",
    "evaluate_table",
    "get_pretrained",
    "is_pretrained_reference",
    "list_pretrained",
    "predict_smiles",
    "resolve_checkpoints",
    "run_prediction",
    "single_checkpoint",
    "stored_calibration",
    "stored_cv_plus",
]
