"""Everything a training run needs, in one resolved configuration, from layered sources.

Resolution order (later wins), the same for the command line and for Python:

1. dataclass defaults (:class:`~dgl_graphtx.models.ModelConfig`,
   :class:`~dgl_graphtx.featurize.FeaturizerConfig`, :class:`~dgl_graphtx.relation_graph.RelationConfig`,
   :class:`~dgl_graphtx.training.TrainConfig`, :class:`DataConfig`);
2. the preset chosen by ``preset.model`` / ``preset.name`` (model, featurizer and relation settings,
   and its training recipe ``Preset.train``);
3. a config file (TOML or YAML) with the sections ``preset``, ``data``, ``model``, ``featurizer``,
   ``relation``, ``train``, ``ensemble``, ``uncertainty``;
4. ``--set section.field=value`` overrides, in the order given;
5. explicit command-line flags (``--epochs``, ``--model``, ...).

A few fields are derived and cannot be set: ``model.variant`` (= ``preset.model``),
``model.num_tasks`` (= the number of targets), ``model.atom_features`` and the feature sizes
(from the featurizer); ``model.molecule_features`` and ``model.atom_extra_features`` follow the
extra features of ``data`` and are recorded with their resolved widths. Linked pairs follow whichever side was set: ``model.virtual_node`` /
``relation.virtual_node``, ``model.rwse_steps`` / ``featurizer.rwse_steps``; setting both to
different values is an error. :meth:`RunConfig.save` writes the resolved result as YAML, and
loading that file reproduces the run.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from ..datasets.cache import default_cache_dir
from ..datasets.extra_features import ExtraFeatures
from ..datasets.level_targets import LevelTargets
from ..datasets.molecule_columns import MoleculeColumns
from ..datasets.readers import parse_delimiter
from ..datasets.sharded_store import is_store
from ..datasets.split_kinds import split_kind
from ..datasets.splits import DEFAULT_FRACTIONS, check_fractions
from ..errors import ConfigError
from ..featurize import FeaturizerConfig, MoleculeFeaturizer, SizeLimits
from ..models import ModelConfig, Preset, get_preset
from ..models.config import upgrade_model_dict
from ..models.presets import PRESETS, preset_name
from ..models.settings import DEFAULT_MODEL
from ..models.variants import VARIANT_SPECS, option_sections
from ..relation_graph import RelationConfig
from ..threads import set_threads
from ..training import TrainConfig
from ..uncertainty import UncertaintyConfig
from .settings_files import get_dotted as _get
from .settings_files import merge as _merge
from .settings_files import parse_set_items, read_settings_file, section_dict
from .settings_files import plain as _plain
from .settings_files import set_dotted as _set

PathLike = Union[str, Path]
SECTIONS = ("preset", "data", "model", "featurizer", "relation", "train", "ensemble", "uncertainty")
#: Model fields computed from other settings (never read from files or ``--set``).
DERIVED_MODEL_FIELDS = ("variant", "num_tasks", "atom_features", "atom_feature_dims", "bond_feature_dims", "bond_radices",
                        "uncertainty_head", "kernel_references", "kernel_size", "kernel_probabilities",
                        "kernel_logit_blend", "kernel_segments")
#: Model sections, and fields of sections, set from ``data``'s molecule columns and atom and bond
#: targets (never read from files or ``--set``, and left out of config.yaml).
DERIVED_MODEL_SECTIONS = {"molecules": ("count", "weighted"), "levels": ("atom_tasks", "bond_tasks", "atom_sums")}
#: Model fields resolved from the extra features of ``data`` and recorded in config.yaml: a value
#: read back must be the resolved one (or 0, which config.yaml files written before recorded).
EXTRA_FEATURE_FIELDS = ("molecule_features", "atom_extra_features")
#: The fingerprint kernel of ``data.kernel=auto`` (see :mod:`dgl_graphtx.models.kernel`): the mean
#: of the Tanimoto similarities of Morgan, atom-pair and Avalon counts (chosen on the development
#: halves, docs/decisions/kernel-fingerprints.md; Morgan counts alone before).
DEFAULT_KERNEL = "morgan_counts:radius=2:size=2048+atom_pair_counts:size=2048+avalon_counts:size=1024"
#: The extra features of ``data.features_generators=auto`` where the kernel's ``auto`` applies:
#: RDKit's 2-D descriptors (chosen on the development halves, docs/decisions/descriptors-beside-kernel.md).
DEFAULT_GENERATORS = ("rdkit2d",)
AUTO, NONE = "auto", "none"
#: ``(a, b)``: fields that must agree; the one the user set wins, ``a`` when neither was set.
LINKED_FIELDS = (("model.virtual_node", "relation.virtual_node"), ("model.rwse_steps", "featurizer.rwse_steps"))


@dataclass
class PresetChoice:
    """Which preset seeds the model, featurizer and relation settings.

    Example:
        >>> PresetChoice("moire", "3d").name
        '3d'
    """

    model: str = DEFAULT_MODEL
    name: Optional[str] = None

    def __post_init__(self) -> None:
        preset_name(self.model, self.name)


@dataclass
class DataConfig:
    """Where the molecules and labels come from and how they are split.

    Args:
        path: the training file (CSV/TSV, gzipped or not, SDF, ``.smi``).
        targets: target columns or SD properties.
        smiles_col: SMILES column of a table.
        delimiter: table delimiter: one character, or ``tab`` (sniffed when ``None``).
        split: ``random``, ``scaffold``, ``kmeans`` (k-means clusters of Morgan fingerprints) or
            ``kennard_stone`` (on the fingerprints; deterministic) (ignored when ``split_col`` or ``valid``/``test`` are given).
        fractions: train/valid/test fractions of a random or scaffold split.
        split_col: column saying ``train``/``valid``/``test`` for every row.
        valid, test: separate validation and test files (given together; ``path`` is then all training).
        calibration: a separate file of labelled molecules that calibrate the uncertainty
            (``--calibration``) instead of a share carved from the split (``uncertainty.calibration_share``).
        cache_dir: folder caching featurized molecules (default: the user's cache,
            :func:`~dgl_graphtx.datasets.cache.default_cache_dir`).
        cache: cache featurized molecules at all (``False``: featurize on every run; ``--no-cache``).
        subset: with ``path="qm9"`` (QM9 from its DFT geometries, needs ``dgl_graphtx[qm9]``),
            train on this many molecules drawn with ``train.seed``.
        positive_label: classification with text classes: the value that becomes 1 (two text
            values are otherwise mapped automatically, and the choice is logged).
        cv: cross-validation with this many folds (>= 3; 0: off): fold ``f`` is the test part, the
            validation part is carved from the other folds; folds are random, by scaffold or
            k-means cluster (``split``), or by ``group_col``.
        group_col: column of group names that cross-validation folds keep together.
        weight_col: column of per-molecule loss weights (blank: 1).
        features_generators: molecule-level extra feature generators (``rdkit2d``,
            ``morgan_counts``; see docs/features.md), ``none``, or ``auto`` (the default): RDKit's
            2-D descriptors (:data:`DEFAULT_GENERATORS`) wherever the fingerprint kernel's
            ``auto`` applies and the readout reads them (not ``atomwise``), none otherwise;
            :func:`resolve_run_config` resolves ``auto``.
        features_cols: input columns (or SD properties) used as molecule-level extra features.
        atom_properties: SDF atom properties used as atom-level extra features.
        features_scaling: ``standard`` or ``robust`` scaling of the extra features.
        max_atoms: the atom budget: a molecule with more atoms is left out and reported with its
            row before its relation graph is built (``predict --max-atoms`` has the same default).
        kernel: the fingerprint kernel fitted beside the network (:mod:`dgl_graphtx.models.kernel`):
            ``auto`` (:data:`DEFAULT_KERNEL`: Morgan counts of radius 2 in 2,048 bins, atom-pair
            counts in 2,048 and Avalon counts in 1,024, for a molecule file with regression or
            binary-classification targets, unweighted and uncensored; none otherwise), a spec of
            count fingerprints joined by ``+`` (``morgan_counts``, ``atom_pair_counts``,
            ``avalon_counts``), or ``none``.
        smiles_cols: several molecules per row: the columns holding them, in the order the model
            reads them (instead of ``smiles_col``; see :mod:`~dgl_graphtx.datasets.molecule_columns`).
        reaction_cols: the molecule columns holding reactions ``reactants>>products``, each read as
            two molecules (its reactant and product sides).
        mixture_weights: one column per molecule of a row holding its weight, for a model that
            sums its molecules' encodings (``model.molecules.combine=sum``) weighted.
        atom_targets: atom-level targets: columns of per-atom lists, or SD atom properties (see
            :mod:`~dgl_graphtx.datasets.level_targets`).
        bond_targets: bond-level targets: columns of per-bond lists, or SD bond properties.
        atom_index: how list positions name atoms: ``input`` (the order of the SMILES as written)
            or ``map`` (atom-map numbers).
        atom_sums: ``TARGET=SOURCE`` items: the predicted values of an atom target add up to the
            molecule's ``formal_charge`` or to column ``SOURCE``.

    Example:
        >>> DataConfig(path="d.csv", targets=("y",), valid="v.csv", test="t.csv").predefined
        True
    """

    path: Optional[str] = None
    targets: Tuple[str, ...] = ()
    smiles_col: str = "smiles"
    delimiter: Optional[str] = None
    split: str = "random"
    fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS
    split_col: Optional[str] = None
    valid: Optional[str] = None
    test: Optional[str] = None
    calibration: Optional[str] = None
    cache_dir: Optional[str] = None
    cache: bool = True
    subset: Optional[int] = None
    positive_label: Optional[str] = None
    cv: int = 0
    group_col: Optional[str] = None
    weight_col: Optional[str] = None
    features_generators: Tuple[str, ...] = (AUTO,)
    features_cols: Tuple[str, ...] = ()
    atom_properties: Tuple[str, ...] = ()
    features_scaling: str = "standard"
    max_atoms: int = SizeLimits.max_atoms
    kernel: str = AUTO
    smiles_cols: Tuple[str, ...] = ()
    reaction_cols: Tuple[str, ...] = ()
    mixture_weights: Tuple[str, ...] = ()
    atom_targets: Tuple[str, ...] = ()
    bond_targets: Tuple[str, ...] = ()
    atom_index: str = "input"
    atom_sums: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.delimiter is not None:
            self.delimiter = parse_delimiter(self.delimiter)
        if len(self.features_generators) > 1 and set(self.features_generators) & {AUTO, NONE}:
            raise ConfigError(f"data.features_generators={','.join(self.features_generators)}: give auto, none, or a list "
                              "of generators, not a mix")
        ExtraFeatures(self._generators, self.features_cols, self.atom_properties,
                      scaling=self.features_scaling)  # checks the generator specs and the scaling
        self.molecule_columns  # checks the molecule columns, reactions and mixture weights
        self.level_targets  # checks the atom and bond targets and their sums
        if self.kernel not in (AUTO, NONE):
            ExtraFeatures(kernel=self.kernel)  # checks the spec
            if not self.targets and self.level_targets.any:
                raise ConfigError(f"the fingerprint kernel (--kernel {self.kernel}) predicts molecule-level targets, and the run "
                                  "has atom or bond targets only: drop --kernel")
        if self.smiles_cols and self.smiles_col != DataConfig.smiles_col:
            raise ConfigError(f"give the molecule column once: --smiles-col {self.smiles_col} or --smiles-cols "
                              f"{','.join(self.smiles_cols)} (several molecules per row), not both")
        named = [n for n in (*self.level_targets.atom_targets, *self.level_targets.bond_targets) if n in self.targets]
        if named:
            raise ConfigError(f"{named} named as molecule target(s) (--targets) and as atom or bond target(s) "
                              "(--atom-targets, --bond-targets): name each target at one level")
        SizeLimits(max_atoms=self.max_atoms)  # checks the budget
        if self.cache_dir is not None and not self.cache:
            raise ConfigError("data.cache_dir (--cache-dir) names a cache folder but data.cache is off (--no-cache): give one of them")
        if self.subset is not None and not self.is_qm9:
            raise ConfigError("data.subset (--subset) applies to the qm9 data source only")
        if self.subset is not None and self.subset < 1:
            raise ConfigError(f"data.subset must be >= 1, got {self.subset}")
        if self.is_qm9 and (self.valid is not None or self.split_col is not None):
            raise ConfigError("the qm9 data source is split with data.split (random or scaffold), not --valid/--test or --split-col")
        split_kind(self.split)
        check_fractions(self.fractions)
        if (self.valid is None) != (self.test is None):
            raise ConfigError("give both a validation and a test file (--valid and --test), or neither")
        if self.split_col is not None and self.valid is not None:
            raise ConfigError("give either a split column (--split-col) or separate --valid/--test files, not both")
        if self.is_qm9 and self.calibration is not None:
            raise ConfigError("the qm9 data source calibrates on a share of its molecules (--calibration-share), not --calibration")
        if self.group_col is not None and not self.cv:
            raise ConfigError("--group-col groups the folds of a cross-validation; give --cv K too")

    @property
    def is_qm9(self) -> bool:
        """Whether the data is QM9 from :func:`~dgl_graphtx.datasets.qm9` (``path == "qm9"``)."""
        return self.path == "qm9"

    @property
    def training_path(self) -> str:
        """``path``, or a :class:`~dgl_graphtx.errors.ConfigError` when the run names no training data.

        Example:
            >>> DataConfig(path="d.csv").training_path
            'd.csv'
        """
        if self.path is None:
            raise ConfigError("no training data: give the DATA file (or data.path in --config)")
        return self.path

    @functools.cached_property
    def molecule_columns(self) -> MoleculeColumns:
        """The columns holding each row's molecules (checked once, when the settings are made)."""
        return MoleculeColumns(self.smiles_cols, self.reaction_cols, self.mixture_weights)

    @functools.cached_property
    def level_targets(self) -> LevelTargets:
        """The atom- and bond-level targets these settings ask for (checked once)."""
        return LevelTargets(self.atom_targets, self.bond_targets, self.atom_index, self.atom_sums)

    @property
    def _generators(self) -> Tuple[str, ...]:
        """The generators named (``auto`` and ``none`` name none)."""
        return () if self.features_generators in ((AUTO,), (NONE,)) else self.features_generators

    @functools.cached_property
    def extra_features(self) -> ExtraFeatures:
        """The extra features these settings ask for, once ``auto`` is resolved (see
        :func:`resolve_run_config`).

        Example:
            >>> DataConfig(features_generators=("rdkit2d",)).extra_features.generators
            ('rdkit2d',)
        """
        if self.features_generators == (AUTO,):
            raise ConfigError("data.features_generators=auto depends on the run's task; resolve it with resolve_run_config, "
                              "or name the generators (or none)")
        return ExtraFeatures(self._generators, self.features_cols, self.atom_properties, scaling=self.features_scaling)

    @property
    def dataset_cache(self) -> Optional[str]:
        """The folder featurized molecules are cached in: ``cache_dir``, else the user's cache
        folder, or ``None`` with ``cache=False``.

        Example:
            >>> DataConfig(cache_dir="c").dataset_cache, DataConfig(cache=False).dataset_cache
            ('c', None)
        """
        if not self.cache:
            return None
        return self.cache_dir if self.cache_dir is not None else str(default_cache_dir())

    @property
    def cv_valid_share(self) -> float:
        """The validation share of the molecules outside a cross-validation's test fold: the
        validation fraction among the training and validation fractions (1/9 for 0.8/0.1/0.1).

        Example:
            >>> round(DataConfig(fractions=(0.7, 0.2, 0.1)).cv_valid_share, 4)
            0.2222
        """
        train, valid, _ = self.fractions
        if train + valid <= 0:
            raise ConfigError(f"data.fractions {self.fractions} leave nothing to train and validate on")
        return valid / (train + valid)

    @property
    def predefined(self) -> bool:
        """Whether the split comes from the data (a split column or separate files)."""
        return self.split_col is not None or self.valid is not None


