"""Pretraining: a backbone learns to regress normalised RDKit 2-D descriptors, computed from the
molecule alone, with a random share of the targets left out of the loss at every step (as CheMeleon
does with Mordred descriptors), so that it cannot lean on any fixed subset; or to tell the elements
of masked atoms (:mod:`~dgl_graphtx.runs.masked_atoms`); or both (:attr:`PretrainConfig.objective`).

The run goes through :class:`~dgl_graphtx.training.Trainer` (resumable from ``last.pt``, DDP-ready
through its hooks) and ends with ``backbone.pt`` and its model card ``card.json``, which
:func:`~dgl_graphtx.inference.get_pretrained` loads.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import platform
import random
import zipfile
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Subset

from .._version import __version__
from ..atomic_io import atomic_path, atomic_savez, atomic_write_text
from ..checkpoint import CheckpointExtras, CheckpointMeta, save_checkpoint
from ..checksums import file_sha256
from ..datasets import MoleculeBatch, MoleculeDataset, Split, is_store, load_store, random_split, read_molecules
from ..datasets.sharded_store import MANIFEST
from ..errors import ConfigError, DamagedFileError
from ..featurize.descriptors import FeatureScaler, feature_names
from ..inference.backbones import BACKBONE_FILE, CARD_FILE, read_card
from ..inference.model_card import CardCorpus, CardTargets, ModelCard
from ..models import Preset, build_model
from ..saved_files import read_npz
from ..training import ProcessHooks, Trainer, TrainConfig, TrainResult, json_safe, masked_loss, seed_everything
from ..validation import check_number
from .descriptor_chunks import CHUNK_FOLDER, ChunkKey, chunked_descriptors
from .folder import RunFolder
from .masked_atoms import OBJECTIVES, MaskedAtomNetwork, MaskedAtoms, heldout_element_accuracy

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
DESCRIPTOR_CACHE = "descriptors.npz"


@dataclass(frozen=True)
class PretrainConfig:
    """What the backbone learns from.

    Args:
        objective: what the backbone learns from: ``descriptors``; ``atoms``, the elements of
            masked atoms (the descriptor head then learns from detached node states, a probe
            whose held-out R2 selects the epoch); or ``both``, the two losses summed.
        generator: descriptor generator (see :mod:`dgl_graphtx.featurize.descriptors`).
        mask_share: share of the (molecule, descriptor) targets left out of each step's loss.
        atom_mask_share: probability of each atom to be masked at a step (``atoms``, ``both``).
        valid_share: share of the corpus held out to measure descriptor R2 (and select the epoch).
        workers: processes computing the descriptors.
        subset: pretrain on this many molecules of the corpus file, drawn with the run's seed
            (``None``: all).
        corpus_name, corpus_licence, notes: recorded in the model card.

    Example:
        >>> PretrainConfig(mask_share=0.25).valid_share
        0.05
        >>> PretrainConfig(objective="masked")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: unknown pretraining objective 'masked'; choose one of descriptors, atoms, both
    """

    objective: str = "descriptors"
    generator: str = "rdkit2d"
    mask_share: float = 0.15
    atom_mask_share: float = 0.15
    valid_share: float = 0.05
    workers: int = 1
    subset: Optional[int] = None
    corpus_name: str = "custom"
    corpus_licence: str = "unknown"
    notes: str = ""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"unknown pretraining objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        check_number("mask_share", self.mask_share, 0, 1, high_open=True)
        check_number("atom_mask_share", self.atom_mask_share, 0, 1, low_open=True)
        check_number("valid_share", self.valid_share, 0, 1, low_open=True, high_open=True)
        check_number("workers", self.workers, 1, integer=True)
        if self.subset is not None:
            check_number("subset", self.subset, 2, integer=True)


class MaskedDescriptorTrainer(Trainer):
    """A :class:`Trainer` whose loss leaves out a random ``mask_share`` of the observed targets at
    every step (drawn from torch's generator, so a resumed run draws the same masks); with a
    ``pretext`` (:class:`MaskedAtoms`, objectives ``atoms`` and ``both``; ``probe`` for ``atoms``)
    it trains through a :class:`MaskedAtomNetwork` and adds its element loss."""

    def __init__(self, *args: Any, mask_share: float = PretrainConfig.mask_share, pretext: Optional[MaskedAtoms] = None,
                 probe: bool = False, **kwargs: Any) -> None:
        if pretext is not None:
            kwargs["parts"] = {"masked-atom heads": pretext}
        super().__init__(*args, **kwargs)
        self.mask_share = mask_share
        self.network = MaskedAtomNetwork(self.model, pretext, probe) if pretext is not None else None

    def training_module(self) -> torch.nn.Module:
        return self.network if self.network is not None else self.model

    def batch_loss(self, output: torch.Tensor, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        keep = torch.rand(batch.mask.shape, device=batch.mask.device) >= self.mask_share
        loss = masked_loss(self.task, output, self.model.normalize_targets(batch.labels), batch.mask & keep)
        return loss if self.network is None else loss + self.network.element_loss


class _UndefinedR2Filter(logging.Filter):
    """Drops the per-descriptor "R^2 is undefined" notes (descriptors constant in a small held-out
    part); the card says over how many descriptors the held-out R2 is averaged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "R^2 is undefined" not in record.getMessage()


def heldout_r2(y_true: np.ndarray, y_pred: np.ndarray) -> Tuple[float, int]:
    """Mean coefficient of determination over the columns where it is defined (at least two
    distinct observed values), and the number of such columns.

    Example:
        >>> heldout_r2(np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]))
        (0.5, 1)
    """
    scores = []
    for column in range(y_true.shape[1]):
        seen = np.isfinite(y_true[:, column])
        truth, guess = y_true[seen, column], y_pred[seen, column]
        if len(np.unique(truth)) < 2:
            continue
        scores.append(1.0 - float(((truth - guess) ** 2).sum()) / float(((truth - truth.mean()) ** 2).sum()))
    return (float(np.mean(scores)) if scores else float("nan")), len(scores)


class PretrainResult(NamedTuple):
    """The card written next to ``backbone.pt`` (``None`` on the other processes than the main one
    of a distributed run, which write nothing), and the trained model."""

    card: Optional[ModelCard]
    model: torch.nn.Module
    out_dir: Path


def descriptor_targets(raw: np.ndarray, names: Sequence[str], train_rows: Sequence[int]) -> Tuple[np.ndarray, List[str], FeatureScaler]:
    """Pretraining targets from raw descriptors: columns with a spread on the training rows,
    robust-scaled and clipped (:class:`FeatureScaler`), NaN where RDKit gave none (left out of the
    loss); their names and the scaler.

    Example:
        >>> raw = np.array([[1.0, 5.0, 2.0], [2.0, 5.0, np.nan], [3.0, 5.0, 4.0]])
        >>> values, kept, _ = descriptor_targets(raw, ["a", "b", "c"], [0, 1, 2])
        >>> kept, int(np.isnan(values).sum())
        (['a', 'c'], 1)
    """
    part = np.where(np.isfinite(raw[list(train_rows)]), raw[list(train_rows)], np.nan)
    with np.errstate(invalid="ignore"):
        spread = np.nanmax(part, axis=0) - np.nanmin(part, axis=0) if len(part) else np.zeros(raw.shape[1])
    keep = np.flatnonzero(np.nan_to_num(spread) > 0)
    kept = [names[i] for i in keep.tolist()]
    scaler = FeatureScaler.fit(raw[list(train_rows)][:, keep], kept, method="robust")
    values = scaler.transform(raw[:, keep]).astype(np.float32)
    values[~np.isfinite(raw[:, keep])] = np.nan
    return values, kept, scaler


def _corpus(source: PathLike, preset: Preset, smiles_col: str, subset: Optional[int], seed: int,
            progress: bool) -> Tuple[MoleculeDataset, List[Any], str]:
    """The featurized corpus, the molecules of its rows, and the corpus file's SHA-256."""
    path = Path(source)
    if is_store(path):
        if subset is not None:
            raise ConfigError("subset applies to a corpus file; a featurized store is used whole")
        dataset = load_store(path)
        dataset.check_featurized_as(preset.featurizer, preset.relation, f"the {preset.model.variant} model",
                                    "featurize it with that model's featurizer and relation settings", name=f"store {path}")
        return dataset, list(dataset.identifiers), file_sha256(path / MANIFEST)
    table = read_molecules(path, smiles_col)
    rows = list(range(len(table)))
    if subset is not None and subset < len(rows):
        rows = sorted(random.Random(seed).sample(rows, subset))
    molecules = [table.molecules[r] for r in rows]
    dataset = MoleculeDataset(molecules, identifiers=[table.identifiers[r] for r in rows], featurizer=preset.featurizer,
                              relation=preset.relation, progress=progress)
    return dataset, [molecules[r] for r in dataset.rows.tolist()], file_sha256(table.source)


def _molecules_key(corpus_sha: str, subset: Optional[int], seed: int) -> str:
    """What the descriptor cache is keyed by: the corpus file's SHA-256, and the subset drawn from it
    with its seed, so that a rerun in the same folder with another draw never reuses the cache.

    Example:
        >>> _molecules_key("ab12", None, 0), _molecules_key("ab12", 500, 3)
        ('ab12', 'ab12 subset=500 seed=3')
    """
    return corpus_sha if subset is None else f"{corpus_sha} subset={subset} seed={seed}"


def _cached_descriptors(cache: Path, corpus_key: str, names: List[str]) -> Optional[Tuple[np.ndarray, float]]:
    """The raw descriptors and seconds stored in ``cache`` for these molecules (``corpus_key``, of
    :func:`_molecules_key`) and these names, if any."""
    try:
        stored = read_npz(cache, "computing the descriptors again", ("values", "names", "corpus_sha256", "seconds"), optional=True)
    except DamagedFileError as err:  # a cache: computed again
        logger.warning("%s", err)
        return None
    if stored is None or str(stored["corpus_sha256"]) != corpus_key or list(stored["names"]) != names:
        return None
    return stored["values"], float(stored["seconds"])


def save_descriptor_cache(out: Path, values: np.ndarray, names: Sequence[str], corpus_key: str, seconds: float) -> Path:
    """Store raw descriptors ``[M, D]`` as the cache ``out/descriptors.npz`` that a pretraining run
    in ``out`` reuses for the same molecules (``corpus_key``: the corpus file's SHA-256, a store's
    manifest's, with the subset drawn from it) and the same descriptor ``names``; ``seconds``: the
    time they took, which the card reports.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = save_descriptor_cache(folder, np.ones((2, 1)), ["MolWt"], "ab12", 3.0)
        >>> _cached_descriptors(folder / DESCRIPTOR_CACHE, "ab12", ["MolWt"])[1], _cached_descriptors(folder / DESCRIPTOR_CACHE, "cd34", ["MolWt"])
        (3.0, None)
    """
    cache = out / DESCRIPTOR_CACHE
    atomic_savez(cache, values=values, names=np.array(list(names)), corpus_sha256=np.array(corpus_key), seconds=np.array(seconds))
    return cache


def _descriptors(out: Path, molecules: Sequence[Any], corpus_key: str, config: PretrainConfig,
                 write: bool = True) -> Tuple[np.ndarray, List[str], float]:
    """Raw descriptors of the corpus (its molecules named by ``corpus_key``, of :func:`_molecules_key`)
    and seconds spent, cached in ``out`` for resumed runs and the other processes of a distributed
    run. Only a ``write``-ing process stores them: in resumable chunks
    (:mod:`~dgl_graphtx.runs.descriptor_chunks`) while computing, joined in the end."""
    cache = out / DESCRIPTOR_CACHE
    names = feature_names([config.generator])
    cached = _cached_descriptors(cache, corpus_key, names)
    if cached is not None:
        return cached[0], names, cached[1]
    chunks = out / CHUNK_FOLDER
    values, seconds = chunked_descriptors(chunks, molecules, ChunkKey.of(corpus_key, names, len(molecules)),
                                          config.generator, config.workers, write)
    if not write:
        return values, names, seconds
    save_descriptor_cache(out, values, names, corpus_key, seconds)
    shutil.rmtree(chunks)
    return values, names, seconds


def _hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s)"


