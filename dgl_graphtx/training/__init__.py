"""Training: the Trainer, metrics, learning-rate schedules, plots, process hooks and resume state."""
from .hooks import ProcessHooks
from .losses import LOSSES, TASK_LOSSES, check_pos_weight, per_label_loss, resolve_loss, weighted_loss
from .metrics import (PRIMARY_METRIC, TASK_METRICS, check_binary_labels, check_class_labels, classification_metrics, compute_metrics,
                      json_safe, metric_notes, multiclass_metrics, regression_metrics, resolve_metrics)
from .outputs import prediction_column, prediction_frame, prediction_values
from .plots import plot_learning_curve, plot_parity
from .resume import TrainingState
from .trainer import TrainConfig, Trainer, TrainResult, dataset_labels, masked_loss, seed_everything

__all__ = [
    "LOSSES",
    "TASK_LOSSES",
    "TASK_METRICS",
    "check_class_labels",
    "check_pos_weight",
    "multiclass_metrics",
    "per_label_loss",
    "prediction_column",
    "prediction_frame",
    "prediction_values",
    "resolve_loss",
    "resolve_metrics",
    "weighted_loss",
    "PRIMARY_METRIC",
    "ProcessHooks",
    "TrainConfig",
    "TrainResult",
    "TrainingState",
    "Trainer",
    "check_binary_labels",
    "classification_metrics",
    "compute_metrics",
    "dataset_labels",
    "json_safe",
    "masked_loss",
    "metric_notes",
    "plot_learning_curve",
    "plot_parity",
    "regression_metrics",
    "seed_everything",
]
