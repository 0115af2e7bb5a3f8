"""Molecule-level feature generators (RDKit 2-D descriptors; Morgan, atom-pair and Avalon count
fingerprints), looked up by name, and :class:`FeatureScaler`, the statistics that scale them.

Generators are named by a spec string: ``rdkit2d``, ``morgan_counts`` or, with options,
``morgan_counts:radius=3:size=1024``. Each gives a float64 row per molecule. The fingerprint
kernel reads one or more count fingerprints joined by ``+``
(``morgan_counts+atom_pair_counts``; :func:`kernel_fingerprints`).

Non-finite values: a descriptor that RDKit cannot compute for a molecule (an exception, NaN or
an infinite value; e.g. ``Ipc`` overflows for large ring systems) is recorded as NaN. The scaler
ignores NaN when it is fitted and replaces it by the training centre (0 after scaling) when it
transforms, and clips every scaled value to ``[-clip, clip]``, so the model never sees a
non-finite or extreme input.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, cast

import numpy as np
from rdkit import rdBase
from rdkit.Avalon import pyAvalonTools
from rdkit.Chem import Descriptors, rdFingerprintGenerator

from ..errors import ConfigError, InvalidMoleculeError
from ..worker_pool import part_bounds, parts_in_processes, received
from .molecule import MoleculeLike, to_heavy_atom_mol

SCALING_METHODS = ("standard", "robust")


#: RDKit descriptors that are extremes of the E-state indices (each takes ``force``: recompute them).
ESTATE_EXTREMES = frozenset({"MaxEStateIndex", "MinEStateIndex", "MaxAbsEStateIndex", "MinAbsEStateIndex"})


@dataclass(frozen=True)
class RDKit2D:
    """All RDKit 2-D descriptors of ``rdkit.Chem.Descriptors._descList`` (in its order; 217 with
    RDKit 2026.09, fewer with older releases, so the names are stored with a model).

    Example:
        >>> row = RDKit2D().compute("CCO")
        >>> round(float(row[RDKit2D().feature_names().index("MolWt")]), 3)
        46.069
    """

    name = "rdkit2d"

    def feature_names(self) -> List[str]:
        """Descriptor names, one per column."""
        return [name for name, _ in Descriptors._descList]

    def compute(self, molecule: MoleculeLike) -> np.ndarray:
        """One float64 row; NaN where RDKit fails or returns a non-finite value. The four E-state
        extremes share one computation of the molecule's E-state indices (RDKit's functions
        recompute them each time unless told not to; the values are the same)."""
        mol = to_heavy_atom_mol(molecule)
        row = np.full(len(Descriptors._descList), np.nan)
        estate_computed = False
        for column, (name, function) in enumerate(Descriptors._descList):
            try:
                if name in ESTATE_EXTREMES:
                    fresh, estate_computed = not estate_computed, True
                    value = float(function(mol, force=fresh))
                else:
                    value = float(function(mol))
            except Exception:  # RDKit raises assorted errors for molecules a descriptor cannot handle
                continue
            row[column] = value if math.isfinite(value) else np.nan
        return row


def _check_size(name: str, size: Any) -> None:
    if not (isinstance(size, int) and 1 <= size <= 1 << 20):
        raise ConfigError(f"{name} size must be an integer from 1 to {1 << 20}, got {size!r}")


@dataclass(frozen=True)
class MorganCounts:
    """Morgan (ECFP-like) count fingerprint, folded to ``size`` bins, of atoms within ``radius``.

    Example:
        >>> float(MorganCounts(radius=1, size=64).compute("CCO").sum())  # 3 atoms x (radius 0 and 1)
        6.0
    """

    radius: int = 2
    size: int = 2048
    name = "morgan_counts"

    def __post_init__(self) -> None:
        if not (isinstance(self.radius, int) and 0 <= self.radius <= 10):
            raise ConfigError(f"morgan_counts radius must be an integer from 0 to 10, got {self.radius!r}")
        _check_size(self.name, self.size)

    def feature_names(self) -> List[str]:
        """``morgan{radius}_{bin}``, one per bin."""
        return [f"morgan{self.radius}_{i}" for i in range(self.size)]

    def compute(self, molecule: MoleculeLike) -> np.ndarray:
        """Counts per bin as one float64 row."""
        generator = rdFingerprintGenerator.GetMorganGenerator(radius=self.radius, fpSize=self.size)
        return generator.GetCountFingerprintAsNumPy(to_heavy_atom_mol(molecule)).astype(np.float64)


class _FoldedCounts:
    """What the count fingerprints of ``size`` bins share: the size's check, and columns named
    ``{prefix}_{bin}``."""

    size: int
    name: ClassVar[str]
    prefix: ClassVar[str]

    def __post_init__(self) -> None:
        _check_size(self.name, self.size)

    def feature_names(self) -> List[str]:
        """``{prefix}_{bin}``, one per bin."""
        return [f"{self.prefix}_{i}" for i in range(self.size)]


@dataclass(frozen=True)
class AtomPairCounts(_FoldedCounts):
    """Atom-pair count fingerprint (Carhart et al. 1985: each pair of heavy atoms by their types
    and the number of bonds on the shortest path between them), folded to ``size`` bins.

    Example:
        >>> float(AtomPairCounts(size=64).compute("CCO").sum())  # 3 pairs of 3 atoms
        3.0
    """

    size: int = 2048
    name = "atom_pair_counts"
    prefix = "atompair"

    def compute(self, molecule: MoleculeLike) -> np.ndarray:
        """Counts per bin as one float64 row."""
        generator = rdFingerprintGenerator.GetAtomPairGenerator(fpSize=self.size)
        return generator.GetCountFingerprintAsNumPy(to_heavy_atom_mol(molecule)).astype(np.float64)


@dataclass(frozen=True)
class AvalonCounts(_FoldedCounts):
    """Avalon count fingerprint (Gedeck et al. 2006: paths, rings and atom environments, as in
    RDKit's ``pyAvalonTools.GetAvalonCountFP``), in ``size`` bins.

    Example:
        >>> row = AvalonCounts(size=256).compute("c1ccccc1O")
        >>> row.shape, bool(row.sum() > 0)
        ((256,), True)
    """

    size: int = 1024
    name = "avalon_counts"
    prefix = "avalon"

    def compute(self, molecule: MoleculeLike) -> np.ndarray:
        """Counts per bin as one float64 row."""
        row = np.zeros(self.size)
        for bit, count in pyAvalonTools.GetAvalonCountFP(to_heavy_atom_mol(molecule), nBits=self.size).GetNonzeroElements().items():
            row[bit] = count
        return row


#: Count fingerprints: what the fingerprint kernel compares molecules by.
COUNT_FINGERPRINTS = (MorganCounts, AtomPairCounts, AvalonCounts)
#: Generator classes by name.
GENERATORS: Dict[str, Type[Any]] = {g.name: g for g in (RDKit2D, *COUNT_FINGERPRINTS)}


def kernel_parts(spec: str) -> List[Any]:
    """The count fingerprints of a kernel spec: generator specs joined by ``+``.

    Example:
        >>> kernel_parts("morgan_counts:radius=1:size=16+atom_pair_counts:size=8")
        [MorganCounts(radius=1, size=16), AtomPairCounts(size=8)]
    """
    texts = str(spec).split("+")
    if not all(text.strip() for text in texts):
        raise ConfigError(f"the fingerprint kernel spec {spec!r} has an empty part: join count fingerprints by '+', "
                          "e.g. morgan_counts+atom_pair_counts")
    parts = [get_generator(text) for text in texts]
    repeated = sorted({generator_spec(part) for part in parts if parts.count(part) > 1})
    if repeated:
        raise ConfigError(f"the fingerprint kernel spec {spec!r} names {', '.join(repeated)} more than once: give each fingerprint once")
    for part in parts:
        if not isinstance(part, COUNT_FINGERPRINTS):
            raise ConfigError(f"the fingerprint kernel reads count fingerprints ({', '.join(g.name for g in COUNT_FINGERPRINTS)}, "
                              f"joined by '+'), not {generator_spec(part)!r} in {spec!r}")
    return parts


def kernel_segments(spec: str) -> Tuple[int, ...]:
    """The bins of each count fingerprint of a kernel spec, in order (the kernel averages one
    similarity per fingerprint).

    Example:
        >>> kernel_segments("morgan_counts+atom_pair_counts+avalon_counts")
        (2048, 2048, 1024)
    """
    return tuple(part.size for part in kernel_parts(spec))


def kernel_fingerprints(spec: str, molecules: Sequence[Any], workers: int = 1) -> np.ndarray:
    """Count fingerprints of ``molecules`` for the fingerprint kernel, as uint8 ``[M, size]``
    (counts above 255 clipped); ``spec`` names one count fingerprint or several joined by ``+``
    (side by side, in order: :func:`kernel_segments`).

    Example:
        >>> kernel_fingerprints("morgan_counts:radius=1:size=16", ["CCO", "C"]).sum(axis=1).tolist()
        [6, 1]
        >>> kernel_fingerprints("morgan_counts:radius=1:size=16+atom_pair_counts:size=8", ["CCO"]).shape
        (1, 24)
    """
    counts = compute_features([generator_spec(part) for part in kernel_parts(spec)], molecules, workers=workers)
    return np.clip(np.nan_to_num(counts), 0, 255).astype(np.uint8)


def get_generator(spec: str) -> Any:
    """The generator named by ``spec``: ``name`` or ``name:key=value:key=value``.

    Example:
        >>> get_generator("morgan_counts:radius=3:size=512")
        MorganCounts(radius=3, size=512)
    """
    name, *options = str(spec).strip().split(":")
    if name not in GENERATORS:
        raise ConfigError(f"unknown feature generator {name!r}; choose from {sorted(GENERATORS)}")
    kwargs: Dict[str, Any] = {}
    fields = {f.name for f in dataclasses.fields(GENERATORS[name])}
    for option in options:
        key, _, value = option.partition("=")
        if key not in fields or not value.strip().lstrip("-").isdigit():
            raise ConfigError(f"bad option {option!r} in feature generator {spec!r}; {name} takes "
                              f"{', '.join(f'{f}=INTEGER' for f in sorted(fields)) or 'no options'}")
        if key in kwargs:
            raise ConfigError(f"option {key!r} is given twice in feature generator {spec!r}; give it once")
        kwargs[key] = int(value)
    return GENERATORS[name](**kwargs)


def generator_spec(generator: Any) -> str:
    """The spec string that :func:`get_generator` turns back into ``generator``.

    Example:
        >>> generator_spec(MorganCounts(radius=3, size=512)), generator_spec(RDKit2D())
        ('morgan_counts:radius=3:size=512', 'rdkit2d')
    """
    options = [f"{f.name}={getattr(generator, f.name)}" for f in dataclasses.fields(generator)]
    return ":".join([generator.name, *options])


def feature_names(specs: Sequence[str]) -> List[str]:
    """Column names of the generators ``specs`` together, in order.

    Example:
        >>> feature_names(["morgan_counts:radius=1:size=2"])
        ['morgan1_0', 'morgan1_1']
    """
    return [name for spec in specs for name in get_generator(spec).feature_names()]


def _compute_rows(specs: Tuple[str, ...], molecules: Sequence[MoleculeLike]) -> Tuple[np.ndarray, List[Optional[str]]]:
    """Rows for ``molecules`` (NaN rows for unreadable ones) and the reason each failed (or None)."""
    rdBase.DisableLog("rdApp.*")
    generators = [get_generator(spec) for spec in specs]
    width = sum(len(g.feature_names()) for g in generators)
    out = np.full((len(molecules), width), np.nan)
    errors: List[Optional[str]] = [None] * len(molecules)
    for row, molecule in enumerate(molecules):
        try:
            out[row] = np.concatenate([g.compute(molecule) for g in generators]) if generators else out[row]
        except InvalidMoleculeError as err:
            errors[row] = str(err)
    return out, errors


def compute_features(specs: Sequence[str], molecules: Sequence[MoleculeLike], workers: int = 1,
                     chunk_size: Optional[int] = None, first_row: int = 0) -> np.ndarray:
    """Features ``[M, F]`` (float64) of ``molecules`` from the generators ``specs``, in the
    column order of :func:`feature_names`; NaN where a value cannot be computed (see the module
    notes). ``workers > 1`` computes parts in that many processes (the pool of
    :func:`~dgl_graphtx.worker_pool.shared_pool`, kept for the next call): parts of ``chunk_size``
    molecules, by default a few parts per process (:func:`~dgl_graphtx.worker_pool.part_bounds`).
    A script that uses more than one must run under ``if __name__ == "__main__":``.

    Raises :class:`~dgl_graphtx.errors.InvalidMoleculeError` naming the first unreadable molecule
    by its row, counted from ``first_row`` (the position of ``molecules`` in a larger corpus).

    Example:
        >>> compute_features(["morgan_counts:radius=0:size=4"], ["C", "CC"]).sum(axis=1).tolist()
        [1.0, 2.0]
    """
    specs = tuple(specs)
    molecules = list(molecules)
    if chunk_size is not None:
        bounds = list(range(0, len(molecules), chunk_size)) + [len(molecules)]
    else:
        bounds = part_bounds(len(molecules), workers)
    if workers > 1 and len(bounds) > 2:
        with parts_in_processes(workers, _compute_part, specs, molecules, bounds) as results:
            parts = list(results)
    else:
        parts = [_compute_rows(specs, molecules)]
    values = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, len(feature_names(specs))))
    errors = [e for p in parts for e in p[1]]
    bad = next((row for row, error in enumerate(errors) if error is not None), None)
    if bad is not None:
        raise InvalidMoleculeError(f"molecule {first_row + bad} ({molecules[bad]!r}) cannot be read for feature generators: {errors[bad]}")
    return values


def _compute_part(specs: Tuple[str, ...], part: List[object]) -> Tuple[np.ndarray, List[Optional[str]]]:
    """What a worker runs: :func:`_compute_rows` of a part sent by :func:`compute_features`."""
    return _compute_rows(specs, [cast(MoleculeLike, received(m)) for m in part])


@dataclass
class FeatureScaler:
    """Per-column centre and scale of extra features, fitted on the training part, stored as plain
    lists (JSON- and ``weights_only``-safe) and applied identically at prediction time.

    ``standard``: mean and standard deviation; ``robust``: median and interquartile range / 1.349
    (the standard deviation of a normal distribution with that range). Fitting ignores
    non-finite values; a column without spread gets scale 1. :meth:`transform` maps non-finite
    values to 0 (the centre) and clips to ``[-clip, clip]``.

    Example:
        >>> scaler = FeatureScaler.fit(np.array([[1.0, 5.0], [3.0, np.nan]]), ["a", "b"])
        >>> scaler.center, scaler.scale
        ([2.0, 5.0], [1.0, 1.0])
        >>> scaler.transform(np.array([[4.0, np.inf]])).tolist()
        [[2.0, 0.0]]
        >>> FeatureScaler.from_dict(scaler.to_dict()) == scaler
        True
    """

    names: List[str]
    center: List[float]
    scale: List[float]
    method: str = "standard"
    clip: float = 10.0

    def __post_init__(self) -> None:
        if self.method not in SCALING_METHODS:
            raise ConfigError(f"feature scaling must be one of {SCALING_METHODS}, got {self.method!r}")
        if not len(self.names) == len(self.center) == len(self.scale):
            raise ConfigError(f"feature scaler has {len(self.names)} names, {len(self.center)} centres and {len(self.scale)} scales")
        if not self.clip > 0:
            raise ConfigError(f"feature scaler clip must be > 0, got {self.clip!r}")

    @classmethod
    def fit(cls, values: np.ndarray, names: Sequence[str], method: str = "standard", clip: float = 10.0) -> "FeatureScaler":
        """Statistics of ``values`` ``[M, F]`` (the training rows)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(names):
            raise ConfigError(f"got features of shape {values.shape} for {len(names)} feature names")
        finite = np.where(np.isfinite(values), values, np.nan)
        center, scale = np.zeros(values.shape[1]), np.ones(values.shape[1])
        seen = np.isfinite(finite).any(axis=0)
        if seen.any():
            part = finite[:, seen]
            if method == "robust":
                low, mid, high = np.nanpercentile(part, [25, 50, 75], axis=0)
                spread = (high - low) / 1.349
                spread = np.where(spread > 0, spread, np.nanstd(part, axis=0))
            else:
                mid, spread = np.nanmean(part, axis=0), np.nanstd(part, axis=0)
            center[seen] = mid
            scale[seen] = np.where(np.isfinite(spread) & (spread > 1e-12), spread, 1.0)
        return cls(list(names), center.tolist(), scale.tolist(), method, float(clip))

    def transform(self, values: np.ndarray) -> np.ndarray:
        """Scaled float32 ``[M, F]``: ``(x - center) / scale``, non-finite to 0, clipped."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(self.names):
            raise ConfigError(f"got features of shape {values.shape}; the scaler expects {len(self.names)} columns")
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = (values - np.asarray(self.center)) / np.asarray(self.scale)
        scaled = np.where(np.isfinite(scaled), scaled, 0.0)
        return np.clip(scaled, -self.clip, self.clip).astype(np.float32)

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict of lists and numbers."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "FeatureScaler":
        """Inverse of :meth:`to_dict`."""
        return cls(list(data["names"]), [float(v) for v in data["center"]], [float(v) for v in data["scale"]],
                   str(data.get("method", "standard")), float(data.get("clip", 10.0)))
