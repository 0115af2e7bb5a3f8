"""Extra features next to the molecular graph: molecule-level ones (named generators such as RDKit
2-D descriptors, and user columns) read by the head with the pooled embedding, and atom-level ones
(a user function, or SDF atom properties) added to the atom encodings.

Flow: :func:`add_extra_features` computes the raw values of a dataset; training fits a
:class:`~dgl_graphtx.featurize.descriptors.FeatureScaler` per level on the training part
(:meth:`ExtraFeatureValues.fit`) and stores the resulting :class:`FittedExtraFeatures` in the
checkpoint; prediction recomputes the generators (and requires the user columns and the atom
function) and scales with the stored statistics.

Example:
    >>> from dgl_graphtx.datasets import MoleculeDataset
    >>> smiles = ["CCO", "CCN", "c1ccccc1", "CC(=O)O"]
    >>> ds = MoleculeDataset(smiles, [[1.0], [2.0], [3.0], [4.0]], progress=False)
    >>> spec = ExtraFeatures(generators=("morgan_counts:radius=1:size=8",))
    >>> values = add_extra_features(ds, spec, smiles)
    >>> fitted = values.fit(train_rows=[0, 1, 2])
    >>> ds[0][0].ndata["mol_features"].shape
    torch.Size([3, 8])
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
import pandas as pd
import torch
from rdkit import Chem, rdBase

from ..atomic_io import atomic_savez, describe_os_error
from ..errors import ConfigError, DamagedFileError
from ..featurize.descriptors import SCALING_METHODS, FeatureScaler, compute_features, feature_names, kernel_fingerprints
from ..featurize.molecule import EXTRA_ATOM_FEATURES, EXTRA_MOLECULE_FEATURES, KERNEL_FINGERPRINTS, MoleculeLike, prepare_input, to_mol
from ..saved_files import read_npz
from .cache import cache_key
from .float32_range import FLOAT32_MAX
from .packed import PackedGraphs
from .report import FEATURE_MASKED, RowIssue

logger = logging.getLogger("dgl_graphtx")

#: A user function giving atom-level features: ``fn(mol) -> [mol.GetNumAtoms(), A]`` in the atom
#: order of ``mol`` (the molecule as read from the input).
AtomFunction = Callable[[Chem.Mol], Any]


@dataclass(frozen=True)
class ExtraFeatures:
    """Which extra features a model reads.

    Args:
        generators: molecule-level generator specs (``rdkit2d``, ``morgan_counts:radius=2:size=2048``;
            see :func:`~dgl_graphtx.featurize.descriptors.get_generator`).
        columns: numeric columns of the input table (or SD properties) used as molecule-level
            features; a blank cell is a missing value (scaled to 0, the training mean).
        atom_properties: SDF atom properties (``atom.dprop.NAME`` / ``atom.prop.NAME`` lists, as
            RDKit reads them) used as atom-level features.
        atom_function: name of the Python function giving atom-level features (recorded for
            reference: the function itself is passed to training and prediction).
        atom_width: number of columns the atom function gives.
        scaling: ``standard`` or ``robust`` (see :class:`FeatureScaler`).
        kernel: the count fingerprints of the fingerprint kernel (a ``morgan_counts``,
            ``atom_pair_counts`` or ``avalon_counts`` spec, or several joined by ``+``, kept side by
            side and unscaled in ``ndata["kernel_fp"]``; see :mod:`dgl_graphtx.models.kernel`), or ``""``.

    Example:
        >>> spec = ExtraFeatures(generators=("morgan_counts:radius=0:size=2",), columns=("logp",))
        >>> spec.molecule_names
        ['morgan0_0', 'morgan0_1', 'logp']
    """

    generators: Tuple[str, ...] = ()
    columns: Tuple[str, ...] = ()
    atom_properties: Tuple[str, ...] = ()
    atom_function: Optional[str] = None
    atom_width: int = 0
    scaling: str = "standard"
    kernel: str = ""

    def __post_init__(self) -> None:
        for name in ("generators", "columns", "atom_properties"):
            object.__setattr__(self, name, tuple(str(v) for v in getattr(self, name)))
        if self.scaling not in SCALING_METHODS:
            raise ConfigError(f"feature scaling must be one of {SCALING_METHODS}, got {self.scaling!r}")
        if self.atom_properties and self.atom_function:
            raise ConfigError("give atom-level features either as SDF atom properties or as a function, not both")
        feature_names(self.generators)  # checks the specs
        if self.kernel:
            kernel_fingerprints(self.kernel, [])  # checks the spec
        twice = sorted(g for g, count in Counter(self.generators).items() if count > 1)
        if twice:
            raise ConfigError(f"feature generator {', '.join(twice)} is named more than once: give each generator once")
        repeated = sorted(n for n, count in Counter(self.molecule_names).items() if count > 1)
        if repeated:
            shown = ", ".join(repeated[:5]) + (f" and {len(repeated) - 5} more" if len(repeated) > 5 else "")
            raise ConfigError(f"extra feature names repeat: {shown} (a feature column named like a generated feature, or two "
                              "generators giving the same features): rename the column or drop a generator")

    @property
    def molecule_names(self) -> List[str]:
        """Names of the molecule-level columns: generator features, then user columns."""
        return feature_names(self.generators) + list(self.columns)

    @property
    def atom_names(self) -> List[str]:
        """Names of the atom-level columns."""
        if self.atom_properties:
            return list(self.atom_properties)
        return [f"{self.atom_function}_{i}" for i in range(self.atom_width)]

    @property
    def any(self) -> bool:
        """Whether any extra feature (or the kernel's fingerprint) is used."""
        return bool(self.molecule_names or self.atom_names or self.kernel)

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "ExtraFeatures":
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


def sdf_atom_properties(names: Sequence[str]) -> AtomFunction:
    """An atom function reading the atom properties ``names`` of SDF records (float; an atom
    without the property is an error naming it).

    Example:
        >>> mol = Chem.MolFromSmiles("CO")
        >>> for atom, q in zip(mol.GetAtoms(), [0.1, -0.4]):
        ...     atom.SetDoubleProp("charge", q)
        >>> sdf_atom_properties(["charge"])(mol).tolist()
        [[0.1], [-0.4]]
    """
    names = list(names)

    def read(mol: Chem.Mol) -> np.ndarray:
        out = np.empty((mol.GetNumAtoms(), len(names)))
        for atom in mol.GetAtoms():
            for column, name in enumerate(names):
                if not atom.HasProp(name):
                    raise ConfigError(f"atom {atom.GetIdx()} of {Chem.MolToSmiles(mol)!r} has no atom property {name!r}; "
                                      "give it in the SDF record (e.g. a '> <atom.dprop.NAME>' list) or drop it")
                out[atom.GetIdx(), column] = float(atom.GetProp(name))
        return out

    return read


def column_values(frame: Optional[pd.DataFrame], columns: Sequence[str], ids: Sequence[str], source: str = "the input") -> np.ndarray:
    """User feature columns as float64 ``[M, C]``: blanks become NaN; text that is not a number is
    an error naming the row and column; a missing column is an error naming it.

    Example:
        >>> column_values(pd.DataFrame({"a": [1, None]}), ["a"], ["C", "CC"]).tolist()
        [[1.0], [nan]]
    """
    if not columns:
        return np.zeros((len(ids), 0))
    available = [] if frame is None else list(frame.columns)
    for name in columns:
        if name not in available:
            raise ConfigError(f"feature column {name!r} not found in {source}; available columns: {available}")
    assert frame is not None  # it holds every column (checked above)
    bad = non_numeric_cells(frame, columns)
    if bad:
        row = min(bad)
        raise ConfigError(f"row {row + 1}, molecule {ids[row]!r}: {bad[row]}")
    out = np.empty((len(frame), len(columns)))
    for col, name in enumerate(columns):
        out[:, col] = pd.to_numeric(frame[name].reset_index(drop=True), errors="coerce").to_numpy(dtype=np.float64)
    return out


def non_numeric_cells(frame: Optional[pd.DataFrame], columns: Sequence[str]) -> Dict[int, str]:
    """Per row (position in ``frame``) of a cell in ``columns`` holding text that is not a number,
    why (its first such column); blanks are missing values, not errors.

    Example:
        >>> non_numeric_cells(pd.DataFrame({"a": [1, "x", None, " "]}), ["a"])
        {1: "feature column 'a' holds 'x', not a number; fix or blank it"}
    """
    found: Dict[int, str] = {}
    if frame is None:
        return found
    for name in columns:
        if name not in frame.columns:
            continue
        raw = frame[name].reset_index(drop=True)
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        blank = raw.isna().to_numpy() | raw.astype(str).str.strip().isin(["", "nan", "NaN", "NA", "N/A", "None"]).to_numpy()
        for row in np.flatnonzero(np.isnan(values) & ~blank).tolist():
            found.setdefault(row, f"feature column {name!r} holds {raw.iloc[row]!r}, not a number; fix or blank it")
    return dict(sorted(found.items()))


def check_feature_columns(frame: Optional[pd.DataFrame], columns: Sequence[str], ids: Sequence[str], source: str = "the input") -> None:
    """Refuse user feature columns that a model could not learn from, before any featurization:
    a missing column or a text cell (see :func:`column_values`), or a column blank in every row.

    Example:
        >>> check_feature_columns(pd.DataFrame({"logp": [None, " "]}), ["logp"], ["C", "CC"], "d.csv")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: feature column 'logp' of d.csv is blank in all 2 rows: it holds nothing to learn from; ...
    """
    values = column_values(frame, columns, ids, source)
    for col, name in enumerate(columns):
        if len(values) and np.isnan(values[:, col]).all():
            raise ConfigError(f"feature column {name!r} of {source} is blank in all {len(values)} rows: it holds nothing to "
                              "learn from; fill it, or leave it out of --features-cols")


#: Why values were masked: ``(molecule index, reason)`` pairs.
MaskNotes = List[Tuple[int, str]]


def masked_out_of_range(values: np.ndarray, names: Sequence[str], owners: Optional[np.ndarray] = None
                        ) -> Tuple[np.ndarray, MaskNotes]:
    """``values`` (rows of features named ``names``) with the entries a float32 model input cannot
    hold, infinite or beyond float32's range, set to NaN, which scaling treats as missing (0, the
    training mean), and why, per molecule (``owners[row]``, default: the row itself). Left in, one
    such value used to overflow the scaler and turn its whole column into a constant.

    Example:
        >>> values, notes = masked_out_of_range(np.array([[1.0, 1e308], [-np.inf, 2.0]]), ["a", "b"])
        >>> values.tolist(), notes[0]
        ([[1.0, nan], [nan, 2.0]], (0, "value 1e+308 of extra feature 'b' is beyond float32's range (|x| > 3.403e+38): used as missing"))
    """
    values = np.array(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = np.isinf(values) | (np.abs(values) > FLOAT32_MAX)  # NaN stays: it is missing already
    notes = []
    for row, col in zip(*np.nonzero(bad)):
        value = values[row, col]
        why = "is not finite" if np.isinf(value) else f"is beyond float32's range (|x| > {FLOAT32_MAX:.4g})"
        owner = int(owners[row]) if owners is not None else int(row)
        notes.append((owner, f"value {value:g} of extra feature {names[col]!r} {why}: used as missing"))
    values[bad] = np.nan
    return values, notes


def molecule_values(spec: ExtraFeatures, molecules: Sequence[MoleculeLike], frame: Optional[pd.DataFrame] = None,
                    ids: Optional[Sequence[str]] = None, workers: int = 1, source: str = "the input",
                    cache: Optional[Path] = None) -> Tuple[np.ndarray, MaskNotes]:
    """Raw molecule-level features ``[M, F]`` (generators, then the user columns of ``frame``),
    out-of-range values masked (:func:`masked_out_of_range`), and the notes of the masking and of
    the generated values that could not be computed (:func:`uncomputed_notes`); the generators'
    values read from, or else written to, the file ``cache`` when one is named."""
    ids = list(ids) if ids is not None else [str(m) for m in molecules]
    generated = _generated(spec.generators, molecules, workers, cache)
    values, masked = masked_out_of_range(np.concatenate([generated, column_values(frame, spec.columns, ids, source)], axis=1),
                                         spec.molecule_names)
    return values, uncomputed_notes(generated, feature_names(spec.generators)) + masked


def uncomputed_notes(generated: np.ndarray, names: Sequence[str]) -> MaskNotes:
    """One note per molecule whose generated features (rows of ``generated``, columns ``names``)
    hold values RDKit could not compute (NaN: e.g. the BCUT2D descriptors of salts, the partial
    charges of molecules with metals), used as missing (the training centre once scaled).

    Example:
        >>> uncomputed_notes(np.array([[1.0, 2.0], [np.nan, 3.0]]), ["MolWt", "BCUT2D_MWHI"])
        [(1, '1 generated feature value(s) could not be computed (MolWt): used as missing (the training centre)')]
    """
    notes = []
    undefined = np.isnan(generated)
    for row in np.flatnonzero(undefined.any(axis=1)):
        missing = [names[int(col)] for col in np.flatnonzero(undefined[row])]
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        notes.append((int(row), f"{len(missing)} generated feature value(s) could not be computed ({shown}): "
                                "used as missing (the training centre)"))
    return notes


#: What becomes of a damaged file of cached generator values.
RECOMPUTE = "computing the features again"


def _generated(specs: Tuple[str, ...], molecules: Sequence[MoleculeLike], workers: int, cache: Optional[Path]) -> np.ndarray:
    """:func:`~dgl_graphtx.featurize.descriptors.compute_features` of ``molecules``, read from the
    file ``cache`` when it holds them (a damaged or foreign file is computed again, with a warning)
    and written to it otherwise (a cache that cannot be written is only a warning)."""
    width = len(feature_names(specs))
    if cache is not None and cache.exists():
        try:
            stored = read_npz(cache, RECOMPUTE, ["values", "sha256"])
            assert stored is not None  # not optional
            values = stored["values"]
            if values.dtype != np.float64 or values.shape != (len(molecules), width):
                raise DamagedFileError(f"{cache} holds {values.dtype} values of shape {values.shape}, not float64 "
                                       f"{(len(molecules), width)}; {RECOMPUTE}")
            if str(stored["sha256"]) != _values_digest(values):
                raise DamagedFileError(f"{cache} changed after it was written (its values do not match the SHA-256 stored "
                                       f"with them); {RECOMPUTE}")
            logger.info("extra features read from the cache %s", cache)
            return values
        except DamagedFileError as err:
            logger.warning("%s", err)
    values = compute_features(specs, molecules, workers=workers)
    if cache is not None and specs:
        try:
            atomic_savez(cache, values=values, sha256=np.array(_values_digest(values)))
        except OSError as err:
            logger.warning("extra features not cached (%s)", describe_os_error(err))
    return values


def _values_digest(values: np.ndarray) -> str:
    """The SHA-256 of float64 ``values`` (their shape included), stored with a cache of them."""
    digest = hashlib.sha256(str(values.shape).encode())
    digest.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return digest.hexdigest()


def features_cache(dataset: Any, spec: ExtraFeatures) -> Optional[Path]:
    """The file caching the generators' values of ``dataset`` beside its featurized molecules
    (``None`` when the dataset is not cached or ``spec`` names no generator): keyed by the
    dataset's own cache file (its inputs and featurizer), the generators and RDKit's release."""
    cache_file = getattr(dataset, "cache_file", None)
    if cache_file is None or not spec.generators:
        return None
    key = cache_key({"dataset": cache_file.name, "generators": list(spec.generators), "rdkit": rdBase.rdkitVersion})
    return Path(cache_file).with_name(f"features-{key}.npz")


def atom_values(spec: ExtraFeatures, molecules: Sequence[MoleculeLike], graphs: PackedGraphs,
                function: Optional[AtomFunction]) -> Tuple[np.ndarray, MaskNotes]:
    """Raw atom-level features ``[N, A]`` in the node order of ``graphs`` (graph ``i`` is
    ``molecules[i]``); hydrogens added by the featurizer get NaN (scaled to 0); out-of-range values
    masked (:func:`masked_out_of_range`, noted per molecule)."""
    if spec.atom_properties:
        function = sdf_atom_properties(spec.atom_properties)
    if function is None:
        raise ConfigError(f"the model reads atom-level features from the function {spec.atom_function!r}: pass it "
                          "as atom_function=...")
    width = len(spec.atom_names)
    out = np.full((int(graphs.num_nodes.sum()), width), np.nan)
    input_atom = graphs.ndata["input_atom"].numpy()
    for index, molecule in enumerate(molecules):
        mol = to_mol(molecule)
        values = np.asarray(function(mol), dtype=np.float64).reshape(mol.GetNumAtoms(), -1)
        if values.shape[1] != width:
            raise ConfigError(f"the atom feature function gave {values.shape[1]} columns for {Chem.MolToSmiles(mol)!r}, expected {width}")
        start, count = int(graphs.node_offsets[index]), int(graphs.num_nodes[index])
        order = input_atom[start:start + count]
        out[start:start + count][order >= 0] = values[order[order >= 0]]
    owners = np.repeat(np.arange(len(molecules)), graphs.num_nodes.numpy()[:len(molecules)])
    return masked_out_of_range(out, spec.atom_names, owners)


@dataclass
class FittedExtraFeatures:
    """The extra features of a trained model with their scalers: stored in checkpoints (as plain
    lists) and applied identically at prediction time."""

    spec: ExtraFeatures
    molecule_scaler: Optional[FeatureScaler] = None
    atom_scaler: Optional[FeatureScaler] = None
    #: The RDKit release the features were computed with when the scalers were fitted ("" when
    #: a checkpoint written before it was recorded).
    rdkit_version: str = rdBase.rdkitVersion

    def attach(self, graphs: PackedGraphs, molecule_raw: Optional[np.ndarray], atom_raw: Optional[np.ndarray]) -> None:
        """Scale raw values and put them on ``graphs`` (every graph taken out then carries them)."""
        if self.molecule_scaler is not None:
            assert molecule_raw is not None  # a scaler is fitted on raw values
            graphs.graph_data[EXTRA_MOLECULE_FEATURES] = torch.from_numpy(self.molecule_scaler.transform(molecule_raw))
        if self.atom_scaler is not None:
            assert atom_raw is not None  # a scaler is fitted on raw values
            graphs.ndata[EXTRA_ATOM_FEATURES] = torch.from_numpy(self.atom_scaler.transform(atom_raw))

    def compute_and_attach(self, graphs: PackedGraphs, molecules: Sequence[MoleculeLike], frame: Optional[pd.DataFrame],
                           ids: Sequence[str], atom_function: Optional[AtomFunction] = None, molecule_level: bool = True,
                           workers: int = 1) -> MaskNotes:
        """Compute the raw features of ``molecules`` (graph ``i`` of ``graphs``) and attach them
        (only the atom-level ones without ``molecule_level``); the values masked, as at training
        time (:func:`masked_out_of_range`), by molecule. ``workers`` > 1 computes the generators
        in that many processes (see :func:`~dgl_graphtx.featurize.descriptors.compute_features`)."""
        notes: MaskNotes = []
        if self.spec.kernel and molecule_level:
            graphs.graph_data[KERNEL_FINGERPRINTS] = torch.from_numpy(kernel_fingerprints(self.spec.kernel, molecules, workers))
        if self.molecule_scaler is not None and molecule_level:
            raw, masked = molecule_values(self.spec, molecules, frame, ids, workers)
            graphs.graph_data[EXTRA_MOLECULE_FEATURES] = torch.from_numpy(self.molecule_scaler.transform(raw))
            notes += masked
        if self.atom_scaler is not None:
            raw, masked = atom_values(self.spec, molecules, graphs, atom_function)
            graphs.ndata[EXTRA_ATOM_FEATURES] = torch.from_numpy(self.atom_scaler.transform(raw))
            notes += masked
        return notes

    def to_dict(self) -> Dict[str, Any]:
        """Plain dict (JSON- and ``weights_only``-safe)."""
        return {"spec": self.spec.to_dict(),
                "molecule_scaler": self.molecule_scaler.to_dict() if self.molecule_scaler else None,
                "atom_scaler": self.atom_scaler.to_dict() if self.atom_scaler else None,
                "rdkit_version": self.rdkit_version}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "FittedExtraFeatures":
        """Inverse of :meth:`to_dict`; a :class:`~dgl_graphtx.errors.ConfigError` when this RDKit
        names the generators' features otherwise than the one the model was trained with (RDKit
        adds descriptors from release to release)."""
        fitted = cls(ExtraFeatures.from_dict(data["spec"]),
                     FeatureScaler.from_dict(data["molecule_scaler"]) if data.get("molecule_scaler") else None,
                     FeatureScaler.from_dict(data["atom_scaler"]) if data.get("atom_scaler") else None,
                     str(data.get("rdkit_version", "")))
        if fitted.molecule_scaler is not None and fitted.molecule_scaler.names != fitted.spec.molecule_names:
            trained, here = fitted.molecule_scaler.names, fitted.spec.molecule_names
            missing, extra = [n for n in trained if n not in here], [n for n in here if n not in trained]
            raise ConfigError(f"the model reads {len(trained)} molecule-level features ({', '.join(fitted.spec.generators)}) and "
                              f"RDKit {rdBase.rdkitVersion} gives {len(here)} (missing {missing[:3]}, new {extra[:3]}): predict "
                              f"with the RDKit release the model was trained with ({fitted.rdkit_version or 'not recorded'})")
        return fitted


@dataclass
class ExtraFeatureValues:
    """Raw extra features of a dataset (``molecule``: ``[M, F]`` in dataset order; ``atom``:
    ``[N, A]`` in node order), kept on the dataset as ``dataset.extra_values`` until a training
    run fits the scalers on its training part."""

    spec: ExtraFeatures
    graphs: PackedGraphs
    molecule: Optional[np.ndarray] = None
    atom: Optional[np.ndarray] = None

    def fit(self, train_rows: Sequence[int]) -> FittedExtraFeatures:
        """Fit the scalers on the dataset rows ``train_rows`` and attach scaled values to the dataset."""
        rows = np.asarray(list(train_rows), dtype=np.int64)
        mol_scaler = atom_scaler = None
        if self.molecule is not None:
            mol_scaler = FeatureScaler.fit(self.molecule[rows], self.spec.molecule_names, self.spec.scaling)
        if self.atom is not None:
            offsets, counts = self.graphs.node_offsets.numpy(), self.graphs.num_nodes.numpy()
            nodes = np.concatenate([np.arange(offsets[r], offsets[r] + counts[r]) for r in rows]) if len(rows) else np.zeros(0, np.int64)
            atom_scaler = FeatureScaler.fit(self.atom[nodes], self.spec.atom_names, self.spec.scaling)
        fitted = FittedExtraFeatures(self.spec, mol_scaler, atom_scaler)
        fitted.attach(self.graphs, self.molecule, self.atom)
        return fitted


def add_extra_features(dataset: Any, spec: ExtraFeatures, molecules: Sequence[Optional[MoleculeLike]],
                       frame: Optional[pd.DataFrame] = None, atom_function: Optional[AtomFunction] = None,
                       workers: int = 1, source: str = "the input") -> ExtraFeatureValues:
    """Compute the raw extra features of a :class:`~dgl_graphtx.datasets.MoleculeDataset` and keep
    them on it (``dataset.extra_values``); training then fits their scalers on its training part.

    ``molecules`` (and the rows of ``frame``, for user columns) are the inputs in the order the
    dataset was built from (its ``rows`` pick the featurized ones): e.g. a
    :class:`~dgl_graphtx.datasets.MoleculeTable`'s ``molecules`` and ``frame``.
    """
    picked = dataset.rows.tolist()
    chosen = [prepare_input(cast(MoleculeLike, molecules[r]), dataset.featurizer.config) for r in picked]  # as featurized
    ids = list(dataset.identifiers)
    part = frame.iloc[picked].reset_index(drop=True) if frame is not None else None
    notes: MaskNotes = []
    mol_raw = atom_raw = None
    if spec.molecule_names:
        mol_raw, masked = molecule_values(spec, chosen, part, ids, workers, source, features_cache(dataset, spec))
        notes += masked
    if atom_function is not None and spec.atom_function is None:
        probe = to_mol(chosen[0])
        width = np.asarray(atom_function(probe), dtype=np.float64).reshape(probe.GetNumAtoms(), -1).shape[1]
        spec = dataclasses.replace(spec, atom_function=getattr(atom_function, "__qualname__", "atom_function"), atom_width=width)
    if spec.atom_names:
        atom_raw, masked = atom_values(spec, chosen, dataset.graphs, atom_function)
        notes += masked
    if spec.kernel:  # unscaled: attached now, nothing to fit
        dataset.graphs.graph_data[KERNEL_FINGERPRINTS] = torch.from_numpy(kernel_fingerprints(spec.kernel, chosen, workers))
    for index, reason in notes:
        dataset.report.add(RowIssue(picked[index], ids[index], reason, FEATURE_MASKED))
    logger.info("extra features of %d molecules: %s", len(chosen), describe_extra_features(spec))
    if notes:
        logger.warning("extra feature values of %d molecule(s) used as missing (first: %s; all in the input report)",
                       len({index for index, _ in notes}), notes[0][1])
    values = ExtraFeatureValues(spec, dataset.graphs, mol_raw, atom_raw)
    dataset.extra_values = values
    return values


def describe_extra_features(spec: ExtraFeatures) -> str:
    """How many extra features of each source ``spec`` reads, in words.

    Example:
        >>> describe_extra_features(ExtraFeatures(generators=("rdkit2d",), columns=("logp",)))  # doctest: +ELLIPSIS
        '... molecule-level from rdkit2d, 1 molecule-level from the column logp'
    """
    parts = [f"{len(feature_names([g]))} molecule-level from {g}" for g in spec.generators]
    if spec.columns:
        parts.append(f"{len(spec.columns)} molecule-level from the column{'s' if len(spec.columns) > 1 else ''} {', '.join(spec.columns)}")
    if spec.atom_names:
        source = "SDF atom properties" if spec.atom_properties else f"the function {spec.atom_function}"
        parts.append(f"{len(spec.atom_names)} atom-level from {source}")
    if spec.kernel:
        parts.append(f"{spec.kernel} fingerprints for the fingerprint kernel")
    return ", ".join(parts) or "none"