@dataclass
class DescriptorCorpus:
    """The featurized corpus of a pretraining run with its descriptor targets.

    Attributes:
        dataset: the featurized molecules, labelled with ``targets``.
        source: the corpus file's name.
        sha256: SHA-256 of the corpus file (of a store's manifest).
        split: the training and held-out parts (indices into ``dataset``).
        targets: scaled descriptors ``[M, D]`` (NaN where RDKit gave none).
        names: the ``D`` descriptors kept (those with a spread on the training part).
        scaler: what scaled them.
        descriptor_seconds: time spent computing the raw descriptors.
    """

    dataset: MoleculeDataset
    source: str
    sha256: str
    split: Split
    targets: np.ndarray
    names: List[str]
    scaler: FeatureScaler
    descriptor_seconds: float


class HeldOutScores(NamedTuple):
    """How well the pretrained backbone predicts the held-out part's descriptors (and the elements
    of its masked atoms, with a masked-atom objective)."""

    r2: float
    r2_descriptors: int
    rmse: float
    element_accuracy: Optional[float] = None


def _descriptor_corpus(source: PathLike, out: Path, preset: Preset, smiles_col: str, config: PretrainConfig,
                       train_config: TrainConfig, hooks: ProcessHooks) -> DescriptorCorpus:
    """Featurize the corpus, compute its descriptors (the main process first, which caches them in
    ``out``), split it and label it with the scaled descriptors of :func:`descriptor_targets`."""
    dataset, molecules, corpus_sha = _corpus(source, preset, smiles_col, config.subset, train_config.seed, train_config.progress)
    with hooks.main_first():
        raw, names, descriptor_seconds = _descriptors(out, molecules, _molecules_key(corpus_sha, config.subset, train_config.seed),
                                                      config, write=hooks.is_main)
    split = random_split(len(dataset), (1.0 - config.valid_share, config.valid_share, 0.0), train_config.seed)
    if not split.train or not split.valid:
        raise ConfigError(f"a corpus of {len(dataset)} molecules leaves no training or held-out part with "
                          f"valid_share={config.valid_share}; use more molecules")
    values, kept, scaler = descriptor_targets(raw, names, split.train)
    dataset.raw_labels = torch.from_numpy(values)
    dataset.target_names = kept
    return DescriptorCorpus(dataset, Path(source).name, corpus_sha, split, values, kept, scaler, descriptor_seconds)