@dataclass
class EnsembleConfig:
    """Ensembles and replicates (see :func:`~dgl_graphtx.runs.ensemble.train_ensemble`).

    Args:
        size: models per split, each with its own seed; predictions are their mean and spread.
        replicates: splits (seeds ``train.seed + r``); metrics are reported as mean and std.

    Example:
        >>> EnsembleConfig(size=5).replicates
        1
    """

    size: int = 1
    replicates: int = 1

    def __post_init__(self) -> None:
        if self.size < 1 or self.replicates < 1:
            raise ConfigError(f"ensemble.size and ensemble.replicates must be >= 1, got {self.size} and {self.replicates}")

    @property
    def single(self) -> bool:
        """One model on one split (a plain run)."""
        return self.size == 1 and self.replicates == 1


@dataclass
class RunConfig:
    """A fully resolved run: preset choice, data, model, featurizer, relation and training settings.

    Example:
        >>> run = resolve_run_config(overrides=["preset.model=grpe", "model.num_layers=2", "relation=hops=3", "data.targets=y"])
        >>> run.model.num_layers, str(run.relation), run.model.num_tasks
        (2, 'hops=3+vn', 1)
    """

    preset: PresetChoice
    data: DataConfig
    model: ModelConfig
    featurizer: FeaturizerConfig
    relation: RelationConfig
    train: TrainConfig
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    uncertainty: UncertaintyConfig = field(default_factory=UncertaintyConfig)

    @property
    def kernel(self) -> str:
        """The fingerprint kernel's spec ``data.kernel`` resolves to (``""``: no kernel): ``auto`` is
        :data:`DEFAULT_KERNEL` for a molecule file with molecule-level regression or
        binary-classification targets, unweighted and uncensored, of one molecule per row, and no
        kernel otherwise (a spec fits it on rows of several molecules too: the fingerprint of all
        the row's molecules together).

        Example:
            >>> resolve_run_config(overrides=["data.path=d.csv", "data.targets=y"]).kernel
            'morgan_counts:radius=2:size=2048+atom_pair_counts:size=2048+avalon_counts:size=1024'
            >>> resolve_run_config(overrides=["data.path=qm9", "data.targets=homo"]).kernel
            ''
        """
        data = self.data
        if data.kernel == NONE:
            return ""
        if data.kernel != AUTO:
            return data.kernel
        return DEFAULT_KERNEL if _defaults_apply(data, self.model.task, self.train.loss) else ""

    @property
    def extra_features(self) -> ExtraFeatures:
        """The extra features the run's data gets: ``data``'s, with the fingerprints of :attr:`kernel`."""
        return dataclasses.replace(self.data.extra_features, kernel=self.kernel)

    def with_threads(self, threads: Optional[int]) -> "RunConfig":
        """The run with ``train.threads`` set to ``threads``.

        Example:
            >>> resolve_run_config(overrides=["data.targets=y"]).with_threads(3).train.threads
            3
        """
        return dataclasses.replace(self, train=dataclasses.replace(self.train, threads=threads))

    def as_preset(self) -> Preset:
        """The model, featurizer and relation settings as a :class:`~dgl_graphtx.models.Preset`."""
        return Preset(self.model, self.featurizer, self.relation)

    def with_absolute_paths(self) -> "RunConfig":
        """The run with its file paths made absolute, so that its saved config works from anywhere.

        Example:
            >>> run = resolve_run_config(overrides=["data.path=d.csv", "data.targets=y"]).with_absolute_paths()
            >>> Path(run.data.path).is_absolute()
            True
        """
        data = self.data
        data = dataclasses.replace(data, path=data.path if data.is_qm9 else _absolute(data.path), valid=_absolute(data.valid),
                                   test=_absolute(data.test), calibration=_absolute(data.calibration),
                                   cache_dir=_absolute(data.cache_dir))
        return dataclasses.replace(self, data=data)

    def to_dict(self) -> Dict[str, Any]:
        """Plain nested dict in the file layout (derived model fields left out; tuples as lists)."""
        model = self.model.to_dict()
        for name in DERIVED_MODEL_FIELDS:
            model.pop(name)
        for section, names in DERIVED_MODEL_SECTIONS.items():
            model[section] = {k: v for k, v in model[section].items() if k not in names}
            if not model[section]:
                model.pop(section)
        out = {
            "preset": dataclasses.asdict(self.preset),
            "data": dataclasses.asdict(self.data),
            "model": model,
            "featurizer": self.featurizer.to_dict(),
            "relation": dataclasses.asdict(self.relation),
            "train": dataclasses.asdict(self.train),
            "ensemble": dataclasses.asdict(self.ensemble),
            "uncertainty": dataclasses.asdict(self.uncertainty),
        }
        return _plain(out)

    def save(self, path: PathLike) -> Path:
        """Write the resolved configuration as YAML (readable by :func:`load_config_file`).

        Example:
            >>> import tempfile
            >>> run = resolve_run_config(overrides=["data.targets=y", "train.epochs=3"])
            >>> path = run.save(tempfile.mkdtemp() + "/config.yaml")
            >>> resolve_run_config(path) == run
            True
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = "# dgl-graphtx resolved run configuration; reproduce with: dgl-graphtx train --config THIS_FILE --out DIR\n"
        path.write_text(header + yaml.safe_dump(self.to_dict(), sort_keys=False))
        return path


# -- reading (the generic layer is dgl_graphtx.runs.settings_files) --------------------------------
def _absolute(path: Optional[str]) -> Optional[str]:
    """``path`` made absolute (``None`` stays ``None``)."""
    return None if path is None else str(Path(path).resolve())


def load_config_file(path: PathLike) -> Dict[str, Any]:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file of run sections into a nested dict.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "run.toml"
        >>> _ = p.write_text('[model]\\nnum_layers = 6\\n[model.moire]\\nfocus = "laplacian"\\n')
        >>> load_config_file(p)
        {'model': {'num_layers': 6, 'moire': {'focus': 'laplacian'}}}
    """
    return read_settings_file(path, SECTIONS)


