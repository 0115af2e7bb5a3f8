"""Named configurations from the papers: the model, the featurizer and relation graphs it needs,
and the training recipe the authors used (``get_preset("gradformer", "molhiv")``)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from ..errors import ConfigError
from ..featurize import FeaturizerConfig, MoleculeFeaturizer
from ..relation_graph import RelationConfig
from ..validation import check_number
from .architectures import GPSOptions
from .config import GradformerOptions, ModelConfig, MoireOptions
from .factory import count_parameters
from .variants import VARIANT_NAMES, variant_spec


@dataclass(frozen=True)
class TrainRecipe:
    """The optimisation part of a recipe (the fields are documented on
    :class:`~dgl_graphtx.training.TrainConfig`, which extends this class with the settings of a
    run and builds from a preset with ``TrainConfig.from_recipe(preset.train, **overrides)``).

    Example:
        >>> TrainRecipe(lr=1e-4, batch_size=32).to_dict()["lr"]
        0.0001
    """

    epochs: int = 100
    batch_size: int = 64
    lr: float = 5e-4
    weight_decay: float = 0.01
    schedule: str = "linear"
    warmup_epochs: int = 5
    final_lr_ratio: float = 0.0
    grad_clip: float = 5.0

    def __post_init__(self) -> None:
        check_number("epochs", self.epochs, 1, integer=True)
        check_number("batch_size", self.batch_size, 1, integer=True)
        check_number("lr", self.lr, 0, 10)
        check_number("weight_decay", self.weight_decay, 0)
        check_number("warmup_epochs", self.warmup_epochs, 0, integer=True)
        check_number("final_lr_ratio", self.final_lr_ratio, 0, 1)
        check_number("grad_clip", self.grad_clip, 0)

    def to_dict(self) -> Dict[str, Any]:
        """The settings as keyword arguments of ``TrainConfig``."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PresetInfo:
    """Where a preset comes from: the paper, the dataset its recipe was made for, the source of
    each number, the paper's parameter count (``None`` when the paper reports none), the count of
    the authors' official code for that configuration where it was derived, and what of the
    original setup differs here."""

    paper: str
    dataset: str
    source: str
    paper_params: Optional[int] = None
    notes: str = ""
    official_params: Optional[int] = None


@dataclass(frozen=True)
class Preset:
    """A model configuration with the featurization and relation graphs it needs, its training
    recipe and its provenance."""

    model: ModelConfig
    featurizer: FeaturizerConfig
    relation: RelationConfig
    train: TrainRecipe = TrainRecipe()
    info: PresetInfo = PresetInfo("", "", "")


GRPE = "GRPE (Park et al.)"
MOIRE = "MoiréGT"
GRADFORMER = "Gradformer (Liu et al., IJCAI 2024)"
LIBRARY_SIZE = "library default size (no paper recipe)"

#: GRPE's schedule (paper Sec. 5 and the official scripts): linear decay from 2e-4 to 1e-9.
_GRPE_SCHEDULE: Dict[str, Any] = dict(lr=2e-4, schedule="linear", final_lr_ratio=1e-9 / 2e-4)
#: Gradformer's official scheduler is stepped once per epoch over a horizon of epochs x batches,
#: so after its linear warm-up the cosine factor stays above 0.99: a constant rate in effect.
_GRADFORMER_SCHEDULE = "constant"


def _grpe(layers: int, dim: int, heads: int, train: TrainRecipe, info: PresetInfo) -> Preset:
    return Preset(
        ModelConfig("grpe", layers, dim, heads, ffn_dim=dim, readout="virtual", virtual_node=True),
        FeaturizerConfig(),
        RelationConfig("complete", virtual_node=True),
        train,
        info,
    )


def _grpe_paper(
    layers: int, dim: int, heads: int, train: TrainRecipe, dataset: str, source: str, params: int, notes: str,
    official: Optional[int] = None,
) -> Callable[[], Preset]:
    return lambda: _grpe(layers, dim, heads, train, PresetInfo(GRPE, dataset, source, params, notes, official))


