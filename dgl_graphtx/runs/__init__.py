"""Workflows: a training run end to end (one model, an ensemble, cross-validation folds), fine-tuning
from and pretraining of backbones, hyperparameter search, and what they share: the run's
configuration, its folder and the set-up of several processes."""