#: The settings dataclass of each section.
SECTION_TYPES = {"preset": PresetChoice, "data": DataConfig, "model": ModelConfig, "featurizer": FeaturizerConfig,
                  "relation": RelationConfig, "train": TrainConfig, "ensemble": EnsembleConfig,
                  "uncertainty": UncertaintyConfig}


def _refuse_derived(cls: type, name: str, key: str) -> None:
    """Model fields computed from other settings cannot be set."""
    section = key.split(".")[-2] if key.count(".") >= 2 else None
    if section in DERIVED_MODEL_SECTIONS and key.startswith("model.") and name in DERIVED_MODEL_SECTIONS[section]:
        raise ConfigError(f"{key} is derived from the data (data.smiles_cols, data.reaction_cols, data.mixture_weights, "
                          "data.atom_targets, data.bond_targets, data.atom_sums) and cannot be set")
    if cls is ModelConfig and name in DERIVED_MODEL_FIELDS:
        source = {"variant": "preset.model", "num_tasks": "data.targets", "uncertainty_head": "uncertainty.method",
                  "kernel_references": "the fitted kernel (data.kernel)", "kernel_size": "data.kernel",
                  "kernel_probabilities": "the fitted kernel (data.kernel) and the task",
                  "kernel_logit_blend": "the fitted kernel (data.kernel) and the task"}.get(name, "the featurizer")
        raise ConfigError(f"{key} is derived from {source} and cannot be set")