def _baseline(variant: str) -> Callable[[], Preset]:
    def make() -> Preset:
        base = _grpe(4, 64, 8, TrainRecipe(), PresetInfo(f"baseline ({variant})", "GRPE-Tiny size", LIBRARY_SIZE))
        return dataclasses.replace(base, model=dataclasses.replace(base.model, variant=variant))

    return make


def _moire(distance: str, layers: int = 4, dim: int = 64, heads: int = 8, train: TrainRecipe = TrainRecipe(),
           info: Optional[PresetInfo] = None) -> Callable[[], Preset]:
    def make() -> Preset:
        model = ModelConfig(
            "moire", layers, dim, heads, readout="max", virtual_node=False, input_mlp=True, head_layers=2,
            moire=MoireOptions(distance=distance, max_shift=6.0 if distance == "dist" else 4.0),
        )
        feat = FeaturizerConfig(coordinates="auto" if distance == "dist" else "none")
        kind = "3-D distances" if distance == "dist" else "hop distances"
        return Preset(model, feat, RelationConfig("complete"), train, info or PresetInfo(MOIRE, f"any ({kind})", LIBRARY_SIZE))

    return make


_MOIRE_TABLE = "paper Table 1 (layers, width, heads, learning rate); the rest is not reported: library defaults"


def _moire_energy() -> Preset:
    """MoiréGT for energies of 3-D molecules (``3d-energy``): the ``3d`` network with the field's
    usual answer for an extensive target such as an atomization energy (SchNet's per-element
    references and per-atom sum, hydrogens as nodes, radial basis features); measured by
    docs/decisions/qm9-energy.md and the suite (docs/moire.md "3-D quantum energies")."""
    base = _moire("dist")()
    model = dataclasses.replace(base.model, readout="atomwise", atom_reference=True,
                                moire=dataclasses.replace(base.model.moire, rbf=32, rbf_cutoff=8.0))
    info = PresetInfo(MOIRE, "QM9-like energies (extensive targets, 3-D geometries)", "library recipe (SchNet-style "
                      "energy readout), measured on QM9 atomization energies by docs/decisions/qm9-energy.md", None,
                      "Hydrogens are nodes (an SDF's own, or added to SMILES with ETKDG coordinates), per-element "
                      "reference values fitted on the training part, the head summed over atoms, and the distance "
                      "entering each head's logits and values through 32 Gaussian basis functions up to 8 Angstrom.")
    return Preset(model, dataclasses.replace(base.featurizer, explicit_hydrogens=True), base.relation, base.train, info)


def _gradformer_default() -> Preset:
    model = ModelConfig(
        "gradformer", 4, 64, 4, readout="mean", virtual_node=False, rwse_steps=16, head_layers=2,
        gradformer=GradformerOptions(mode="paper", decay=0.5),
    )
    return Preset(model, FeaturizerConfig(rwse_steps=16), RelationConfig("complete"), TrainRecipe(),
                  PresetInfo(GRADFORMER, "any", LIBRARY_SIZE))


def _gradformer_script(
    dataset: str, script: str, layers: int, dim: int, heads: int, *, local_model: str, pe_gate: bool, decay: float,
    start: float, slope: float, dropout: float, rwse: int, rwse_norm: bool, readout: str, head_layers: int,
    train: TrainRecipe, notes: str,
) -> Callable[[], Preset]:
    """A recipe of the authors' ``scripts/<script>`` with their ``config.py`` defaults (attention
    dropout 0.5, weight decay 1e-5, the start point shared by all layers, lambda fixed)."""

    def make() -> Preset:
        model = ModelConfig(
            "gradformer", layers, dim, heads, dropout=dropout, attn_dropout=0.5, readout=readout,
            virtual_node=False, rwse_steps=rwse, rwse_norm=rwse_norm, head_layers=head_layers,
            gradformer=GradformerOptions(mode="reference", decay=decay, init_start=start, slope=slope),
            gps=GPSOptions(local_model=local_model, pe_gate=pe_gate),
        )
        source = f"authors' scripts/{script} + config.py defaults"
        return Preset(model, FeaturizerConfig(rwse_steps=rwse), RelationConfig("complete"), train,
                      PresetInfo(GRADFORMER, dataset, source, None, notes))

    return make


