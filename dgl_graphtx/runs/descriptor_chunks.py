"""The raw descriptors of a pretraining corpus, computed in resumable chunks.

The corpus is cut into chunks of :data:`CHUNK_SIZE` molecules. A run that writes stores each chunk
in ``descriptor_chunks/`` as soon as it is done (atomically), so a killed run
computes only the missing chunks when started again. Each chunk records its :class:`ChunkKey` (the
corpus file's SHA-256, the descriptor names, the molecule count and the chunk size); chunks with
another key are deleted, never reused, and a damaged chunk (cut short, a flipped byte: NumPy
archives check a CRC-32 of every array) is computed again, with a warning naming it. One INFO line
per computed chunk gives the molecules done, the chunk's time and the time left.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..atomic_io import atomic_savez
from ..errors import DamagedFileError
from ..featurize.descriptors import compute_features
from ..saved_files import read_npz

logger = logging.getLogger("dgl_graphtx")

CHUNK_FOLDER = "descriptor_chunks"
#: Molecules per stored chunk (about 5 CPU-minutes of rdkit2d descriptors).
CHUNK_SIZE = 10_000
#: Pieces of a chunk per worker process, so that the processes finish the chunk together.
PIECES_PER_WORKER = 4
_PREFIX = "rows-"
#: What happens to a damaged chunk.
RECOMPUTE = "computing its descriptors again"


class ChunkKey(NamedTuple):
    """What the chunks of one descriptor computation belong to.

    Example:
        >>> ChunkKey.of("ab12", ["MolWt"], 25).chunk_size == CHUNK_SIZE
        True
    """

    corpus_sha256: str
    names: Tuple[str, ...]
    molecules: int
    chunk_size: int

    @classmethod
    def of(cls, corpus_sha256: str, names: Sequence[str], molecules: int) -> "ChunkKey":
        """The key of ``molecules`` rows of a corpus, cut at the current :data:`CHUNK_SIZE`."""
        return cls(corpus_sha256, tuple(names), molecules, CHUNK_SIZE)

    def starts(self) -> range:
        """The first row of every chunk.

        Example:
            >>> list(ChunkKey("ab12", ("MolWt",), 25, 10).starts())
            [0, 10, 20]
        """
        return range(0, self.molecules, self.chunk_size)

    def rows(self, start: int) -> slice:
        """The rows of the chunk starting at ``start``."""
        return slice(start, start + self.size(start))

    def size(self, start: int) -> int:
        """The number of rows of the chunk starting at ``start``."""
        return min(self.chunk_size, self.molecules - start)


def _chunk_path(folder: Path, start: int) -> Path:
    return folder / f"{_PREFIX}{start:09d}.npz"


def _read_key(path: Path) -> ChunkKey:
    """The key stored in a chunk file; a damaged one is a :class:`~dgl_graphtx.errors.DamagedFileError`."""
    stored = read_npz(path, RECOMPUTE, ("corpus_sha256", "names", "molecules", "chunk_size"))
    assert stored is not None  # not optional
    try:
        return ChunkKey(str(stored["corpus_sha256"]), tuple(str(n) for n in stored["names"]),
                        int(stored["molecules"]), int(stored["chunk_size"]))
    except (TypeError, ValueError) as err:
        raise DamagedFileError(f"{path} is damaged: its key cannot be read ({err}); {RECOMPUTE}") from None


def _stored_chunks(folder: Path, key: ChunkKey) -> Dict[int, Path]:
    """The chunk files in ``folder`` that belong to ``key``, by first row; the others are
    deleted, with one log line (a damaged one with its own)."""
    ours: Dict[int, Path] = {}
    others = []
    for path in sorted(folder.glob(f"{_PREFIX}*.npz")):
        try:
            found = _read_key(path)
        except DamagedFileError as err:
            logger.warning("%s", err)
            path.unlink()
            continue
        if found == key:
            ours[int(path.stem[len(_PREFIX):])] = path
        else:
            others.append(path)
    if others:
        logger.warning("discarding %d descriptor chunk(s) in %s: computed for another corpus, generator or "
                       "chunk size", len(others), folder)
        for path in others:
            path.unlink()
    return ours


def _read_chunk(path: Path, rows: int, width: int) -> Optional[Tuple[np.ndarray, float]]:
    """The values (``[rows, width]``) and seconds of a stored chunk; ``None`` (with a warning, the
    file deleted) when it is damaged."""
    try:
        stored = read_npz(path, RECOMPUTE, ("values", "seconds"))
        assert stored is not None  # not optional
        if stored["values"].shape != (rows, width):
            raise DamagedFileError(f"{path} is damaged: it holds {stored['values'].shape} values, not {(rows, width)}; {RECOMPUTE}")
        return stored["values"], float(stored["seconds"])
    except DamagedFileError as err:
        logger.warning("%s", err)
        path.unlink(missing_ok=True)
        return None


def _write_chunk(path: Path, key: ChunkKey, values: np.ndarray, seconds: float) -> None:
    """Store a chunk with its key, atomically."""
    atomic_savez(path, values=values, seconds=np.array(seconds), corpus_sha256=np.array(key.corpus_sha256),
                 names=np.array(key.names), molecules=np.array(key.molecules), chunk_size=np.array(key.chunk_size))


def _compute(generator: str, molecules: Sequence[Any], workers: int, first_row: int = 0) -> np.ndarray:
    """The descriptors of one chunk (its first row ``first_row`` of the corpus, which errors
    name), cut into :data:`PIECES_PER_WORKER` pieces per process.

    Example:
        >>> _compute("morgan_counts:radius=0:size=4", ["C", "CC", "CCC"], 2).sum(axis=1).tolist()
        [1.0, 2.0, 3.0]
    """
    piece = max(1, -(-len(molecules) // (PIECES_PER_WORKER * workers)))
    return compute_features([generator], molecules, workers=workers, chunk_size=piece, first_row=first_row)


def _duration(seconds: float) -> str:
    """A duration for a progress line.

    Example:
        >>> _duration(42.4), _duration(754), _duration(16300)
        ('42 s', '12.6 min', '4.5 h')
    """
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


class _Progress(NamedTuple):
    """Rows of the corpus done, and the rows and seconds computed in this call (for the time left)."""

    done: int
    computed: int
    spent: float

    def after(self, rows: int, seconds: float, total: int) -> "_Progress":
        """The progress after a chunk of ``rows`` computed in ``seconds``, logged."""
        now = _Progress(self.done + rows, self.computed + rows, self.spent + seconds)
        left = (total - now.done) * now.spent / now.computed
        logger.info("descriptors: %s / %s molecules (chunk in %s; about %s left)", f"{now.done:,}", f"{total:,}",
                    _duration(seconds), _duration(left))
        return now


def chunked_descriptors(folder: Path, molecules: Sequence[Any], key: ChunkKey, generator: str, workers: int,
                        write: bool) -> Tuple[np.ndarray, float]:
    """Descriptors ``[M, D]`` of ``molecules`` from ``generator``, computed chunk by chunk in
    ``workers`` processes, and the seconds all chunks took. With ``write``, the chunks of ``key``
    already in ``folder`` are reused and the new ones stored there.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.featurize.descriptors import feature_names
        >>> folder = Path(tempfile.mkdtemp()) / CHUNK_FOLDER
        >>> spec = "morgan_counts:radius=0:size=4"
        >>> key = ChunkKey("ab12", tuple(feature_names([spec])), 3, 2)
        >>> values, _ = chunked_descriptors(folder, ["C", "CC", "CCC"], key, spec, 1, write=True)
        >>> values.sum(axis=1).tolist(), sorted(p.name for p in folder.iterdir())
        ([1.0, 2.0, 3.0], ['rows-000000000.npz', 'rows-000000002.npz'])
    """
    stored = _stored_chunks(folder, key) if write and folder.is_dir() else {}
    reused = sum(key.size(start) for start in stored)
    if stored:
        logger.info("descriptors: reusing %d stored chunk(s), %s of %s molecules", len(stored), f"{reused:,}",
                    f"{key.molecules:,}")
    values = np.empty((key.molecules, len(key.names)))
    seconds, progress = 0.0, _Progress(reused, 0, 0.0)
    if write:
        folder.mkdir(parents=True, exist_ok=True)
    for start in key.starts():
        rows = key.rows(start)
        read = _read_chunk(stored[start], key.size(start), len(key.names)) if start in stored else None
        if read is not None:
            values[rows], spent = read
        else:
            began = time.perf_counter()
            values[rows] = _compute(generator, molecules[rows], workers, start)
            spent = time.perf_counter() - began
            if write:
                _write_chunk(_chunk_path(folder, start), key, values[rows], spent)
            progress = progress.after(key.size(start), spent, key.molecules)
        seconds += spent
    return values, seconds
