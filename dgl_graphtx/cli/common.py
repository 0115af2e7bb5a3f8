"""Helpers shared by the ``dgl-graphtx`` sub-commands: option groups, target lists, table output."""
from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ..datasets import read_molecules, readers
from ..datasets.level_targets import ATOM_INDEXES, FORMAL_CHARGE
from ..datasets.molecule_columns import MoleculeColumns
from ..datasets.split_kinds import SPLIT_KINDS, SPLITS
from ..devices import resolve_device
from ..errors import ConfigError
from ..featurize import FeaturizerConfig
from ..featurize.config import ATOM_FEATURES
from ..inference import Predictor
from ..models import ModelConfig
from ..models.molecule_sets import BACKBONES, COMBINES, MoleculeSetOptions
from ..models.settings import DEFAULT_MODEL, TASKS
from ..models.variants import VARIANT_NAMES
from ..runs.config import SECTION_TYPES, DataConfig, EnsembleConfig
from ..runs.settings_files import coerce, field_types
from ..threads import DEFAULT_THREADS
from ..training import TrainConfig
from ..training.losses import LOSSES
from ..training.trainer import ON_NONFINITE
from ..uncertainty import METHODS as UNCERTAINTY_METHODS
from ..uncertainty import UncertaintyConfig
from ..uncertainty.config import CALIBRATION_BINS
from ..validation import check_number, describe_range

#: The ``--model`` choices: the variants of the registry.
MODELS = VARIANT_NAMES


def library_default(function: Callable[..., Any], parameter: str) -> Any:
    """The default of ``function``'s ``parameter``: what an option defaults to when it passes its
    value to that parameter, read from the library rather than restated.

    Example:
        >>> library_default(read_molecules, "smiles_col")
        'smiles'
    """
    return inspect.signature(function).parameters[parameter].default


#: The SMILES column of a molecule file when ``--smiles-col`` is not given (``train`` leaves it to
#: its configuration, so the option itself defaults to ``None``).
SMILES_COL = library_default(read_molecules, "smiles_col")

#: The device of the commands that load models to predict when ``--device`` is not given.
PREDICTOR_DEVICE = library_default(Predictor.__init__, "device")