def _section_dict(cls: type, values: Mapping[str, Any], prefix: str, origin: str) -> Dict[str, Any]:
    """``values`` (from ``origin``) checked against the fields of ``cls`` and coerced; derived model fields refused."""
    return section_dict(cls, values, prefix, _refuse_derived, origin)


def parse_overrides(items: Sequence[str]) -> Dict[str, Any]:
    """``["model.num_layers=6", "relation=hops=3"]`` -> a nested dict of (still textual) values.

    Example:
        >>> parse_overrides(["model.moire.focus=laplacian", "relation=hops=3"])
        {'model': {'moire': {'focus': 'laplacian'}}, 'relation': 'hops=3'}
    """
    return parse_set_items(items, SECTIONS, whole=("relation",))


def _relation_dict(value: Any, origin: str) -> Dict[str, Any]:
    """A relation section given as a spec string (``"hops=3"``) or as a table of fields."""
    if isinstance(value, str):
        parsed = RelationConfig.parse(value)
        out = {"mode": parsed.mode, "hops": parsed.hops, "radius": parsed.radius}
        if parsed.virtual_node:
            out["virtual_node"] = True
        return out
    return _section_dict(RelationConfig, value, "relation", origin)


def _normalise(layer: Mapping[str, Any], origin: str) -> Dict[str, Dict[str, Any]]:
    """One source's sections, checked and coerced."""
    out: Dict[str, Dict[str, Any]] = {}
    for section, values in layer.items():
        if section not in SECTIONS:
            raise ConfigError(f"unknown section {section!r} in {origin}; sections are {list(SECTIONS)}")
        if section == "relation":
            out[section] = _relation_dict(values, origin)
        elif section == "model" and isinstance(values, Mapping):  # either layout: before model.gps too
            out[section] = _section_dict(ModelConfig, upgrade_model_dict(values), section, origin)
        else:
            out[section] = _section_dict(SECTION_TYPES[section], values, section, origin)
    return out


