"""The corpus of a pretraining run: its molecules featurized, their raw descriptors (computed once,
in resumable chunks, and cached in the run folder) and the scaled descriptor targets of its
training and held-out parts."""
from __future__ import annotations

import logging

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ...atomic_io import atomic_savez
from ...checksums import file_sha256
from ...datasets import MoleculeDataset, Split, is_store, load_store, random_split, read_molecules
from ...datasets.sharded_store import MANIFEST
from ...errors import ConfigError, DamagedFileError
from ...featurize.descriptors import FeatureScaler, feature_names
from ...models import Preset
from ...saved_files import read_npz
from ...training import ProcessHooks, TrainConfig
from ..descriptor_chunks import CHUNK_FOLDER, ChunkKey, chunked_descriptors
from .settings import PretrainConfig

PathLike = Union[str, Path]

DESCRIPTOR_CACHE = "descriptors.npz"

logger = logging.getLogger("dgl_graphtx")


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


def read_corpus(source: PathLike, preset: Preset, smiles_col: str, subset: Optional[int], seed: int,
                progress: bool) -> Tuple[MoleculeDataset, List[Any], str]:
    """The featurized corpus, the molecules of its rows, and the corpus file's SHA-256."""
    path = Path(source)
    if is_store(path):
        if subset is not None:
            raise ConfigError("subset applies to a corpus file; a featurized store is used whole")
        dataset = load_store(path)
        dataset.check_featurized_as(preset.featurizer, preset.relation, f"the {preset.model.variant} model",
                                    "featurize it with that model's featurizer and relation settings", name=f"store {path}")
        return dataset, list(dataset.identifiers), corpus_sha256(path)
    table = read_molecules(path, smiles_col)
    rows = list(range(len(table)))
    if subset is not None and subset < len(rows):
        rows = sorted(random.Random(seed).sample(rows, subset))
    molecules = [table.molecules[r] for r in rows]
    dataset = MoleculeDataset(molecules, identifiers=[table.identifiers[r] for r in rows], featurizer=preset.featurizer,
                              relation=preset.relation, progress=progress)
    return dataset, [molecules[r] for r in dataset.rows.tolist()], corpus_sha256(table.source)


def corpus_sha256(source: PathLike) -> str:
    """The SHA-256 a corpus is known by: of its file, or of a featurized store's manifest."""
    path = Path(source)
    return file_sha256(path / MANIFEST if is_store(path) else path)


def corpus_record(source: PathLike, sha256: str) -> Dict[str, str]:
    """The corpus as a pretraining run's checkpoints record it: its name and SHA-256 (:func:`corpus_sha256`)."""
    return {"source": Path(source).name, "sha256": sha256}


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
        >>> cache = folder / DESCRIPTOR_CACHE
        >>> _cached_descriptors(cache, "ab12", ["MolWt"])[1], _cached_descriptors(cache, "cd34", ["MolWt"])
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

    def record(self) -> Dict[str, str]:
        """What the run's checkpoints keep of the corpus, so that a resumed run is refused on another one."""
        return corpus_record(self.source, self.sha256)


def descriptor_corpus(source: PathLike, out: Path, preset: Preset, smiles_col: str, config: PretrainConfig,
                      train_config: TrainConfig, hooks: ProcessHooks) -> DescriptorCorpus:
    """Featurize the corpus, compute its descriptors (the main process first, which caches them in
    ``out``), split it and label it with the scaled descriptors of :func:`descriptor_targets`."""
    dataset, molecules, corpus_sha = read_corpus(source, preset, smiles_col, config.subset, train_config.seed, train_config.progress)
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