_GRADFORMER_COMMON = (
    "Authors' encoders differ: atom embedding of width d - pe_dim concatenated with a linear map of "
    "the random-walk encoding (here both are summed at width d), and a 3-layer head d-d/2-d/4-T "
    "(here d-d-T)."
)

#: The paper recipes of each variant that has them, ``{variant: {preset: factory}}``.
_PAPER_PRESETS: Dict[str, Dict[str, Callable[[], Preset]]] = {
    "grpe": {
        "tiny": _grpe_paper(
            4, 64, 8,
            TrainRecipe(epochs=100, batch_size=64, weight_decay=0.0, warmup_epochs=3, **_GRPE_SCHEDULE),
            "PATTERN / CLUSTER", "AAAI paper Table 1 and Sec. 5; the rest from the official gpp.py defaults", 106_000,
            "The paper's Tiny runs are on non-molecular SBM graphs; here OGB atom features and bond classes, "
            "whose embedding tables (25.0k parameters) make the +19% over the paper: the transformer "
            "layers equal the official code's.",
        ),
        "small": _grpe_paper(
            12, 80, 8,
            TrainRecipe(epochs=10_000, batch_size=256, weight_decay=1e-3, warmup_epochs=1_000, grad_clip=0.0, **_GRPE_SCHEDULE),
            "ZINC", "paper Table 1; official zinc.py", 489_000,
            "400k updates with 40k warm-up = 10,000 / 1,000 epochs of ZINC's 10,000 training graphs at "
            "batch 256; the official input noise (perturb 0.2) is not implemented.",
            official=478_001,
        ),
        "standard": _grpe_paper(
            12, 768, 32,
            TrainRecipe(epochs=400, batch_size=128, weight_decay=0.0, warmup_epochs=3, grad_clip=5.0, **_GRPE_SCHEDULE),
            "PCQM4Mv2", "paper Table 1; official pcqm4m_v2.sh", 46_200_000,
            "Batch 128 per GPU on 8 GPUs (1,024 per step). The official code embeds atoms in one table of 512 rows per OGB "
            "feature (4,609 rows); ours sizes each feature's table to its vocabulary (174 rows): the whole "
            "difference to the paper's count.",
            official=46_199_041,
        ),
        "large": _grpe_paper(
            18, 1024, 32,
            TrainRecipe(epochs=400, batch_size=64, weight_decay=0.0, warmup_epochs=3, grad_clip=5.0, **_GRPE_SCHEDULE),
            "PCQM4Mv2", "paper Table 1; official pcqm4m_v2.sh", 118_300_000,
            "Batch 64 per GPU on 8 GPUs (512 per step). The official code embeds atoms in one table of 512 rows per OGB "
            "feature (4,609 rows); ours sizes each feature's table to its vocabulary (174 rows): the whole "
            "difference to the paper's count.",
            official=118_283_265,
        ),
    },
    "moire": {
        "2d": _moire("spd"),
        "3d": _moire("dist"),
        "3d-energy": _moire_energy,
        "qm9": _moire("dist", 13, 256, 32, TrainRecipe(lr=5e-4), PresetInfo(MOIRE, "QM9", _MOIRE_TABLE, None,
                      "3-D distances from the input conformer (SDF) or seeded ETKDG, not QM9's DFT geometry unless given.")),
        "pcqm4mv2": _moire("dist", 8, 512, 16, TrainRecipe(lr=2e-4), PresetInfo(MOIRE, "PCQM4Mv2", _MOIRE_TABLE, None,
                           "PCQM4Mv2 ships DFT 3-D structures for training molecules only; here conformers or ETKDG.")),
        "mnist": _moire("spd", 5, 256, 32, TrainRecipe(lr=5e-4), PresetInfo(MOIRE, "MNIST superpixels", _MOIRE_TABLE, None,
                        "Superpixel images are not molecules: the size and rate are kept, with hop distances "
                        "(the paper's MNIST-SPD setting) on molecular graphs.")),
    },
    "gradformer": {
        "default": _gradformer_default,
        "molhiv": _gradformer_script(
            "ogbg-molhiv (binary classification)", "run_hiv.sh", 10, 64, 4, local_model="gatedgcn", pe_gate=True,
            decay=0.7, start=5.0, slope=0.2, dropout=0.05, rwse=16, rwse_norm=True, readout="mean", head_layers=2,
            train=TrainRecipe(epochs=100, batch_size=32, lr=1e-4, weight_decay=1e-5, schedule=_GRADFORMER_SCHEDULE,
                              warmup_epochs=5, grad_clip=0.0),
            notes=_GRADFORMER_COMMON,
        ),
        "zinc": _gradformer_script(
            "ZINC (regression, MAE)", "run_zinc.sh", 10, 64, 4, local_model="gine", pe_gate=False,
            decay=0.6, start=2.0, slope=0.1, dropout=0.0, rwse=20, rwse_norm=True, readout="sum", head_layers=2,
            train=TrainRecipe(epochs=2000, batch_size=32, lr=1e-3, weight_decay=1e-5, schedule=_GRADFORMER_SCHEDULE,
                              warmup_epochs=50, grad_clip=0.0),
            notes=_GRADFORMER_COMMON + " The authors embed ZINC's 28 atom types and train on MAE; here OGB "
            "features and the library's MSE loss.",
        ),
        "nci1": _gradformer_script(
            "NCI1 (binary classification)", "run_nci1.sh", 4, 64, 4, local_model="gine", pe_gate=False,
            decay=0.6, start=5.0, slope=0.0, dropout=0.0, rwse=20, rwse_norm=False, readout="sum", head_layers=1,
            train=TrainRecipe(epochs=100, batch_size=128, lr=1e-3, weight_decay=1e-5, schedule="constant",
                              warmup_epochs=0, grad_clip=0.0),
            notes="The script sweeps lambda over 0.6 and 0.7 (0.6 here) with slope 0. NCI1 graphs carry atom "
            "labels only, so the authors use GIN without bond features and Adam without a schedule; here GINE "
            "over the bond features and AdamW (same rate and decay).",
        ),
        "cluster": _gradformer_script(
            "CLUSTER (node classification; architecture only)", "run_cluster.sh", 16, 48, 8, local_model="gatedgcn",
            pe_gate=False, decay=0.3, start=0.0, slope=0.1, dropout=0.0, rwse=10, rwse_norm=True, readout="mean",
            head_layers=2,
            train=TrainRecipe(epochs=100, batch_size=16, lr=5e-4, weight_decay=1e-5, schedule=_GRADFORMER_SCHEDULE,
                              warmup_epochs=5, grad_clip=0.0),
            notes="CLUSTER is node classification on stochastic-block-model graphs, not a molecule task: its "
            "network and optimisation are kept, with a mean-pooled graph readout for molecules.",
        ),
    },
}