def _open_run_folder(opened: contextlib.ExitStack, out: Path, overwrite: bool, resume: bool,
                     hooks: ProcessHooks) -> Optional[RunFolder]:
    """The run folder, opened (and kept open by ``opened``) in the main process; ``None`` in the others."""
    with hooks.main_first():  # a refused folder stops every process of a job at once
        if not hooks.is_main:
            return None
        run = opened.enter_context(RunFolder(out, overwrite, resume=resume))
        if not resume:  # RunFolder refused a folder holding a run unless overwrite: these are stale
            for stale in (BACKBONE_FILE, CARD_FILE):
                (out / stale).unlink(missing_ok=True)
        return run


def _fit_and_score(trainer: MaskedDescriptorTrainer, corpus: DescriptorCorpus, resume: bool) -> Tuple[TrainResult, HeldOutScores]:
    """Train on the corpus's training part (resuming ``last.pt`` with ``resume``) and score the held-out part."""
    quiet = _UndefinedR2Filter()
    logger.addFilter(quiet)
    try:
        result = trainer.fit(Subset(corpus.dataset, corpus.split.train), Subset(corpus.dataset, corpus.split.valid), resume=resume)
    finally:
        logger.removeFilter(quiet)
    valid = Subset(corpus.dataset, corpus.split.valid)
    r2, defined = heldout_r2(corpus.targets[corpus.split.valid], trainer.predict(valid))
    accuracy = None
    if trainer.network is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(trainer.config.seed)  # the same held-out masks for every backbone of a seed
            pairs = ((b.graph, b.relation_graph) for b in (batch.to(trainer.device) for batch in trainer.loader(valid)))
            accuracy = heldout_element_accuracy(trainer.network, pairs)
    return result, HeldOutScores(r2, defined, trainer.evaluate(valid)["rmse"], accuracy)