def split_targets(text: str) -> List[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``.

    Example:
        >>> split_targets("logS, logP")
        ['logS', 'logP']
    """
    return [t.strip() for t in text.split(",") if t.strip()]


def bounded(kind: type, low: Optional[float] = None, high: Optional[float] = None, **flags: bool) -> Callable[[str], float]:
    """An argparse ``type`` parsing ``kind`` (int or float) and checking its range at parse time,
    for the options of the command line alone (``--nproc``); an option that sets a library
    setting takes :func:`field_type` instead, and the library checks it.

    Example:
        >>> bounded(int, 1)("8")
        8
        >>> bounded(float, 0, 10)("nan")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: must be a finite number in [0, 10], got 'nan'
    """
    allowed = describe_range(low, high, integer=kind is int, **flags)

    def parse(text: str) -> float:
        try:
            return check_number("value", kind(text), low, high, integer=kind is int, **flags)
        except (ValueError, ConfigError):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def field_type(cls: type, name: str, key: Optional[str] = None) -> Callable[[str], Any]:
    """An argparse ``type`` for an option that sets the field ``name`` of the settings dataclass
    ``cls``: the text converted to the field's type as config files and ``--set`` convert it
    (:func:`~dgl_graphtx.runs.settings_files.coerce`; ``key`` names it in errors). Its range and
    choices are the dataclass's, checked when the settings are made, and the rules between
    settings the run's plan's (:class:`~dgl_graphtx.runs.plan.RunPlan`): nothing is restated here.

    Example:
        >>> field_type(TrainConfig, "epochs")("7"), field_type(TrainConfig, "metrics")("mae, rmse")
        (7, ('mae', 'rmse'))
        >>> field_type(TrainConfig, "epochs", "train.epochs")("many")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: train.epochs must be an integer, got 'many'
    """
    hint = field_types(cls)[name]

    def parse(text: str) -> Any:
        try:
            return coerce(text, hint, key or name)
        except ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    parse.__name__ = name
    return parse


def setting_type(key: str) -> Callable[[str], Any]:
    """:func:`field_type` of the run setting ``key`` (``section.field`` of a run configuration, or
    ``section.subsection.field``).

    Example:
        >>> setting_type("uncertainty.coverage")("0.8"), setting_type("model.molecules.combine")("sum")
        (0.8, 'sum')
    """
    section, *path, name = key.split(".")
    cls = SECTION_TYPES[section]
    for part in path:
        cls = field_types(cls)[part]
    return field_type(cls, name, key)


def one_of(names: Sequence[str]) -> Dict[str, str]:
    """The ``metavar`` of an option whose value is one of ``names`` (the library checks it).

    Example:
        >>> one_of(("stop", "skip"))
        {'metavar': '{stop,skip}'}
    """
    return {"metavar": "{" + ",".join(names) + "}"}


def device_option(text: str) -> str:
    """An argparse ``type`` for the ``--device`` of the commands that predict: the device must
    exist now (checked before any work). ``train`` leaves its device to the run's plan.

    Example:
        >>> device_option("cpu")
        'cpu'
    """
    try:
        resolve_device(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


#: ``--threads`` of every command that trains or predicts.
THREADS_HELP = (f"torch intra-op CPU threads of this process (of each one with --nproc); loader workers use 1 each "
                f"(default: $OMP_NUM_THREADS if set, else {DEFAULT_THREADS}: measured fastest per process, and far "
                "faster as soon as anything else runs on the cores; see docs/training.md)")


#: Explicit ``train`` flags, the configuration field each one sets and its help (the value is
#: converted to the field's type by :func:`setting_type`; its range, choices and rules are the
#: library's, checked as a config file's are).
TRAIN_FLAGS: Tuple[Tuple[str, str, Dict[str, Any]], ...] = (
    ("--model", "preset.model", dict(**one_of(MODELS), help=f"attention variant (default: {DEFAULT_MODEL}, chosen by "
                                                         "measurement: docs/training.md)")),
    ("--preset", "preset.name", dict(help="preset of the model, with its paper's training recipe (listed below and by "
                                          "'dgl-graphtx presets'; default: the model's default preset)")),
    ("--atom-features", "featurizer.atom_features", dict(**one_of(ATOM_FEATURES), help="atom/bond featurizer (default: "
                                                                                        f"{FeaturizerConfig.atom_features})")),
    ("--task", "model.task", dict(**one_of(TASKS), help="multiclass: labels 0 .. K-1 per target, with --num-classes K "
                                                        f"(default: {ModelConfig.task})")),
    ("--num-classes", "model.num_classes", dict(help=f"classes per target of --task multiclass (default: {ModelConfig.num_classes})")),
    ("--positive-label", "data.positive_label", dict(metavar="VALUE", help="classification with text classes (e.g. BBB+/BBB-): "
                                                     "the value that becomes 1 (default: two values are mapped automatically and "
                                                     "the choice is printed)")),
    ("--pos-weight", "train.pos_weight", dict(metavar="auto|X", help="classification: weight of positive labels in the loss, "
                                              "'auto' = negatives/positives per target on the training split (default: none)")),
    ("--loss", "train.loss", dict(**one_of(LOSSES), help="auto: mse, bce or cross_entropy by task; regression also mae, huber, "
                                  "bounded_mse (labels like <5.2 or >7 penalise only the wrong side) "
                                  f"(default: {TrainConfig.loss})")),
    ("--metrics", "train.metrics", dict(help="comma-separated metrics to report; the first is watched by early stopping and "
                                        "the best checkpoint (regression: rmse,mae,r2; classification: rocauc,ap,logloss; multiclass: "
                                        "accuracy,f1,rocauc; default: all)")),
    ("--task-weights", "train.task_weights", dict(help="comma-separated loss weight per target (default: 1 each)")),
    ("--weight-col", "data.weight_col", dict(help="column of per-molecule loss weights (blank cells weigh 1)")),
    ("--cv", "data.cv", dict(help="cross-validation: each of K >= 3 folds tests once (OUT/fold_<k>/), validation is carved "
                             "from the other folds; writes OUT/oof_predictions.csv and mean +/- std per target, and with "
                             "--uncertainty CV+ intervals for 'predict --checkpoint OUT'")),
    ("--group-col", "data.group_col", dict(help="with --cv: column of groups that stay in one fold (instead of random or "
                                           "scaffold folds)")),
    ("--split", "data.split", dict(**one_of(SPLITS), help="; ".join(f"{k.name}: {k.summary}" for k in SPLIT_KINDS.values())
                                   + f" (default: {DataConfig.split}, fractions "
                                   + "/".join(f"{f:g}" for f in DataConfig.fractions) + ")")),
    ("--split-col", "data.split_col", dict(help="column saying train/valid/test for every row (instead of --split)")),
    ("--valid", "data.valid", dict(help="separate validation file (with --test; DATA is then the training part)")),
    ("--test", "data.test", dict(help="separate test file (with --valid)")),
    ("--seed", "train.seed", dict(help=f"seed of the split, initialisation and shuffling (default: {TrainConfig.seed})")),
    ("--epochs", "train.epochs", dict(help="default: the preset's recipe")),
    ("--batch-size", "train.batch_size", dict(help="default: the preset's recipe")),
    ("--lr", "train.lr", dict(help="peak learning rate (default: the preset's recipe)")),
    ("--patience", "train.patience", dict(help=f"early-stopping patience in epochs (default: {TrainConfig.patience}; 0: off)")),
    ("--device", "train.device", dict(help=f"auto, cpu, cuda, cuda:1 ... (default: {TrainConfig.device}; the device used is "
                                      "recorded in OUT/run.json)")),
    ("--subset", "data.subset", dict(help="qm9 only: train on this many molecules drawn with --seed")),
    ("--on-nonfinite", "train.on_nonfinite", dict(**one_of(ON_NONFINITE), help="NaN/inf loss or gradient: stop with an error "
                                                  "naming epoch and batch, or skip the step (default: "
                                                  f"{TrainConfig.on_nonfinite})")),
    ("--cache-dir", "data.cache_dir", dict(help="folder caching featurized molecules, keyed by file content and settings "
                                           "(default: $XDG_CACHE_HOME/dgl_graphtx/datasets, i.e. ~/.cache/dgl_graphtx/datasets)")),
    ("--no-cache", "data.cache", dict(action="store_const", const=False, help="featurize again on every run instead of "
                                      "reading the cache")),
    ("--threads", "train.threads", dict(metavar="N", help=THREADS_HELP)),
    ("--from-pretrained", "train.from_pretrained", dict(metavar="NAME|PATH", help="start from a pretrained backbone (a name "
                                                        "from 'dgl-graphtx pretrained', or a folder written by 'dgl-graphtx "
                                                        "pretrain') with a new head; its architecture, featurizer and relation "
                                                        "settings are used, and a --model or setting that contradicts them is "
                                                        "refused")),
    ("--freeze-backbone-epochs", "train.freeze_backbone_epochs", dict(help="with --from-pretrained: train only the head for "
                                                                      "the first K epochs, fewer than --epochs (default: "
                                                                      f"{TrainConfig.freeze_backbone_epochs})")),
    ("--backbone-lr-scale", "train.backbone_lr_scale", dict(help="learning rate of the backbone relative to --lr (default: "
                                                            f"{TrainConfig.backbone_lr_scale:g})")),
    ("--layer-lr-decay", "train.layer_lr_decay", dict(help="layer-wise learning-rate decay of the backbone in (0, 1]: block i "
                                                      "of L learns at g**(L+1-i) times the backbone's rate (default: "
                                                      f"{TrainConfig.layer_lr_decay:g}, off)")),
    ("--features-generators", "data.features_generators", dict(metavar="auto|none|LIST", help="molecule-level extra features "
                                                               "read by the head, comma-separated: rdkit2d, "
                                                               "morgan_counts[:radius=R:size=N], atom_pair_counts[:size=N], "
                                                               "avalon_counts[:size=N] (see docs/features.md); auto: "
                                                               "rdkit2d wherever --kernel auto fits the kernel, none otherwise "
                                                               "(default: auto)")),
    ("--kernel", "data.kernel", dict(metavar="auto|none|SPEC", help="the fingerprint kernel fitted beside the network and "
                                     "blended with it by a weight chosen on the validation part: auto (Morgan, atom-pair "
                                     "and Avalon counts, for molecule files with regression or binary targets), none, "
                                     "or count fingerprints joined by '+': morgan_counts[:radius=R:size=N], "
                                     "atom_pair_counts[:size=N], avalon_counts[:size=N] (see docs/kernel.md; default: auto)")),
    ("--features-cols", "data.features_cols", dict(help="comma-separated numeric input columns used as molecule-level extra "
                                                   "features (never a target); predict then needs them too")),
    ("--atom-properties", "data.atom_properties", dict(help="comma-separated SDF atom properties (atom.dprop.NAME lists) used "
                                                       "as atom-level extra features")),
    ("--smiles-cols", "data.smiles_cols", dict(metavar="A,B", help="several molecules per row (solute,solvent; drug,drug; the "
                                               "components of a mixture): their columns, in the order the model reads them "
                                               "(instead of --smiles-col; docs/atoms_and_rows.md)")),
    ("--reaction-cols", "data.reaction_cols", dict(metavar="COLS", help="columns holding reactions reactants>>products, each read "
                                                   "as two molecules (its reactant and product sides); with --smiles-cols, "
                                                   "listed there too")),
    ("--backbones", "model.molecules.backbones", dict(**one_of(BACKBONES), help="several molecules per row: one backbone for all, "
                                                      f"or one each (default: {MoleculeSetOptions.backbones})")),
    ("--combine", "model.molecules.combine", dict(**one_of(COMBINES), help="several molecules per row: their pooled encodings "
                                                  "side by side (the order matters), or summed (a mixture; weighted with "
                                                  f"--mixture-weights) (default: {MoleculeSetOptions.combine})")),
    ("--mixture-weights", "data.mixture_weights", dict(metavar="COLS", help="with --combine sum: one column per molecule holding "
                                                       "its weight in the row (mole fractions, ...)")),
    ("--atom-targets", "data.atom_targets", dict(metavar="A,B", help="atom-level targets: columns of per-atom lists ([0.1, -0.2, "
                                                 "nan]) or SD atom properties (atom.dprop.NAME); docs/atoms_and_rows.md")),
    ("--bond-targets", "data.bond_targets", dict(metavar="A,B", help="bond-level targets: columns of per-bond lists or SD bond "
                                                 "properties (bond.dprop.NAME)")),
    ("--atom-index", "data.atom_index", dict(**one_of(ATOM_INDEXES), help="how atom lists name atoms: input (the atom order of the "
                                             "SMILES as written) or map (atom-map numbers: value m is the atom mapped m+1) "
                                             f"(default: {DataConfig.atom_index})")),
    ("--atom-sums", "data.atom_sums", dict(metavar="T=SOURCE", help="constrain the predicted values of atom target T to add up to "
                                           f"the molecule's {FORMAL_CHARGE} or a column, e.g. q={FORMAL_CHARGE}")),
    ("--ensemble-size", "ensemble.size", dict(help="models per split with different seeds; predictions get a std column "
                                              f"(default: {EnsembleConfig.size})")),
    ("--replicates", "ensemble.replicates", dict(help="splits with seeds seed..seed+R-1; metrics as mean +/- std (default: "
                                             f"{EnsembleConfig.replicates})")),
    ("--uncertainty", "uncertainty.method", dict(**one_of(UNCERTAINTY_METHODS), help="uncertainty: a variance head (mve), an "
                                                 "evidential head, MC dropout, or the ensemble's spread (with --ensemble-size "
                                                 ">= 2); calibrated on molecules that neither trained nor chose the model, see "
                                                 f"docs/uncertainty.md (default: {UncertaintyConfig.method})")),
    ("--calibration-share", "uncertainty.calibration_share", dict(help="with --uncertainty and no --calibration file: share of "
                                                                  "the molecules carved from the "
                                                                  f"{UncertaintyConfig.calibration_from} part to calibrate "
                                                                  "(whole scaffolds/clusters for those splits) (default: "
                                                                  f"{UncertaintyConfig.calibration_share})")),
    ("--calibration-bins", "uncertainty.calibration_bins", dict(**one_of(CALIBRATION_BINS), help="with --uncertainty "
                                                                "(regression, one model): 'similarity' fits one conformal "
                                                                "quantile per third of the calibration molecules by "
                                                                "nearest-neighbour Tanimoto similarity to the training part, so "
                                                                "that molecules unlike the training set get wider intervals "
                                                                "(scaffold or series shift; stores the training fingerprints in "
                                                                "the checkpoint, ~0.25 kB a molecule); see docs/uncertainty.md "
                                                                f"(default: {UncertaintyConfig.calibration_bins})")),
    ("--calibration", "data.calibration", dict(metavar="FILE", help="with --uncertainty: a labelled file of molecules that "
                                               "calibrate instead of a carved share (as chemprop's calibration path); its "
                                               "molecules that are also in the run's data are left out, with a warning")),
    ("--coverage", "uncertainty.coverage", dict(help="with --uncertainty: coverage of the conformal prediction intervals "
                                                f"(default: {UncertaintyConfig.coverage})")),
    ("--mc-samples", "uncertainty.mc_samples", dict(help=f"stochastic passes of MC dropout (default: {UncertaintyConfig.mc_samples})")),
)


def add_train_options(parser: argparse.ArgumentParser) -> None:
    """Model, split and optimisation options of ``train``: ``--config``, ``--set`` and the explicit
    flags of :data:`TRAIN_FLAGS` (which default to ``None`` so that only flags actually given
    override the config file)."""
    parser.add_argument("--config", help="TOML or YAML file with any of the sections preset, data, model, featurizer, relation, train")
    parser.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE", default=[],
                        help="override config fields, e.g. model.num_layers=6 model.moire.focus=laplacian relation=hops=3")
    for flag, key, kwargs in TRAIN_FLAGS:
        add_setting_option(parser, flag, key, kwargs)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or per-epoch progress lines")


def add_setting_option(parser: argparse.ArgumentParser, flag: str, key: str, kwargs: Dict[str, Any]) -> None:
    """The option ``flag`` of :data:`TRAIN_FLAGS` setting ``key`` (``None`` unless given, so that
    only flags actually given override the config file)."""
    typed: Dict[str, Any] = {} if "action" in kwargs else {"type": setting_type(key)}
    parser.add_argument(flag, default=None, **typed, **kwargs)


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` of the commands that predict (``train`` has it among :data:`TRAIN_FLAGS`);
    the CLI's entry point applies it (and :func:`~dgl_graphtx.threads.resolve_threads` checks it)
    before the command runs."""
    parser.add_argument("--threads", type=field_type(TrainConfig, "threads"), default=None, metavar="N", help=THREADS_HELP)


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """How to read molecule files: ``--smiles-col`` and ``--delimiter``."""
    parser.add_argument("--smiles-col", default=None, help=f"SMILES column of a CSV/TSV (default: {SMILES_COL})")
    parser.add_argument("--delimiter", default=None, type=parse_delimiter,
                        help="delimiter of a table: one character, 'tab' or '\\t' (default: sniffed)")


def add_row_options(parser: argparse.ArgumentParser) -> None:
    """``--smiles-cols``, ``--reaction-cols`` and ``--mixture-weights`` of the commands that read
    molecules for a model (default: the columns the model was trained with)."""
    parser.add_argument("--smiles-cols", type=split_targets, default=None, metavar="A,B",
                        help="a model of several molecules per row: the columns holding them, in the order it reads them "
                             "(default: those it was trained with)")
    parser.add_argument("--reaction-cols", type=split_targets, default=None, metavar="COLS",
                        help="columns holding reactions reactants>>products (default: as trained)")
    parser.add_argument("--mixture-weights", type=split_targets, default=None, metavar="COLS",
                        help="columns holding each molecule's mixture weight (default: as trained)")


def molecule_columns(args: argparse.Namespace) -> Optional[MoleculeColumns]:
    """The molecule columns ``args`` name (:func:`add_row_options`), or ``None`` for the model's own.

    Example:
        >>> from types import SimpleNamespace
        >>> molecule_columns(SimpleNamespace(smiles_cols=["a", "b"], reaction_cols=None, mixture_weights=None)).names
        ['a', 'b']
    """
    given = (args.smiles_cols, args.reaction_cols, args.mixture_weights)
    if all(value is None for value in given):
        return None
    return MoleculeColumns(*(tuple(value or ()) for value in given))


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device`` of the commands that load models to predict (``train`` has it among :data:`TRAIN_FLAGS`)."""
    parser.add_argument("--device", type=device_option, default=PREDICTOR_DEVICE,
                        help=f"auto, cpu, cuda, cuda:1 ... (default: {PREDICTOR_DEVICE})")


def add_logging_options(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` / ``--verbose``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors (no progress)")
    group.add_argument("-v", "--verbose", action="store_true", help="debug messages too")


def verbosity(args: argparse.Namespace) -> int:
    """-1 (quiet), 0 or 1 (verbose) from :func:`add_logging_options` flags."""
    return -1 if getattr(args, "quiet", False) else 1 if getattr(args, "verbose", False) else 0


def parse_delimiter(text: str) -> str:
    """``--delimiter``'s value, as :func:`~dgl_graphtx.datasets.readers.parse_delimiter` reads it.

    Example:
        >>> parse_delimiter("tab"), parse_delimiter(";")
        ('\\t', ';')
    """
    try:
        return readers.parse_delimiter(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def explicit_train_flags(args: argparse.Namespace) -> Dict[str, Any]:
    """The configuration fields set by flags actually given on the command line.

    Example:
        >>> from dgl_graphtx.cli import build_parser
        >>> explicit_train_flags(build_parser().parse_args(["train", "d.csv", "--targets", "y", "--out", "o", "--epochs", "3"]))
        {'data.path': 'd.csv', 'data.targets': ['y'], 'train.epochs': 3}
    """
    flags: Dict[str, Any] = {}
    if args.data is not None:
        flags["data.path"] = args.data
    if args.targets is not None:
        flags["data.targets"] = split_targets(args.targets)
    if args.smiles_col is not None:
        flags["data.smiles_col"] = args.smiles_col
    if args.delimiter is not None:
        flags["data.delimiter"] = args.delimiter
    for flag, key, _ in TRAIN_FLAGS:
        value = getattr(args, flag.lstrip("-").replace("-", "_"))
        if value is not None:
            flags[key] = value
    if args.no_progress or args.quiet:
        flags["train.progress"] = False
    return flags


def print_table(frame: pd.DataFrame) -> None:
    """Print a prediction table; molecules without an error or warning show empty cells there."""
    with pd.option_context("display.max_rows", 200, "display.width", 160, "display.max_colwidth", 60):
        print(frame.fillna({"error": "", "warning": ""}).to_string(index=False))


def without_option(argv: Sequence[str], option: str) -> List[str]:
    """``argv`` without ``option VALUE`` / ``option=VALUE``.

    Example:
        >>> without_option(["train", "x.csv", "--nproc", "2", "--epochs=3"], "--nproc")
        ['train', 'x.csv', '--epochs=3']
    """
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token == option:
            skip = True
        elif not token.startswith(option + "="):
            out.append(token)
    return out