def check_active_sections(model: Mapping[str, Any], variant: str, base: Mapping[str, Any]) -> None:
    """Refuse settings of another variant's option section (``model.moire.*`` on a Gradformer),
    and GPS block settings (``model.gps.*``) on a model of another architecture: they would be
    ignored. Values equal to the preset's (a saved ``config.yaml`` holds every section) are accepted.

    Example:
        >>> check_active_sections({"moire": {"focus": "laplacian"}}, "gradformer", {"moire": {"focus": "cauchy"}})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: model.moire.focus=laplacian is a setting of the moire model, but the active model is gradformer ...
        >>> preset = {"architecture": None, "gps": {"norm": "batch"}}
        >>> check_active_sections({"gps": {"norm": "layer"}}, "moire", preset)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: model.gps.norm=layer is a setting of the GPS architecture, but the model's architecture is ...
    """
    sections = option_sections()
    for section, values in model.items():
        if section == variant or section not in sections or not isinstance(values, Mapping):
            continue
        for name, value in _changed_settings(values, base.get(section, {})):
            raise ConfigError(f"model.{section}.{name}={value} is a setting of the {section} model, but the active model "
                              f"is {variant} (preset.model / --model); drop it or train with --model {section}")
    architecture = model.get("architecture", base.get("architecture")) or VARIANT_SPECS[variant].architecture
    gps = model.get("gps")
    if architecture == "gps" or not isinstance(gps, Mapping):
        return
    for name, value in _changed_settings(gps, base.get("gps", {})):
        raise ConfigError(f"model.gps.{name}={value} is a setting of the GPS architecture, but the model's architecture is "
                          f"{architecture} (model.architecture, or the variant's own); drop it or set model.architecture=gps")