def _pretraining_recipe(config: PretrainConfig, train_config: TrainConfig) -> Dict[str, Any]:
    """The settings of a pretraining run, as its checkpoints and card record them."""
    return {"pretrain": dataclasses.asdict(config), "train": dataclasses.asdict(train_config)}


def pretrain(
    corpus: PathLike,
    out_dir: PathLike,
    preset: Preset,
    train_config: TrainConfig,
    config: PretrainConfig = PretrainConfig(),
    name: Optional[str] = None,
    smiles_col: str = "smiles",
    overwrite: bool = False,
    resume: bool = False,
    hooks: Optional[ProcessHooks] = None,
) -> PretrainResult:
    """Pretrain ``preset``'s architecture on ``corpus`` (a SMILES/CSV/SDF file or a store written by
    ``dgl-graphtx featurize``) with ``config.objective`` (descriptors, masked atoms or both) and
    write ``backbone.pt``, ``card.json``, ``log.csv``, ``last.pt`` (resumable: ``resume=True``
    continues it) to ``out_dir``. With the ``hooks`` of a distributed run
    (:func:`~dgl_graphtx.runs.distributed.process_hooks`) every process trains on its share of each
    batch; the main process computes the descriptors and writes the outputs.

    Example:
        >>> import tempfile, pathlib
        >>> from dgl_graphtx.models import get_preset
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "c.smi").write_text("\\n".join(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl", "OCCN", "c1ccncc1"]))
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> r = pretrain(folder / "c.smi", folder / "run", p, TrainConfig(epochs=1, batch_size=8, progress=False),
        ...              PretrainConfig(valid_share=0.25))
        >>> r.card.epochs, r.card.corpus.molecules, (folder / "run" / "backbone.pt").is_file()
        (1, 8, True)
    """
    out = Path(out_dir)
    hooks = hooks if hooks is not None else ProcessHooks()
    with contextlib.ExitStack() as opened:
        run = _open_run_folder(opened, out, overwrite, resume, hooks)
        data = _descriptor_corpus(corpus, out, preset, smiles_col, config, train_config, hooks)
        seed_everything(train_config.seed)
        model_config = dataclasses.replace(preset.model, num_tasks=len(data.names), task="regression", molecule_features=0,
                                           atom_extra_features=0)
        recipe = _pretraining_recipe(config, train_config)
        meta = CheckpointMeta(preset.featurizer, preset.relation, data.names,
                              CheckpointExtras(pretraining={"targets": config.generator, "scaler": data.scaler.to_dict(), "recipe": recipe}))
        model = build_model(model_config)
        pretext = MaskedAtoms(model, config.atom_mask_share) if config.objective != "descriptors" else None
        trainer = MaskedDescriptorTrainer(model, train_config, out_dir=out, meta=meta, hooks=hooks, mask_share=config.mask_share,
                                          pretext=pretext, probe=config.objective == "atoms")
        result, scores = _fit_and_score(trainer, data, resume)
        if pretext is not None:
            pretext.remove()
        if not hooks.is_main:
            return PretrainResult(None, trainer.model, out)
        assert run is not None, "the main process opened the run folder"
        backbone = out / BACKBONE_FILE
        save_checkpoint(backbone, trainer.model, meta)
        card = _model_card(name or out.name, config, train_config, data, trainer, result, scores, file_sha256(backbone))
        atomic_write_text(json.dumps(card.to_dict(), indent=2, allow_nan=False), out / CARD_FILE)
        run.finish()
    logger.info("pretrained %s: held-out descriptor R2 %s after %d epochs; %s", card.name, card.heldout_r2,
                card.epochs, backbone)
    return PretrainResult(card, trainer.model, out)


