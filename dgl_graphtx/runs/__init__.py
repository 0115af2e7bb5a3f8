"""Workflows: a training run end to end (one model, an ensemble, cross-validation folds),
pretraining a backbone and fine-tuning from one, and what they share: the run's configuration
(:class:`RunConfig`, from defaults, presets, files and ``--set``), its plan (:class:`RunPlan`:
every setting, checked together once), its training data, its folder and the set-up of several
processes; :func:`train_from_config` runs a configuration as ``dgl-graphtx train`` does.
Hyperparameter search is :mod:`dgl_graphtx.runs.hpopt`."""
from .config import DataConfig, EnsembleConfig, PresetChoice, RunConfig, resolve_run_config
from .cross_validation import CVResult, cross_validate
from .ensemble import EnsembleResult, train_ensemble
from .experiment import ExperimentResult, train_and_evaluate
from .fine_tuning import pretrained_preset, pretrained_run_config
from .folder import RunFolder
from .from_config import RunResult, pretrain_from_config, train_from_config
from .plan import RunPlan
from .pretraining import PretrainConfig, PretrainResult, pretrain
from .training_data import load_training_data

__all__ = [
    "CVResult",
    "DataConfig",
    "EnsembleConfig",
    "EnsembleResult",
    "ExperimentResult",
    "PresetChoice",
    "PretrainConfig",
    "PretrainResult",
    "RunConfig",
    "RunFolder",
    "RunPlan",
    "RunResult",
    "cross_validate",
    "load_training_data",
    "pretrain",
    "pretrain_from_config",
    "pretrained_preset",
    "pretrained_run_config",
    "resolve_run_config",
    "train_and_evaluate",
    "train_ensemble",
    "train_from_config",
]
