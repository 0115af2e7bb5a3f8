"""Training: the Trainer, metrics, learning-rate schedules, plots, process hooks and resume state."""
from .hooks import ProcessHooks
from .metrics import PRIMARY_METRIC, check_binary_labels, classification_metrics, compute_metrics, json_safe, metric_notes, regression_metrics
from .plots import plot_learning_curve, plot_parity
from .resume import TrainingState
from .trainer import TrainConfig, Trainer, TrainResult, dataset_labels, masked_loss, seed_everything

__all__ = [
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