def _model_card(name: str, config: PretrainConfig, train_config: TrainConfig, corpus: DescriptorCorpus,
                trainer: Trainer, result: TrainResult, scores: HeldOutScores, sha256: str) -> ModelCard:
    """The model card of a pretrained backbone whose ``backbone.pt`` has SHA-256 ``sha256``:
    what it was trained on, how, and how well it predicts the held-out descriptors."""
    model_config, hooks = trainer.model.config, trainer.hooks
    fit = json_safe({"r2": scores.r2, "rmse": scores.rmse})  # undefined: null
    return ModelCard(
        name=name,
        variant=model_config.variant,
        architecture=model_config.to_dict(),
        parameters=sum(p.numel() for p in trainer.model.parameters()),
        corpus=CardCorpus(name=config.corpus_name, source=corpus.source, sha256=corpus.sha256,
                          subset=config.subset, subset_seed=train_config.seed,
                          molecules=len(corpus.dataset), train=len(corpus.split.train), heldout=len(corpus.split.valid),
                          licence=config.corpus_licence),
        targets=CardTargets(generator=config.generator, count=len(corpus.names), names=corpus.names,
                            normalisation="robust (median, IQR/1.349), clipped to +-10; NaN left out of the loss"),
        recipe=_pretraining_recipe(config, train_config),
        epochs=int(result.history["epoch"].max()) if len(result.history) else 0,
        best_epoch=result.best_epoch,
        wall_time_s=round(float(result.history["seconds"].sum()), 1) if len(result.history) else 0.0,
        descriptor_time_s=round(corpus.descriptor_seconds, 1),
        hardware=_hardware(trainer.device) + (f" x {hooks.world_size} processes" if hooks.world_size > 1 else ""),
        heldout_r2=fit["r2"], heldout_rmse=fit["rmse"], heldout_r2_descriptors=scores.r2_descriptors,
        heldout_element_accuracy=scores.element_accuracy,
        library_version=__version__,
        torch_version=torch.__version__,
        created_with=" ".join(sys.argv) if sys.argv and sys.argv[0].endswith("dgl-graphtx") else "dgl_graphtx.runs.pretraining.pretrain",
        notes=config.notes,
        sha256=sha256,
    )