def _changed_settings(values: Mapping[str, Any], preset: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    """The ``(name, value)`` pairs of ``values`` that differ from the ``preset``'s."""
    return [(name, value) for name, value in values.items() if value != preset.get(name)]


def resolve_run_config(
    config_file: Optional[PathLike] = None,
    overrides: Sequence[str] = (),
    flags: Optional[Mapping[str, Any]] = None,
) -> RunConfig:
    """Resolve a run's configuration: defaults < preset < ``config_file`` < ``overrides`` < ``flags``.

    Args:
        config_file: TOML or YAML file with any of the sections ``preset``, ``data``, ``model``,
            ``featurizer``, ``relation``, ``train`` (``relation`` may be a spec string).
        overrides: ``section.field=value`` strings (nested options too: ``model.moire.focus=cauchy``;
            ``relation=hops=3``; lists comma-separated: ``data.targets=a,b``).
        flags: explicit command-line settings as ``{"section.field": value}``.

    Example:
        >>> run = resolve_run_config(overrides=["preset.model=moire", "train.epochs=5", "data.targets=a,b"],
        ...                          flags={"train.epochs": 7})
        >>> run.model.variant, run.model.readout, run.train.epochs, run.model.num_tasks
        ('moire', 'max', 7, 2)
    """
    layers: List[Dict[str, Any]] = []
    if config_file is not None:
        layers.append(_normalise(load_config_file(config_file), str(config_file)))
    if overrides:
        layers.append(_normalise(parse_overrides(overrides), "--set"))
    flag_tree: Dict[str, Any] = {}
    for dotted, value in (flags or {}).items():
        *path, name = dotted.split(".")
        node = flag_tree
        for part in path:
            node = node.setdefault(part, {})
        node[name] = value
    if flag_tree:
        layers.append(_normalise(flag_tree, "command-line flags"))
    user = _merge_layers(layers)

    choice = PresetChoice(**user.get("preset", {}))
    base = get_preset(choice.model, choice.name)
    check_active_sections(user.get("model", {}), choice.model, base.model.to_dict())
    resolved = _merge(
        {
            "model": {k: v for k, v in base.model.to_dict().items() if k not in DERIVED_MODEL_FIELDS},
            "featurizer": base.featurizer.to_dict(),
            "relation": dataclasses.asdict(base.relation),
            "train": {**dataclasses.asdict(TrainConfig()), **base.train.to_dict()},
            "data": dataclasses.asdict(DataConfig()),
            "ensemble": dataclasses.asdict(EnsembleConfig()),
            "uncertainty": dataclasses.asdict(UncertaintyConfig()),
        },
        {k: v for k, v in user.items() if k != "preset"},
    )
    for first, second in LINKED_FIELDS:
        set_first, value_first = _get(user, first)
        set_second, value_second = _get(user, second)
        if set_first and set_second and value_first != value_second:
            raise ConfigError(f"{first}={value_first} but {second}={value_second}; they must agree (set one of them)")
        if set_second and not set_first:
            _set(resolved, first, value_second)
        else:
            _set(resolved, second, _get(resolved, first)[1])

    data = _resolve_generators(DataConfig(**resolved["data"]), resolved["model"], resolved["train"]["loss"])
    _resolve_extra_feature_widths(resolved["model"], user.get("model", {}), data)
    uncertainty = UncertaintyConfig(**resolved["uncertainty"])
    featurizer = FeaturizerConfig(**resolved["featurizer"])
    relation = RelationConfig(**resolved["relation"])
    _resolve_row_sections(resolved["model"], data)
    model = ModelConfig.from_dict({
        **resolved["model"],
        "variant": choice.model,
        "num_tasks": len(data.targets) if data.level_targets.any else max(len(data.targets), 1),
        **MoleculeFeaturizer(featurizer, relation).model_inputs,
        "uncertainty_head": uncertainty.head,
    })
    _check_kernel_spec(data, model.task, resolved["train"]["loss"])
    return RunConfig(choice, data, model, featurizer, relation, TrainConfig(**resolved["train"]),
                     EnsembleConfig(**resolved["ensemble"]), uncertainty)


#: ``data`` fields that together choose the dataset cache: a layer setting one of them replaces
#: an earlier layer's choice whole (``--no-cache`` over a file's ``cache_dir``).
CACHE_FIELDS = ("cache", "cache_dir")


def _merge_layers(layers: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The layers of settings merged, later winning field by field, and the cache as one choice
    (:data:`CACHE_FIELDS`).

    Example:
        >>> _merge_layers([{"data": {"cache_dir": "c", "cache": True}}, {"data": {"cache": False}}])
        {'data': {'cache': False}}
    """
    user: Dict[str, Any] = {}
    for layer in layers:
        if any(name in layer.get("data", {}) for name in CACHE_FIELDS):
            user["data"] = {k: v for k, v in user.get("data", {}).items() if k not in CACHE_FIELDS}
        user = _merge(user, layer)
    return user


def _check_kernel_spec(data: DataConfig, task: str, loss: str) -> None:
    """Refuse a fingerprint kernel spec (``--kernel SPEC``) on a run it cannot serve, where ``auto``
    leaves the kernel out: multiclass targets (it fits none), ``--weight-col`` (it would ignore the
    weights) and ``--loss bounded_mse`` (it would read a censored label such as ``<5`` as exact)."""
    if data.kernel in (AUTO, NONE):
        return
    why = ("predicts regression or binary-classification targets, not multiclass ones" if task not in ("regression", "classification")
           else "would ignore the weights of --weight-col" if data.weight_col is not None
           else "would read a censored label such as <5 as exact (--loss bounded_mse)" if loss == "bounded_mse" else None)
    if why is not None:
        raise ConfigError(f"the fingerprint kernel (--kernel {data.kernel}) {why}: drop --kernel (or give --kernel none)")


def apply_threads(config: RunConfig) -> RunConfig:
    """``config`` with its ``train.threads`` resolved and applied to this process (see
    :func:`~dgl_graphtx.threads.set_threads`: ``--threads``, else ``OMP_NUM_THREADS``, else 1),
    so that ``config.yaml`` records the number used.

    Example:
        >>> apply_threads(resolve_run_config(overrides=["data.targets=y", "train.threads=1"])).train.threads
        1
    """
    return config.with_threads(set_threads(config.train.threads))


def _defaults_apply(data: DataConfig, task: str, loss: str) -> bool:
    """Whether the ``auto`` kernel and extra features apply: a molecule file (not QM9, not a store)
    with molecule-level regression or binary-classification targets, unweighted and uncensored, of
    one molecule per row."""
    return (not data.is_qm9 and not (data.path is not None and is_store(data.path)) and data.weight_col is None
            and task in ("regression", "classification") and loss != "bounded_mse"
            and bool(data.targets) and not data.molecule_columns.several)


def _resolve_generators(data: DataConfig, model: Mapping[str, Any], loss: str) -> DataConfig:
    """``data`` with ``features_generators`` ``auto`` replaced by the generators it stands for:
    :data:`DEFAULT_GENERATORS` where :func:`_defaults_apply` and the ``model`` (its settings as
    resolved so far) reads molecule-level features (the atomwise readout does not), none otherwise;
    ``none`` is recorded as no generator, as ``auto`` resolving to none is."""
    if data.features_generators == (NONE,):
        return dataclasses.replace(data, features_generators=())
    if data.features_generators != (AUTO,):
        return data
    reads = model.get("readout") != "atomwise" and _defaults_apply(data, model["task"], loss)
    return dataclasses.replace(data, features_generators=DEFAULT_GENERATORS if reads else ())


def _resolve_extra_feature_widths(model: Dict[str, Any], given: Mapping[str, Any], data: DataConfig) -> None:
    """Set the model's extra feature widths (:data:`EXTRA_FEATURE_FIELDS`) from ``data``'s extra
    features, refusing other values given for them."""
    widths = {"molecule_features": len(data.extra_features.molecule_names), "atom_extra_features": len(data.atom_properties)}
    for name, width in widths.items():
        if given.get(name, width) not in (width, 0):
            raise ConfigError(f"model.{name}={given[name]} but the extra features of data give {width}; it follows "
                              "data.features_generators / data.features_cols / data.atom_properties: drop model." + name)
        model[name] = width


def _resolve_row_sections(model: Dict[str, Any], data: DataConfig) -> None:
    """Set the model's derived row settings (:data:`DERIVED_MODEL_SECTIONS`) from ``data``: the
    molecules per row and whether they are weighted, and the atom- and bond-level outputs."""
    columns, levels = data.molecule_columns, data.level_targets
    model["molecules"] = {**model.get("molecules", {}), "count": columns.count, "weighted": bool(columns.mixture_weights)}
    model["levels"] = {"atom_tasks": len(levels.atom_targets), "bond_tasks": len(levels.bond_targets),
                       "atom_sums": levels.constrained}


def default_preset_name(model: str) -> str:
    """The preset a model gets when none is named (its registry entry's ``default_preset``).

    Example:
        >>> default_preset_name("grpe")
        'tiny'
    """
    return VARIANT_SPECS[model].default_preset


def presets_help() -> str:
    """One line per model listing its presets (its default first), for ``--help``.

    Example:
        >>> presets_help().splitlines()[0]
        '  grpe: tiny (default), small, standard, large'
    """
    lines = []
    for model, choices in PRESETS.items():
        default = VARIANT_SPECS[model].default_preset
        lines.append(f"  {model}: " + ", ".join([f"{default} (default)"] + [n for n in choices if n != default]))
    return "\n".join(lines)