#: ``{variant: {preset: factory}}`` for every registered variant: its paper recipes, or else the
#: library-size ``tiny`` of the baselines. A variant's default preset is its registry entry's.
PRESETS: Dict[str, Dict[str, Callable[[], Preset]]] = {
    name: _PAPER_PRESETS.get(name) or {"tiny": _baseline(name)} for name in VARIANT_NAMES
}


def preset_name(model: str, preset: Optional[str] = None) -> str:
    """The name of ``model``'s preset ``preset`` (default: the variant's ``default_preset``),
    checked: the one place that refuses an unknown model (through
    :func:`~dgl_graphtx.models.variants.variant_spec`) or an unknown preset of it.

    Example:
        >>> preset_name("grpe"), preset_name("gradformer", "molhiv")
        ('tiny', 'molhiv')
        >>> preset_name("grpe", "huge")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: unknown preset 'huge' for grpe (--preset, preset.name); choose one of large, small, standard, tiny
    """
    default = variant_spec(model).default_preset
    name = preset or default
    if name not in PRESETS[model]:
        raise ConfigError(f"unknown preset {name!r} for {model} (--preset, preset.name); choose one of {', '.join(sorted(PRESETS[model]))}")
    return name


def get_preset(
    model: str,
    preset: Optional[str] = None,
    *,
    num_tasks: int = 1,
    task: str = "regression",
    atom_features: str = "ogb",
    **model_overrides: Any,
) -> Preset:
    """A named configuration with its training recipe, adapted to the task and the atom featurizer.

    Args:
        model: a variant of :data:`~dgl_graphtx.models.variants.VARIANT_SPECS` (``grpe``,
            ``moire``, ``gradformer``, ``vanilla``, ``graphormer``).
        preset: name within the model (default: the variant's ``default_preset``): ``grpe`` ``tiny``, ``small``,
            ``standard``, ``large`` (paper Table 1); ``moire`` ``2d`` / ``3d`` (library size, hop /
            3-D distances), ``3d-energy`` (``3d`` for energies: hydrogens, atom references, summed
            per-atom outputs, distance features), ``qm9``, ``pcqm4mv2``, ``mnist`` (paper Table 1); ``gradformer``
            ``default`` (library size), ``molhiv``, ``zinc``, ``nci1``, ``cluster`` (the authors'
            scripts); baselines and variants without paper recipes ``tiny``. ``dgl-graphtx
            presets`` lists them.
        num_tasks, task: output size and ``regression`` / ``classification``.
        atom_features: ``ogb`` or ``canonical``; feature sizes follow the featurizer.
        **model_overrides: fields of :class:`ModelConfig` to replace (e.g. ``dropout=0.2``).

    Example:
        >>> p = get_preset("gradformer", "molhiv", task="classification")
        >>> p.model.num_layers, p.model.gps.local_model, p.train.lr, p.train.batch_size
        (10, 'gatedgcn', 0.0001, 32)
    """
    name = preset_name(model, preset)
    base = PRESETS[model][name]()
    feat_cfg = dataclasses.replace(base.featurizer, atom_features=atom_features)
    featurizer = MoleculeFeaturizer(feat_cfg, base.relation)
    model_cfg = dataclasses.replace(
        base.model,
        num_tasks=num_tasks,
        task=task,
        **featurizer.model_inputs,
        **model_overrides,
    )
    return dataclasses.replace(base, model=model_cfg, featurizer=feat_cfg)


@dataclass(frozen=True)
class PresetSummary:
    """One row of :func:`summarize_presets`."""

    model: str
    preset: str
    info: PresetInfo
    config: ModelConfig
    params: int

    @property
    def difference(self) -> Optional[float]:
        """``params / paper_params - 1``, or ``None`` when the paper reports no count."""
        paper = self.info.paper_params
        return None if paper is None else self.params / paper - 1.0


def summarize_presets(model: Optional[str] = None) -> List[PresetSummary]:
    """Every preset (of ``model``, or of all models) with its parameter count for one regression
    target on OGB features, counted on the ``meta`` device.

    Example:
        >>> rows = summarize_presets("grpe")
        >>> [(r.preset, r.config.hidden_dim) for r in rows][-1]
        ('large', 1024)
    """
    if model is not None:
        variant_spec(model)
    rows = []
    for name in [model] if model else list(PRESETS):
        for preset in PRESETS[name]:
            p = get_preset(name, preset)
            rows.append(PresetSummary(name, preset, p.info, p.model, count_parameters(p.model)))
    return rows
