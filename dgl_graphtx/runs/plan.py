"""The plan of a training run: every setting of the run, and every rule between settings checked
once, when the plan is made (:class:`RunPlan`). The training, ensemble and cross-validation
workflows take a plan; the command line and config files make theirs with
:meth:`RunPlan.from_config`, so that a setting is refused by the same line of code whichever way
it came. A setting's own range or choices are its dataclass's (:class:`~dgl_graphtx.training.TrainConfig`,
:class:`~dgl_graphtx.uncertainty.UncertaintyConfig`, ...); what one setting means for another
(an option that needs another, two that contradict each other, an option that would do nothing)
is checked here. The device is resolved here too, once per run.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from ..datasets import MoleculeDataset, Split
from ..datasets.folds import VALID_SHARE
from ..datasets.split_kinds import SPLIT_KINDS, split_kind
from ..datasets.splits import DEFAULT_FRACTIONS
from ..devices import resolve_compute, resolve_device
from ..errors import ConfigError
from ..inference.backbones import Pretrained, get_pretrained
from ..models import ModelConfig, Preset
from ..models.levels import LevelOptions
from ..training import TrainConfig, check_binary_labels, check_class_labels, check_pos_weight, resolve_loss, resolve_metrics
from ..uncertainty import UncertaintyConfig, uncertainty_method
from ..uncertainty.methods import check_method_fits
from ..validation import check_number
from .config import EnsembleConfig, RunConfig
from .fine_tuning import check_fits_backbone, pretrained_run_config

#: The split of a run whose data defines it (a split column, or separate validation and test
#: files), known once the data is read (:meth:`RunPlan.with_split`).
PREDEFINED = "predefined"
#: Uncertainty settings that choose the molecules carved to calibrate (nothing to choose when a
#: calibration set is given), and all those that only calibrate (nothing to do without a method).
CARVING = ("calibration_share", "calibration_from")
CALIBRATING = (*CARVING, "calibration_bins", "coverage")
#: The command-line option of each uncertainty setting, for messages.
_OPTIONS = {"calibration_share": "--calibration-share", "calibration_from": "uncertainty.calibration_from",
            "calibration_bins": "--calibration-bins", "coverage": "--coverage"}


@dataclass(frozen=True)
class RunPlan:
    """Every setting of a training run, checked together when the plan is made.

    Args:
        preset: the model, featurizer and relation settings (and the training recipe that
            ``train`` defaults to).
        train: the training settings (default: ``TrainConfig.from_recipe(preset.train)``). Its
            ``device`` and ``compute`` are resolved when the plan is made: the plan's ``train``
            names the device the run uses (``cpu``, ``cuda``, ...), never ``auto``.
        split: a split kind (``random``, ``scaffold``, ``kmeans``, ``kennard_stone``), a given
            :class:`~dgl_graphtx.datasets.Split`, or :data:`PREDEFINED` (the data defines it).
        fractions: train/valid/test shares of a split kind.
        uncertainty: the uncertainty method and its calibration (default: the method of the
            preset's ``uncertainty_head``); the model gets the head the method needs.
        ensemble: models per split and replicated splits.
        folds: cross-validation folds (0: none; else >= 3).
        valid_share: the validation share of the molecules outside a fold's test part.
        targets: the target names, when known before the data is read (the data's otherwise).
        feature_columns: input columns read as molecule-level extra features.
        calibration_given: the molecules that calibrate are given (``--calibration FILE``, or
            rows or a dataset in Python) instead of carved.
        backbone: the pretrained backbone of ``train.from_pretrained`` when it is loaded
            already (else it is loaded when the plan is made).
        config: the run configuration the plan was made from (:meth:`from_config`), if any.

    Example:
        >>> from dgl_graphtx.models import get_preset
        >>> plan = RunPlan(get_preset("vanilla"), TrainConfig(epochs=3, device="auto"), split="scaffold")
        >>> plan.train.epochs, plan.train.device in ("cpu", "cuda"), plan.uncertainty.method
        (3, True, 'none')
        >>> RunPlan(get_preset("vanilla"), TrainConfig(epochs=3, freeze_backbone_epochs=1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: --freeze-backbone-epochs 1 (train.freeze_backbone_epochs) freezes a pretrained backbone, but ...
    """

    preset: Preset
    train: TrainConfig = None  # type: ignore[assignment]  # None: the preset's recipe, set when the plan is made
    split: Union[str, Split] = "random"
    fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS
    uncertainty: UncertaintyConfig = None  # type: ignore[assignment]  # None: the method of the preset's head
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    folds: int = 0
    valid_share: float = VALID_SHARE
    targets: Tuple[str, ...] = ()
    feature_columns: Tuple[str, ...] = ()
    calibration_given: bool = False
    backbone: Optional[Pretrained] = field(default=None, compare=False, repr=False)
    config: Optional[RunConfig] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        train = self.train if self.train is not None else TrainConfig.from_recipe(self.preset.train)
        uncertainty = self.uncertainty if self.uncertainty is not None else UncertaintyConfig(self.preset.model.uncertainty_head)
        model = self.preset.model
        if model.uncertainty_head != uncertainty.head:  # the head the method needs
            headed = dataclasses.replace(model, uncertainty_head=uncertainty.head)
            object.__setattr__(self, "preset", dataclasses.replace(self.preset, model=headed))
        object.__setattr__(self, "train", _on_device(train))
        object.__setattr__(self, "uncertainty", uncertainty)
        for rule in RULES:
            rule(self)
        object.__setattr__(self, "backbone", _backbone(self))

    @classmethod
    def from_config(cls, config: RunConfig, backbone: Optional[Pretrained] = None) -> "RunPlan":
        """The plan of a run configuration (as ``dgl-graphtx train`` and config files give it),
        with ``train.from_pretrained`` resolved (:func:`~dgl_graphtx.runs.fine_tuning.pretrained_run_config`,
        which :attr:`config` then holds).

        Example:
            >>> from dgl_graphtx.runs.config import resolve_run_config
            >>> RunPlan.from_config(resolve_run_config(overrides=["data.targets=y", "data.cv=5", "data.split=scaffold"])).folds
            5
            >>> unused = resolve_run_config(overrides=["data.targets=y", "uncertainty.calibration_share=0.2"])
            >>> RunPlan.from_config(unused)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            dgl_graphtx.errors.ConfigError: --calibration-share (uncertainty.calibration_share) calibrates an uncertainty, but the run ...
        """
        if config.train.from_pretrained:
            backbone = backbone if backbone is not None else get_pretrained(config.train.from_pretrained)
            config = pretrained_run_config(config, backbone)
        data = config.data
        return cls(config.as_preset(), config.train, PREDEFINED if data.predefined else data.split, data.fractions,
                   config.uncertainty, config.ensemble, data.cv, data.cv_valid_share if data.cv else VALID_SHARE,
                   tuple(data.targets), tuple(data.features_cols), data.calibration is not None, backbone, config)

    @property
    def predefined(self) -> bool:
        """Whether the data defines the split (a given :class:`Split`, or :data:`PREDEFINED`)."""
        return isinstance(self.split, Split) or self.split == PREDEFINED

    @property
    def single(self) -> bool:
        """One model on one split: neither an ensemble nor cross-validation."""
        return self.ensemble.single and not self.folds

    def with_split(self, split: Union[None, str, Split]) -> "RunPlan":
        """The plan with the split the data defines (``None``: unchanged).

        Example:
            >>> from dgl_graphtx.models import get_preset
            >>> RunPlan(get_preset("vanilla"), split=PREDEFINED).with_split(Split([0], [1], [2])).predefined
            True
        """
        return self if split is None else dataclasses.replace(self, split=split)

    def for_data(self, dataset: MoleculeDataset, calibration_given: bool = False) -> "RunPlan":
        """The plan checked against the data it trains on: its targets and extra feature columns
        (the rules between settings see them as if they had been given), ``calibration_given``
        when calibration molecules come with it, the model's outputs, the labels' classes and
        the data's featurization.

        Example:
            >>> from dgl_graphtx.models import get_preset
            >>> preset = get_preset("vanilla")
            >>> data = MoleculeDataset(["C", "CC"], [[1.0], [2.0]], featurizer=preset.featurizer, relation=preset.relation, progress=False)
            >>> RunPlan(preset).for_data(data).targets
            ('target_0',)
        """
        model = self.preset.model
        if model.num_tasks != dataset.num_tasks:
            raise ConfigError(f"model has {model.num_tasks} outputs but the dataset has {dataset.num_tasks} targets")
        dataset.check_featurized_as(self.preset.featurizer, self.preset.relation, f"the {model.variant} model",
                                    "featurize it with preset.featurizer / preset.relation")
        if model.task == "classification":
            check_binary_labels(dataset.raw_labels.double().numpy(), dataset.target_names)
        if model.task == "multiclass":
            check_class_labels(dataset.raw_labels.double().numpy(), model.num_classes, dataset.target_names)
        _check_rows_of(model, dataset)
        extras = dataset.extra_values
        return dataclasses.replace(self, targets=tuple(dataset.target_names),
                                   feature_columns=tuple(extras.spec.columns) if extras is not None else (),
                                   calibration_given=calibration_given or self.calibration_given)


def _on_device(train: TrainConfig) -> TrainConfig:
    """``train`` with its device and compute path resolved (``auto`` becomes what it means here)."""
    device = resolve_device(train.device)
    return dataclasses.replace(train, device=str(device), compute=resolve_compute(train.compute, device))


def _check_split(plan: RunPlan) -> None:
    """A split named by its kind names a kind there is."""
    if isinstance(plan.split, str) and plan.split != PREDEFINED:
        split_kind(plan.split)


def _check_task(plan: RunPlan) -> None:
    """The loss, metrics, positive weight and task weights fit the model and its targets."""
    task, train = plan.preset.model.task, plan.train
    resolve_loss(task, train.loss)
    resolve_metrics(task, train.metrics)
    check_pos_weight(task, train.pos_weight)
    weights, targets = train.task_weights, plan.targets
    if weights and targets and len(weights) != len(targets):
        raise ConfigError(f"{len(weights)} task weight(s) {list(weights)} for {len(targets)} target(s) {list(targets)}; "
                          "give one weight per target (--task-weights)")


def _check_uncertainty(plan: RunPlan) -> None:
    """The uncertainty method fits the model and the number of models."""
    model, method = plan.preset.model, uncertainty_method(plan.uncertainty.method)
    check_method_fits(method.name, model.task)
    if method.std == "members" and plan.ensemble.size < 2:
        raise ConfigError(f"uncertainty {method.name!r} is the spread of several models: train with ensemble size >= 2 "
                          "(--ensemble-size, ensemble.size)")
    if method.std == "dropout" and not (model.dropout or model.attn_dropout):
        raise ConfigError(f"uncertainty {method.name!r} samples dropout, but the model has dropout=0 and attn_dropout=0; "
                          "set one, e.g. --set model.dropout=0.1")


def _check_calibration(plan: RunPlan) -> None:
    """Calibration options only where they do something: with an uncertainty method, and the
    carving ones only when no calibration set is given."""
    uncertainty = plan.uncertainty
    changed = [name for name in CALIBRATING if getattr(uncertainty, name) != UNCERTAINTY_DEFAULTS[name]]
    if not uncertainty.active and (changed or plan.calibration_given):
        what = f"{_OPTIONS[changed[0]]} (uncertainty.{changed[0]})" if changed else "a calibration set (--calibration)"
        raise ConfigError(f"{what} calibrates an uncertainty, but the run estimates none: choose a method with --uncertainty "
                          "(uncertainty.method), or drop it")
    carving = [name for name in CARVING if name in changed]
    if plan.calibration_given and carving:
        raise ConfigError(f"{_OPTIONS[carving[0]]} (uncertainty.{carving[0]}) chooses the molecules carved from the split to "
                          "calibrate, but a calibration set is given (--calibration) and calibrates instead: drop one of them")
    if uncertainty.calibration_bins != "none":
        _check_bins(plan)


def _check_bins(plan: RunPlan) -> None:
    """Similarity bins split one regression model's conformal intervals."""
    bins, task = plan.uncertainty.calibration_bins, plan.preset.model.task
    if task != "regression":
        raise ConfigError(f"--calibration-bins {bins} bins the conformal intervals of regression; this model is {task}: "
                          "drop the option")
    if plan.ensemble.size > 1:
        raise ConfigError(f"--calibration-bins {bins} bins one model's split-conformal intervals; an ensemble's intervals "
                          "are calibrated on its members' spread: drop the option or use --ensemble-size 1")
    if plan.folds:
        raise ConfigError(f"--calibration-bins {bins} bins one model's split-conformal intervals; cross-validation's CV+ "
                          "intervals use every molecule's out-of-fold score in one set: drop the option or train without --cv")


def _check_ensemble(plan: RunPlan) -> None:
    """Ensembles and replicates: of regression or binary models, over splits a kind can cut anew."""
    ensemble = plan.ensemble
    if ensemble.single:
        return
    if plan.folds:
        raise ConfigError("--cv trains one model per fold: drop --ensemble-size and --replicates (ensemble.size, "
                          "ensemble.replicates)")
    if plan.preset.model.task == "multiclass":
        raise ConfigError("ensembles (--ensemble-size/--replicates) average regression or binary outputs; train multiclass "
                          "models singly or with --cv")
    if ensemble.replicates > 1 and plan.predefined:
        raise ConfigError("replicates need a split kind (--split random, scaffold, ...) to split anew; the data defines a "
                          "single split (--split-col, --valid/--test or a given Split): drop --replicates")


def _check_folds(plan: RunPlan) -> None:
    """Cross-validation: >= 3 folds of a kind that cuts folds, calibrated on a share of each."""
    if not plan.folds:
        return
    folding = [name for name, kind in SPLIT_KINDS.items() if kind.folds]
    if plan.folds < 3 or plan.predefined or not split_kind(str(plan.split)).folds:
        raise ConfigError(f"--cv {plan.folds}: cross-validation needs >= 3 folds, no --split-col/--valid/--test, and --split "
                          f"one of {', '.join(folding)} (or --group-col); got split {_describe_split(plan.split)}")
    check_number("valid_share", plan.valid_share, 0, 1, low_open=True, high_open=True)
    if plan.calibration_given:
        raise ConfigError("--cv calibrates each fold on a share carved from the other folds, and gives CV+ intervals from "
                          "every molecule's out-of-fold score; drop --calibration")


def _check_features(plan: RunPlan) -> None:
    """No extra feature is a target: the model would read the label it predicts."""
    named = [name for name in plan.feature_columns if name in plan.targets]
    if named:
        raise ConfigError(f"feature column(s) {', '.join(named)} (--features-cols, data.features_cols) are also target(s) "
                          "(--targets): the model would read the label it predicts, and prediction would need the measured "
                          "value; drop them from the feature columns")


def _check_freezing(plan: RunPlan) -> None:
    """Freezing a backbone needs one, and fewer frozen epochs than the run trains."""
    train = plan.train
    frozen = train.freeze_backbone_epochs
    if not frozen:
        return
    if not train.from_pretrained and plan.backbone is None:
        raise ConfigError(f"--freeze-backbone-epochs {frozen} (train.freeze_backbone_epochs) freezes a pretrained backbone, "
                          "but the run starts from none: give --from-pretrained (train.from_pretrained) or drop it")
    if frozen >= train.epochs:
        raise ConfigError(f"--freeze-backbone-epochs {frozen} freezes the backbone for all {train.epochs} epochs (--epochs), "
                          "so it would never train: freeze fewer epochs than the run trains")


def _check_levels(plan: RunPlan) -> None:
    """Atom- and bond-level targets train one model, without an uncertainty estimate."""
    if not plan.preset.model.levels.any:
        return
    given = [option for option, present in (("--ensemble-size/--replicates", not plan.ensemble.single), ("--cv", plan.folds),
                                            ("--uncertainty", plan.uncertainty.active)) if present]
    if given:
        raise ConfigError(f"atom- and bond-level targets (--atom-targets, --bond-targets) train one model without an "
                          f"uncertainty estimate: drop {given[0]}")


def _check_molecules(plan: RunPlan) -> None:
    """Separate backbones need several molecules per row, and no pretrained start; rows of several
    molecules take no extra features."""
    model, options = plan.preset.model, plan.preset.model.molecules
    if options.backbones == "separate" and not options.several:
        raise ConfigError("--backbones separate gives each molecule of a row its own backbone, but the rows hold one molecule: "
                          "give several molecule columns (--smiles-cols a,b or --reaction-cols), or drop it")
    if options.backbones == "separate" and (plan.train.from_pretrained or plan.backbone is not None):
        raise ConfigError("--from-pretrained starts one backbone, but --backbones separate trains one per molecule: use "
                          "--backbones shared with a pretrained start")
    if options.several and (model.molecule_features or model.atom_extra_features):
        raise ConfigError(f"rows of {options.count} molecules (--smiles-cols) take no extra features (--features-generators, "
                          "--features-cols, --atom-properties): drop them")


#: Every rule between settings, in the order they are checked.
RULES = (_check_split, _check_task, _check_uncertainty, _check_calibration, _check_ensemble, _check_folds, _check_features, _check_freezing,
         _check_levels, _check_molecules)


def _check_rows_of(model: ModelConfig, dataset: MoleculeDataset) -> None:
    """The model reads the data's rows: as many molecules per row (weighted or not), and its atom-
    and bond-level outputs are the data's targets."""
    count, weighted = dataset.molecules_per_row, bool(dataset.molecule_columns.mixture_weights)
    if (model.molecules.count, model.molecules.weighted) != (count, weighted):
        fix = f"count={count}" + (", combine='sum', weighted=True" if weighted else "")
        raise ConfigError(f"the model reads {model.molecules.count} molecule(s) per row{' weighted' * model.molecules.weighted}, "
                          f"the data holds {count}{' weighted' * weighted}: build it with molecules=MoleculeSetOptions({fix})")
    spec = dataset.level_targets
    wanted = LevelOptions(len(spec.atom_targets), len(spec.bond_targets), spec.constrained)
    if model.levels != wanted:
        raise ConfigError(f"the model's atom- and bond-level outputs {model.levels} are not the data's targets (atom "
                          f"{list(spec.atom_targets)}, bond {list(spec.bond_targets)}): build it with levels={wanted}")
UNCERTAINTY_DEFAULTS = {f.name: f.default for f in dataclasses.fields(UncertaintyConfig)}


def _backbone(plan: RunPlan) -> Optional[Pretrained]:
    """The backbone ``train.from_pretrained`` names (loaded once), checked to fit the plan's preset."""
    source = plan.train.from_pretrained
    backbone = plan.backbone if plan.backbone is not None or not source else get_pretrained(source)
    if backbone is not None:
        check_fits_backbone(plan.preset, backbone)
    return backbone


def _describe_split(split: Union[str, Split]) -> str:
    return "a given Split" if isinstance(split, Split) else repr(split)


def plan_of(plan: Union[RunPlan, Preset], train: Optional[TrainConfig], settings: Dict[str, Any], workflow: str,
            allowed: Sequence[str]) -> RunPlan:
    """The plan a workflow runs: ``plan`` itself, or for a :class:`~dgl_graphtx.models.Preset` the
    plan of it with ``train`` and the plan fields ``settings`` (the workflow's shorthand,
    ``train_and_evaluate(data, preset, config, split="scaffold")``); a plan given with settings
    of its own beside it is refused.

    Example:
        >>> from dgl_graphtx.models import get_preset
        >>> plan_of(get_preset("vanilla"), None, {"split": "scaffold"}, "train_and_evaluate", ["split"]).split
        'scaffold'
    """
    if isinstance(plan, RunPlan):
        if train is not None or settings:
            beside = ["train_config"] * (train is not None) + sorted(settings)
            raise ConfigError(f"{workflow} got a RunPlan and the settings {', '.join(beside)} beside it: give them to the "
                              "RunPlan (dataclasses.replace(plan, ...))")
        return plan
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise TypeError(f"{workflow}() got unexpected keyword argument(s) {', '.join(unknown)}; its settings are "
                        f"{', '.join(allowed)} (or a RunPlan)")
    fields: Dict[str, Any] = {**settings, **({"train": train} if train is not None else {})}
    return RunPlan(plan, **fields)