def ship(run_dir: PathLike, folder: PathLike) -> Path:
    """Copy a pretraining run's ``backbone.pt`` and ``card.json`` to ``folder`` (e.g.
    ``dgl_graphtx/pretrained/<name>/``), checking the hash first."""
    source, target = Path(run_dir), Path(folder)
    card = read_card(source / CARD_FILE, source)
    if file_sha256(source / BACKBONE_FILE) != card.sha256:
        raise ConfigError(f"{source / BACKBONE_FILE} does not match its card")
    target.mkdir(parents=True, exist_ok=True)
    for file in (BACKBONE_FILE, CARD_FILE):
        shutil.copyfile(source / file, target / file)
    return target


#: The MOSES training set inside the ``molsets`` wheel: 1,584,663 ZINC-derived SMILES, MIT licence
#: (Polykovskiy et al., Front. Pharmacol. 11, 565644 (2020)).
MOSES_MEMBER = "moses/dataset/data/train.csv.gz"
MOSES_LICENCE = "MIT (MOSES, Polykovskiy et al. 2020; molecules from ZINC)"


def moses_corpus(wheel_dir: PathLike, out_dir: PathLike) -> Path:
    """The MOSES training SMILES (``SMILES`` column) as ``out_dir/moses_train.csv.gz``, copied out
    of the ``molsets`` wheel in ``wheel_dir`` (fetch it with ``pip download --no-deps molsets -d
    DIR``; it is read, never installed). Nothing is downloaded here."""
    wheels = sorted(Path(wheel_dir).glob("molsets-*.whl"))
    if not wheels:
        raise ConfigError(f"no molsets wheel in {wheel_dir}: fetch it with 'pip download --no-deps molsets -d {wheel_dir}'")
    target = Path(out_dir) / "moses_train.csv.gz"
    if not target.is_file():
        with zipfile.ZipFile(wheels[-1]) as archive, archive.open(MOSES_MEMBER) as raw, atomic_path(target) as tmp:
            tmp.write_bytes(raw.read())
    return target
