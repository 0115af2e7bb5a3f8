"""SMILES in, predictions out: batched inference from a checkpoint, one row per input.

Inputs are processed in chunks (featurize, predict, hand back the chunk's rows), so memory stays
bounded whatever the input size; :meth:`Predictor.predict_chunks` yields each chunk's table as soon
as it is done, which the command line appends to its output file. No input can stop a run:
invalid SMILES, molecules above the size budgets, and molecules whose batch runs out of memory get
NaN and an ``error`` saying why, and everything else is predicted.
"""
from __future__ import annotations

import copy
import functools
import logging
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union, cast

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from ..checkpoint import LoadedCheckpoint, load_checkpoint
from ..datasets import EdgeBudgetBatchSampler, MoleculeBatch, MoleculeTable, read_molecules
from ..datasets.class_labels import ClassLabels, class_labels_from_meta
from ..datasets.extra_features import AtomFunction, FittedExtraFeatures, non_numeric_cells
from ..datasets.molecule_columns import MoleculeColumns
from ..datasets.featurized import Featurized, featurize_and_pack
from ..datasets.padding import PaddingOverflow, pad_batch
from ..devices import resolve_compute, resolve_device
from ..errors import ConfigError, InvalidMoleculeError
from ..featurize import MoleculeFeaturizer, SizeLimits, describe_molecule
from ..featurize.molecule import MoleculeLike, prepare_input, to_mol
from ..featurize.similarity import SIMILARITY_COLUMN, nearest_similarity, packed_fingerprints
from ..insight.attention_maps import AttentionMaps, attention_maps
from ..insight.integrated_gradients import repeated_batch
from ..training.outputs import prediction_column, prediction_frame
from ..uncertainty import Calibration
from ..uncertainty.calibration import no_spread_advice
from ..uncertainty.config import stored_settings
from ..uncertainty.methods import check_method_fits, uncertainty_method
from ..uncertainty.evaluation import UncertainPredictions, add_uncertainty_columns, calibrated
from ..uncertainty.inference import predict_with_uncertainty
from ..validation import check_number
from .captured_forward import CapturedForward, prediction_shape
from .checkpoint_paths import single_checkpoint
from .domain import Domain
from .explain import (ExplainedOutput, ExplainSettings, Explanations, add_explanation_columns, atom_table, explain_featurized,
                      explained_output, with_settings)
from .input_chunks import as_inputs, indexed_like, indexed_rows, input_chunks
from .level_outputs import LevelPredictions, add_level_columns, in_input_order, level_batch, level_tables
from .row_inputs import attach_row_values, stored_level_targets

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
#: Most molecules per forward pass (``batch_size``).
BATCH_SIZE = 256
#: Most relation-graph edges per forward pass (``batch_edges``), which bounds the memory of a step.
BATCH_EDGES = 2_000_000
#: Molecules featurized and held in memory at a time (``chunk_size``).
CHUNK_SIZE = 4096
#: What one batch step gives (predictions, or embeddings).
BatchResult = TypeVar("BatchResult")


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is torch running out of (CPU or GPU) memory.

    Example:
        >>> is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        True
    """
    text = str(err).lower()
    return isinstance(err, (RuntimeError, MemoryError)) and (
        isinstance(err, MemoryError) or "out of memory" in text or "can't allocate memory" in text
    )


def canonical_smiles(molecule: MoleculeLike) -> Optional[str]:
    """RDKit's canonical SMILES of a SMILES string or molecule; ``None`` when it cannot be read.

    Example:
        >>> canonical_smiles("OCC"), canonical_smiles("C1CC"), canonical_smiles(("OCC", "O"))
        ('CCO', None, 'CCO.O')
    """
    if isinstance(molecule, tuple):  # a row of several molecules: each one's, in the row's order
        parts = [canonical_smiles(part) for part in molecule]
        return None if any(part is None for part in parts) else ".".join(parts)  # type: ignore[arg-type]  # none is None here
    try:
        return Chem.MolToSmiles(to_mol(molecule))
    except (InvalidMoleculeError, ValueError, RuntimeError):
        return None


def with_carried_columns(table: pd.DataFrame, carried: Optional[pd.DataFrame], start: int) -> pd.DataFrame:
    """``table`` (rows ``start`` onwards of the input) with the matching rows of ``carried`` (ids,
    kept columns) in front; a carried column named like an output column is an error.

    Example:
        >>> with_carried_columns(pd.DataFrame({"smiles": ["C"]}), pd.DataFrame({"id": ["a", "b"]}), 1).values.tolist()
        [['b', 'C']]
    """
    if carried is None or carried.shape[1] == 0:
        return table
    clash = [c for c in carried.columns if c in table.columns]
    if clash:
        raise ConfigError(f"carried column(s) {clash} (--id-col / --keep-cols) have the names of output columns; "
                          f"the output already has {list(table.columns)}")
    rows = carried.iloc[start:start + len(table)].reset_index(drop=True)
    return pd.concat([rows, table.reset_index(drop=True)], axis=1)


class Embeddings(NamedTuple):
    """What :meth:`Predictor.embed` returns.

    Attributes:
        table: one row per input: carried columns (when given), ``smiles`` (or the given
            identifiers), ``canonical_smiles`` and ``error``; a pandas Series input's index.
        molecules: ``[M, d]`` float32 molecule representations, NaN rows for invalid inputs.
        atoms: per input, ``[n_atoms, d]`` final atom states (``None`` for invalid inputs), when asked for.
    """

    table: pd.DataFrame
    molecules: np.ndarray
    atoms: Optional[List[Optional[np.ndarray]]]


class Predictor:
    """Reusable predictor: loads a checkpoint once, featurizes inputs with the checkpoint's own
    settings, and runs batched inference on CPU or CUDA.

    Invalid molecules never raise: their predictions are NaN and the ``error`` column says why.
    Molecules unlike the training set (dummy atoms, elements it lacked, more atoms or fragments
    than any training molecule; see :class:`~dgl_graphtx.inference.Domain`) are predicted, with the
    reason in the ``warning`` column.

    Args:
        checkpoint: a checkpoint written by training, a run folder holding one (its ``best.pt``),
            or an already loaded checkpoint.
        device: ``auto``, ``cpu``, ``cuda``...
        batch_size: most molecules per forward pass (an explanation's pass holds each of them
            once per integration step, within ``batch_edges``); molecules of like size are batched
            together, and the output keeps the input's order.
        limits: per-molecule budgets (atoms, relation-graph edges); molecules above them are
            reported with the reason and NaN.
        batch_edges: most relation-graph edges per forward pass (batches are cut by this budget
            as well as by ``batch_size``), which bounds the memory of one step.
        chunk_size: molecules featurized and held in memory at a time.
        compute: ``auto``, ``dgl`` or ``tensors`` (see :func:`~dgl_graphtx.devices.resolve_compute`).
        uncertainty: uncertainty method, by default the one the checkpoint was trained with;
            ``mc_dropout`` samples dropout with any model, ``none`` turns it off. A ``<target>_std``
            column follows each target, and ``<target>_lo`` / ``<target>_hi`` (the conformal
            interval) when the checkpoint holds a calibration for the method. A checkpoint trained
            with ``--calibration-bins similarity`` also gives a ``similarity_to_training`` column
            (nearest-neighbour Tanimoto similarity to its training part) and takes each
            molecule's interval from its similarity bin.
        mc_samples: stochastic passes of ``mc_dropout`` (default: the checkpoint's, else 20).
        atom_function: the function giving atom-level extra features, for a model trained with
            one (see :mod:`dgl_graphtx.datasets.extra_features`).
        explain: explain one target of every prediction (see :mod:`~dgl_graphtx.inference.explain`):
            the table gets its ``<target>_baseline`` and ``<target>_contributions`` (per atom) columns.
        molecule_columns: for a model of several molecules per row, the columns of a file holding
            each row's molecules, and those holding their mixture weights (of a file, or of the
            ``features`` of :meth:`predict`); default: those the model was trained with.
        workers: processes featurizing each chunk, graphs and extra features (such as the default's
            RDKit descriptors) alike (the same results; featurization is most of a prediction's
            time on the CPU); the processes start once and serve every later chunk.
            A script that uses more than one must run under ``if __name__ == "__main__":``.
        capture: on a CUDA device with the tensor compute path, record the prediction pass of
            each padded batch shape in a CUDA graph and replay it (one launch per batch; see
            :mod:`~dgl_graphtx.inference.captured_forward`) for point predictions and a model's
            own uncertainty head; ``False`` runs every batch eagerly. The CPU always runs eagerly.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
        ...                        CheckpointMeta(p.featurizer, p.relation, ["logS"]))
        >>> table = Predictor(path).predict(["OCC", "not a smiles"])
        >>> list(table.columns), table["canonical_smiles"][0], table["error"].isna().tolist()
        (['smiles', 'canonical_smiles', 'logS_pred', 'error', 'warning'], 'CCO', [True, False])
    """

    def __init__(
        self,
        checkpoint: Union[PathLike, LoadedCheckpoint],
        device: str = "auto",
        batch_size: int = BATCH_SIZE,
        limits: SizeLimits = SizeLimits(),
        batch_edges: int = BATCH_EDGES,
        chunk_size: int = CHUNK_SIZE,
        compute: str = "auto",
        uncertainty: Optional[str] = None,
        mc_samples: Optional[int] = None,
        atom_function: Optional[AtomFunction] = None,
        explain: Optional[ExplainSettings] = None,
        molecule_columns: Optional[MoleculeColumns] = None,
        workers: int = 1,
        capture: bool = True,
    ) -> None:
        check_number("batch_size", batch_size, 1, integer=True)
        check_number("workers", workers, 1, integer=True)
        check_number("batch_edges", batch_edges, 1, integer=True)
        check_number("chunk_size", chunk_size, 1, integer=True)
        if not isinstance(limits, SizeLimits):
            raise ConfigError(f"limits must be a SizeLimits, got {type(limits).__name__}")
        self.device = resolve_device(device)
        self.compute = resolve_compute(compute, self.device)
        loaded = checkpoint if isinstance(checkpoint, LoadedCheckpoint) else load_checkpoint(single_checkpoint(checkpoint, "Predictor"))
        self.model = loaded.model.to(self.device).eval()
        self.meta = loaded.meta
        self.featurizer = MoleculeFeaturizer(loaded.meta.featurizer, loaded.meta.relation, limits)
        extras = loaded.meta.extra
        self.domain = Domain.from_dict(extras.domain)
        self.uncertainty, calibration = stored_settings(extras.to_dict(), uncertainty, mc_samples)
        check_method_fits(self.uncertainty.method, self.model.config.task)
        method = uncertainty_method(self.uncertainty.method)
        if method.std == "members":
            raise ConfigError(f"uncertainty {method.name!r} needs several checkpoints: use ensemble_predict (or repeat --checkpoint)")
        if method.has_head and method.name != self.model.config.uncertainty_head:
            raise ConfigError(f"uncertainty {method.name!r} needs a model trained with it; this checkpoint has "
                              f"head {self.model.config.uncertainty_head!r} (use mc_dropout or none)")
        self.calibration = Calibration.from_dict(calibration)
        fingerprints = extras.training_fingerprints
        #: The training part's packed fingerprints (``[N, 256]`` uint8), when the checkpoint stores them.
        self.training_fingerprints = fingerprints.numpy() if isinstance(fingerprints, torch.Tensor) else None
        self.batch_size = batch_size
        self.batch_edges = batch_edges
        self.chunk_size = chunk_size
        self.workers = workers
        self.extras = FittedExtraFeatures.from_dict(extras.extra_features) if extras.extra_features else None
        #: The columns the model's rows of several molecules were read from in training, those it reads them
        #: from now (``molecule_columns``, else the same), and its atom- and bond-level targets.
        self.trained_columns = MoleculeColumns.from_dict(extras.molecule_columns)
        self.molecule_columns = self._rows_from(molecule_columns)
        self.level_targets = stored_level_targets(self.model.config.levels, extras.levels)
        if self.model.levels is not None and self.uncertainty.method != "none":
            raise ConfigError(f"a model with atom- or bond-level targets predicts without an uncertainty method; drop "
                              f"--uncertainty {self.uncertainty.method}")
        self.atom_function = atom_function
        self._warn_if_kernel_leaves_no_spread()
        #: The output every prediction is explained for, or ``None``.
        self.explained: Optional[ExplainedOutput] = None if explain is None else explained_output(self.model, self.target_names, explain)
        #: The recorded prediction passes (on CUDA, see ``capture``), or ``None``.
        self.captured: Optional[CapturedForward] = (
            CapturedForward(self._predict_tensor, self.device)
            if capture and self.device.type == "cuda" and self.compute == "tensors" and self.model.levels is None
            and method.std != "dropout" else None)

    @property
    def target_names(self) -> List[str]:
        """Names of the predicted columns."""
        return list(self.meta.target_names)

    @property
    def class_labels(self) -> Tuple[ClassLabels, ...]:
        """Text classes the training labels were mapped from (classification; empty for 0/1 labels):
        predictions are probabilities of each target's ``positive`` class."""
        return class_labels_from_meta(self.meta.extra.class_labels)

    def predict(
        self,
        molecules: Union[MoleculeLike, Iterable[MoleculeLike]],
        progress: bool = False,
        identifiers: Optional[Sequence[str]] = None,
        carried: Optional[pd.DataFrame] = None,
        features: Optional[pd.DataFrame] = None,
    ) -> pd.DataFrame:
        """Predict every input (one SMILES / molecule, or any iterable of them: list, pandas Series,
        numpy array); returns the ``carried`` columns (ids and kept columns, one row per input, e.g.
        :meth:`~dgl_graphtx.datasets.MoleculeTable.carried_columns`), ``smiles`` (the input as
        given, or ``identifiers``), ``canonical_smiles``, one column per target (``<target>_pred``), ``error`` and ``warning``.
        ``features``: a table, one row per input, holding the user feature columns the model was
        trained with (``--features-cols``). The rows of a pandas Series keep its index (other inputs
        are numbered from 0), so ``df["y_pred"] = predictor.predict(df["smiles"])["y_pred"]`` lines up
        with ``df``'s rows even after a filter; a DataFrame is refused (pass its column of SMILES)."""
        chunks = list(self.predict_chunks(molecules, progress, identifiers, carried, features))
        if not chunks:  # no input: the columns a chunk has (uncertainty, explanations, levels), no row
            return with_carried_columns(self._predict_chunk([], [], None if features is None else features.iloc[:0]), carried, 0)
        return indexed_like(pd.concat(chunks, ignore_index=True), molecules)

    def predict_chunks(
        self,
        molecules: Union[MoleculeLike, Iterable[MoleculeLike]],
        progress: bool = False,
        identifiers: Optional[Sequence[str]] = None,
        carried: Optional[pd.DataFrame] = None,
        features: Optional[pd.DataFrame] = None,
    ) -> Iterator[pd.DataFrame]:
        """Like :meth:`predict`, but yields one table per ``chunk_size`` inputs, in input order, as
        soon as each is done (memory holds one chunk's graphs at a time)."""
        self._check_feature_columns(features)
        for start, chunk, names in input_chunks(molecules, self.chunk_size, progress, identifiers, carried, self._prepare):
            table = self._predict_chunk(chunk, names, self._feature_rows(features, start, len(chunk)))
            yield with_carried_columns(table, carried, start)

    def predict_file(self, path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None,
                     progress: bool = False, id_col: Optional[str] = None, keep_cols: Sequence[str] = ()) -> pd.DataFrame:
        """Predict every molecule of a file: CSV/TSV (gzipped too), SDF / ``.sdf.gz`` or ``.smi``
        (see :func:`~dgl_graphtx.datasets.read_molecules`); unreadable SDF records are named by
        their record number in the ``smiles`` column. SDF titles and ``.smi`` names come first as
        ``name``, then ``id_col`` and ``keep_cols`` (table columns or SD properties).

        Example:
            >>> import tempfile
            >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
            >>> from dgl_graphtx.datasets import example_sdf_path
            >>> from dgl_graphtx.models import build_model, get_preset
            >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
            >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
            ...                        CheckpointMeta(p.featurizer, p.relation, ["y"]))
            >>> table = Predictor(path).predict_file(example_sdf_path())
            >>> table.shape, list(table.columns[:3])
            ((8, 6), ['name', 'smiles', 'canonical_smiles'])
        """
        table = self.read_file(path, smiles_col, delimiter)
        self._check_feature_columns(table.columns, str(path))
        return self.predict(table.molecules, progress=progress, identifiers=table.identifiers,
                            carried=table.carried_columns(id_col, keep_cols), features=table.columns)

    def read_file(self, path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None) -> MoleculeTable:
        """The molecules of a file as this model reads them: prepared for its featurizer, and for a
        model of several molecules per row, each row's molecules from :attr:`molecule_columns` as a
        tuple (see :mod:`~dgl_graphtx.datasets.molecule_columns`)."""
        columns = self._rows_from(self.molecule_columns)
        return columns.read(read_molecules(path, columns.first_column(smiles_col), delimiter, self.meta.featurizer))

    def _rows_from(self, columns: Optional[MoleculeColumns]) -> MoleculeColumns:
        """``columns`` checked to give as many molecules per row as the model reads (and mixture
        weights where it weighs them); ``None``: those the model was trained with (unchecked: a
        model saved without them reads tuples, and mixture weights from given ``features``)."""
        if columns is None:
            return self.trained_columns
        options = self.model.config.molecules
        if columns.count != options.count or bool(columns.mixture_weights) != options.weighted:
            trained = self.trained_columns
            raise ConfigError(f"the model reads {options.count} molecule(s) per row{' with mixture weights' * options.weighted} "
                              f"(trained on --smiles-cols {','.join(trained.columns) or '-'}"
                              f"{' --reaction-cols ' + ','.join(trained.reaction_cols) if trained.reaction_cols else ''}"
                              f"{' --mixture-weights ' + ','.join(trained.mixture_weights) if trained.mixture_weights else ''}); "
                              f"the columns given hold {columns.count}")
        return columns

    def embed(
        self,
        molecules: Union[MoleculeLike, Iterable[MoleculeLike]],
        atoms: bool = False,
        progress: bool = False,
        identifiers: Optional[Sequence[str]] = None,
        carried: Optional[pd.DataFrame] = None,
    ) -> Embeddings:
        """The pooled molecule representation the model's head reads (``[M, d]``, NaN rows for
        invalid inputs) and, with ``atoms=True``, each molecule's final atom states ``[n_i, d]``
        (in the graph's canonical atom order; ``graph.ndata["input_atom"]`` maps back). The table
        carries ``carried`` and the SMILES as :meth:`predict` does.

        Example:
            >>> import tempfile
            >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
            >>> from dgl_graphtx.models import build_model, get_preset
            >>> p = get_preset("grpe", num_layers=1, hidden_dim=16, num_heads=2)
            >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
            ...                        CheckpointMeta(p.featurizer, p.relation, ["y"]))
            >>> emb = Predictor(path).embed(["CCO", "C1CC"], atoms=True)
            >>> emb.molecules.shape, emb.atoms[0].shape, emb.atoms[1], emb.table["error"].notna().tolist()
            ((2, 16), (3, 16), None, [False, True])
        """
        if self.model.config.molecules.several:
            raise ConfigError("embed gives one molecule's representation; this model combines the "
                              f"{self.model.config.molecules.count} molecules of a row: predict with it instead")
        tables, pooled, per_atom = [], [], []
        for start, chunk, names in input_chunks(molecules, self.chunk_size, progress, identifiers, carried, self._prepare):
            done, _ = self._featurize(chunk, molecule_level=False)  # the pooled embedding reads no molecule-level features
            vectors = np.full((len(chunk), self.model.config.hidden_dim), np.nan, dtype=np.float32)
            states: List[Optional[np.ndarray]] = [None] * len(chunk)
            for batch in self._batches(done):
                for positions, result, error in self._forward(done, batch, functools.partial(self._embed_batch, atoms=atoms)):
                    rows = [done.rows[p] for p in positions]
                    if result is None:
                        for row in rows:
                            done.errors[row] = error
                        continue
                    vectors[rows], parts = result
                    for row, part in zip(rows, parts):
                        states[row] = part
            table = pd.DataFrame({"smiles": names, "canonical_smiles": [canonical_smiles(m) for m in chunk], "error": done.errors})
            tables.append(with_carried_columns(table, carried, start))
            pooled.append(vectors)
            per_atom.extend(states)
        dim = self.model.config.hidden_dim
        table = (pd.concat(tables, ignore_index=True) if tables else
                 with_carried_columns(pd.DataFrame({"smiles": [], "canonical_smiles": [], "error": []}), carried, 0))
        return Embeddings(indexed_like(table, molecules), np.concatenate(pooled) if pooled else np.zeros((0, dim), np.float32),
                          per_atom if atoms else None)

    def attention_maps(self, molecule: MoleculeLike) -> AttentionMaps:
        """The attention of the model on one molecule (:func:`~dgl_graphtx.insight.attention_maps`),
        featurized as :meth:`predict` featurizes it, with the extra features the model reads."""
        if isinstance(molecule, list) or self.model.config.molecules.several:
            raise ConfigError("attention maps are drawn for one molecule of a one-molecule model: pass one SMILES or RDKit molecule")
        prepared = self._prepare(molecule)
        done, _ = self._featurize([prepared])
        if done.graphs is None or done.relations is None:
            raise InvalidMoleculeError(f"cannot explain {describe_molecule(molecule)!r}: {done.errors[0]}")
        graphs = (done.graphs.batch([0]), done.relations.batch([0]))
        return attention_maps(self.model, self.featurizer, prepared, self.compute, graphs)

    def explain(self, molecules: Union[MoleculeLike, Iterable[MoleculeLike]], target: Optional[str] = None,
                steps: Optional[int] = None, baseline: Optional[str] = None, **options: Any) -> Explanations:
        """:meth:`predict` (``options``: its ``progress``, ``identifiers``, ``carried``, ``features``)
        with each molecule's prediction of ``target`` explained atom by atom, by integrated gradients
        over ``steps`` Gauss-Lobatto nodes from ``baseline``; what is not given comes from
        ``explain=``, else :class:`~dgl_graphtx.inference.explain.ExplainSettings`'s defaults (see
        :mod:`~dgl_graphtx.inference.explain`).

        Example:
            >>> import tempfile
            >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
            >>> from dgl_graphtx.models import build_model, get_preset
            >>> p = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2)
            >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
            ...                        CheckpointMeta(p.featurizer, p.relation, ["logP"]))
            >>> found = Predictor(path).explain(["OCC", "C1CC"], steps=8)
            >>> found.atoms[["row", "atom", "element"]].values.tolist(), found.table["logP_contributions"][1]
            ([[0, 0, 'O'], [0, 1, 'C'], [0, 2, 'C']], None)
        """
        explainer = copy.copy(self)
        explainer.explained = explained_output(self.model, self.target_names, with_settings(self.explained, target, steps, baseline))
        inputs = list(as_inputs(molecules))
        table = explainer.predict(inputs, **options)
        atoms = atom_table(table, [self._prepare(m) for m in inputs], explainer.explained.target, self.meta.featurizer)
        return Explanations(indexed_like(table, molecules), indexed_rows(atoms, molecules))

    def predict_atoms(self, molecules: Union[MoleculeLike, Iterable[MoleculeLike]], progress: bool = False,
                      identifiers: Optional[Sequence[str]] = None, carried: Optional[pd.DataFrame] = None,
                      features: Optional[pd.DataFrame] = None) -> LevelPredictions:
        """:meth:`predict` (the table gets a list column per atom and bond target, in the order of
        the input's atoms and bonds) with the long tables of the atom- and bond-level predictions
        (see :mod:`~dgl_graphtx.inference.level_outputs`), for a model with such targets.

        Example:
            >>> import tempfile
            >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
            >>> from dgl_graphtx.models import build_model, get_preset
            >>> from dgl_graphtx.models.levels import LevelOptions
            >>> p = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2, num_tasks=0, levels=LevelOptions(atom_tasks=1))
            >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
            ...                        CheckpointMeta(p.featurizer, p.relation, [], {"levels": {"atom_targets": ["q"]}}))
            >>> found = Predictor(path).predict_atoms(["OC", "C1CC"])
            >>> found.atoms[["row", "atom", "element"]].values.tolist(), len(found.table["q_atoms"][0]), found.table["q_atoms"][1]
            ([[0, 0, 'O'], [0, 1, 'C']], 2, None)
        """
        if self.model.levels is None:
            raise ConfigError("this model predicts no atom- or bond-level target: use predict")
        inputs = list(as_inputs(molecules))
        table = self.predict(inputs, progress, identifiers, carried, features)
        carried_names = list(carried.columns) if carried is not None else []
        atoms, bonds = level_tables(table, [self._prepare(m) for m in inputs], self.level_targets, self.meta.featurizer, carried_names)
        return LevelPredictions(indexed_like(table, molecules), indexed_rows(atoms, molecules), indexed_rows(bonds, molecules))

    def _prepare(self, molecule: MoleculeLike) -> MoleculeLike:
        """An input as the checkpoint's featurizer takes it, as a file reader would give it
        (:func:`~dgl_graphtx.featurize.molecule.prepare_input`: an RDKit molecule's hydrogen
        atoms are not nodes of a model trained without them); a row of several molecules (a tuple)
        must hold as many as the model reads."""
        count = self.model.config.molecules.count
        given = len(molecule) if isinstance(molecule, tuple) else 1
        if given != count or (count == 1 and isinstance(molecule, tuple)):
            how = (f"each row as a tuple of {count} molecules ({', '.join(self.molecule_columns.names) or 'as trained'})"
                   if count > 1 else "one molecule per row, not a tuple")
            raise ConfigError(f"this model reads {count} molecule(s) per row; got {describe_molecule(molecule)!r}: give {how}")
        return prepare_input(molecule, self.meta.featurizer)

    def _warn_if_kernel_leaves_no_spread(self) -> None:
        """MC dropout varies the network, whose share of a blended prediction is its weight: a
        target the fingerprint kernel predicts alone (weight 0) gets std 0, said once here."""
        kernel = self.model.kernel
        if kernel is None or uncertainty_method(self.uncertainty.method).std != "dropout":
            return
        alone = [self.target_names[task] for task in kernel.alone()]
        if alone:
            logger.warning("the fingerprint kernel makes this model's whole prediction of %s (the network's blend weight is 0): "
                           "MC dropout gives them std 0 (%s)", ", ".join(alone), no_spread_advice(self.model.config.task))

    def _check_feature_columns(self, features: Optional[pd.DataFrame], source: str = "the input") -> None:
        """One clear error when the model reads a user feature column that ``features`` lacks."""
        needed = list(self.extras.spec.columns) if self.extras is not None else []
        missing = [c for c in needed if features is None or c not in features.columns]
        if missing:
            raise ConfigError(f"the model reads the feature column {missing[0]!r} (trained with --features-cols "
                              f"{','.join(needed)}); {source} lacks it: add the column to the input")

    @staticmethod
    def _feature_rows(features: Optional[pd.DataFrame], start: int, count: int) -> Optional[pd.DataFrame]:
        return None if features is None else features.iloc[start:start + count].reset_index(drop=True)

    def _featurize(self, molecules: Sequence[MoleculeLike], features: Optional[pd.DataFrame] = None,
                   molecule_level: bool = True) -> Tuple[Featurized, List[Optional[str]]]:
        """The featurized molecules with their extra features and row values (mixture weights,
        constrained atom sums), and per input row why values were masked or left out (as at
        training time), if any were. A row whose feature column holds text that is not a number
        is not predicted; its error says which cell."""
        unreadable = non_numeric_cells(features, self.extras.spec.columns) if self.extras is not None else {}
        done = featurize_and_pack(self.featurizer, [None if row in unreadable else m for row, m in enumerate(molecules)],
                                  workers=self.workers)
        for row, reason in unreadable.items():
            done.errors[row] = reason
        if done.graphs is not None:  # once per chunk, on the host: a GPU would only assert deep in an embedding
            self.model.check_inputs(done.graphs)
        masked: List[Optional[str]] = [None] * len(molecules)
        if done.graphs is not None:
            for row, reason in attach_row_values(done.graphs, done.rows, molecules, features, self.molecule_columns, self.level_targets):
                masked[row] = reason
        if self.extras is not None and done.graphs is not None:
            chosen = features.iloc[done.rows].reset_index(drop=True) if features is not None else None
            notes = self.extras.compute_and_attach(done.graphs, [molecules[r] for r in done.rows], chosen,
                                                   [describe_molecule(molecules[r]) for r in done.rows], self.atom_function,
                                                   molecule_level, self.workers)
            for position, reason in notes:
                row = done.rows[position]
                masked[row] = reason if masked[row] is None else f"{masked[row]}; {reason}"
        return done, masked

    @property
    def _width(self) -> int:
        """Values per molecule from :meth:`_forward`: the point predictions, then one std per
        target when there are any."""
        has_std = uncertainty_method(self.uncertainty.method).std in ("head", "dropout")
        return self.model.config.prediction_width + (len(self.target_names) if has_std else 0)

    def _predict_chunk(self, molecules: Sequence[MoleculeLike], names: Sequence[str],
                       features: Optional[pd.DataFrame] = None) -> pd.DataFrame:
        predictions = np.full((len(molecules), self._width), np.nan)
        done, masked = self._featurize(molecules, features)
        errors = done.errors
        explanations = (None if self.explained is None else  # first: a failure is the row's error
                        explain_featurized(self.model, self.explained, done, self._batches(done, self.explained.steps), self._forward))
        levels = self._predict_rows(molecules, done, predictions)
        if explanations is not None:
            predictions[[row for row, found in enumerate(explanations) if found is None]] = np.nan
        config = self.model.config
        point = config.prediction_width
        similarity = self._similarity(molecules, done.rows)
        predicted = calibrated(config.task, UncertainPredictions(
            predictions[:, :point], predictions[:, point:] if self._width > point else None), self.calibration, similarity)
        table = prediction_frame(config.task, config.num_classes, self.target_names, predicted.mean)
        add_uncertainty_columns(table, self.target_names, predicted, prediction_column)
        table.insert(0, "smiles", list(names))
        table.insert(1, "canonical_smiles", [canonical_smiles(m) for m in molecules])
        if similarity is not None:
            table.insert(2, SIMILARITY_COLUMN, similarity)
        table["error"] = errors
        unseen = self.domain.unseen_in(done, self.featurizer.describe_feature)
        table["warning"] = [None if errors[row] is not None else
                            "; ".join(w for w in (self.domain.check(molecules[row], unseen[row]), masked[row]) if w) or None
                            for row in range(len(molecules))]
        if self.explained is not None and explanations is not None:
            add_explanation_columns(table, self.explained, [None if errors[row] else f for row, f in enumerate(explanations)])
        if levels is not None:
            add_level_columns(table, self.level_targets, [None if errors[row] else f for row, f in enumerate(levels)])
        return table

    def _predict_rows(self, molecules: Sequence[MoleculeLike], done: Featurized,
                      predictions: np.ndarray) -> Optional[List[Optional[Dict[str, Optional[np.ndarray]]]]]:
        """Fill ``predictions`` (one row per input) for the featurized rows of ``done`` and set the
        ``error`` of those that fail; for a model with atom- or bond-level targets, also each row's
        atom and bond values in the input's order (``None`` for the others)."""
        levels = self.model.levels is not None
        found: List[Optional[Dict[str, Optional[np.ndarray]]]] = [None] * len(molecules)
        step: Callable[[Any, Any], Any] = functools.partial(level_batch, self.model) if levels else self._predict_batch
        for batch in self._batches(done):
            for positions, result, error in self._forward(done, batch, step):
                values, per_molecule = result if levels and result is not None else (result, None)
                for position, row in enumerate(done.rows[p] for p in positions):
                    if values is None:
                        done.errors[row] = error
                    elif not np.isfinite(values[position]).all():
                        done.errors[row] = "the model's output is not finite (NaN or inf) for this molecule"
                    else:
                        predictions[row] = values[position]
                        found[row] = in_input_order(per_molecule[position], molecules[row]) if per_molecule is not None else None
        return found if levels else None

    def _similarity(self, molecules: Sequence[MoleculeLike], rows: Sequence[int]) -> Optional[np.ndarray]:
        """Nearest-neighbour similarity to the training part of the featurized ``rows`` of
        ``molecules`` (NaN for the others); ``None`` when the checkpoint stores no fingerprints."""
        if self.training_fingerprints is None:
            return None
        similarity = np.full(len(molecules), np.nan)
        if rows:
            similarity[list(rows)] = nearest_similarity(packed_fingerprints(molecules[r] for r in rows), self.training_fingerprints)
        return similarity

    def _batches(self, done: Featurized, copies: int = 1) -> Iterable[List[int]]:
        """Positions of ``done`` in order of size (relation-graph edges), grouped by ``batch_size``
        molecules and the ``batch_edges`` budget (shared by the ``copies`` of each molecule a batch
        holds): molecules of like size share a batch, so the dense attention blocks, padded to a
        batch's largest molecule, hold little padding. Results are read back by position."""
        if done.relations is None:
            return []
        edges = done.relations.num_edges
        order = torch.argsort(edges, stable=True).tolist()
        return EdgeBudgetBatchSampler(edges, self.batch_size, max(1, self.batch_edges // copies), order)

    def _predict_tensor(self, graph, relation) -> torch.Tensor:
        """Point predictions of one batch, then their stds when there are any (``[B, _width]``)."""
        temperature = self.calibration.temperature if self.calibration is not None else None
        out = predict_with_uncertainty(self.model, graph, relation, self.uncertainty.method, self.uncertainty.mc_samples,
                                       temperature)
        return out.mean if out.std is None else torch.cat([out.mean, out.std], dim=1)

    def _predict_batch(self, graph, relation) -> np.ndarray:
        """:meth:`_predict_tensor` as float64 on the host."""
        with torch.inference_mode():
            output = self._predict_tensor(graph, relation)
        return output.cpu().double().numpy()

    def _replayed(self, done: Featurized, positions: List[int]) -> Optional[np.ndarray]:
        """:meth:`_predict_batch` of the molecules at ``positions`` of ``done`` by :attr:`captured`:
        the batch padded to its shape and the pass recorded for that shape replayed; ``None``
        when the batch runs eagerly (no recording, or a batch that fits no padded shape)."""
        if self.captured is None:
            return None
        assert done.graphs is not None and done.relations is not None, "batches hold featurized molecules"
        index, count = torch.tensor(positions, dtype=torch.int64), len(positions)
        unpadded = MoleculeBatch(done.graphs.batch(index), done.relations.batch(index), torch.zeros(count, 1),
                                 torch.ones(count, 1, dtype=torch.bool))
        try:
            padded = pad_batch(unpadded, prediction_shape(done.graphs, positions))
        except PaddingOverflow:
            return None
        output = self.captured(padded)
        return None if output is None else output[:count].cpu().double().numpy()

    def _embed_batch(self, graph, relation, atoms: bool) -> Tuple[np.ndarray, List[np.ndarray]]:
        """Molecule representations ``[B, d]`` of one batch and, with ``atoms``, each molecule's atom states."""
        with torch.inference_mode():
            mol_states, atom_states = self.model.embed(graph, relation)
        parts = torch.split(atom_states.cpu(), graph.batch_num_nodes().tolist()) if atoms else []
        return mol_states.cpu().float().numpy(), [part.float().numpy() for part in parts]

    def _forward(self, done: Featurized, batch: List[int], step: Callable[[Any, Any], BatchResult], copies: int = 1
                 ) -> Iterator[Tuple[List[int], Optional[BatchResult], Optional[str]]]:
        """``step(graph, relation_graph)`` over the positions ``batch`` of ``done``, each molecule
        ``copies`` times (copy by copy): ``(positions, result, None)``; on running out of memory
        the batch is split in halves, and a single molecule that still does not fit gives
        ``(positions, None, error)`` instead of stopping the run."""
        assert done.graphs is not None and done.relations is not None, "batches hold featurized molecules"
        try:
            replayed = self._replayed(done, batch) if step == self._predict_batch and copies == 1 else None  # that step's result
            result = (cast(BatchResult, replayed) if replayed is not None else
                      step(*repeated_batch(done.graphs, done.relations, batch, copies, self.device, self.compute)))
        except (RuntimeError, MemoryError) as err:
            if not is_out_of_memory(err):
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        else:
            yield batch, result, None
            return
        if len(batch) == 1:
            atoms, edges = int(done.graphs.num_nodes[batch[0]]), int(done.relations.num_edges[batch[0]])
            logger.warning("out of memory on one molecule (%d atoms, %d relation edges)", atoms, edges)
            yield batch, None, (f"out of memory on {self.device} for this molecule ({atoms} atoms, {edges} relation edges); "
                                "lower SizeLimits or use a hops/radius relation")
            return
        half = len(batch) // 2
        yield from self._forward(done, batch[:half], step, copies)
        yield from self._forward(done, batch[half:], step, copies)


def predict_smiles(
    smiles: Union[MoleculeLike, Iterable[MoleculeLike]], checkpoint: Union[PathLike, LoadedCheckpoint], **kwargs
) -> pd.DataFrame:
    """Predict from SMILES with a checkpoint: one row per input, in input order; invalid SMILES
    give NaN predictions and a filled ``error`` column. ``kwargs`` go to :class:`Predictor`.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("grpe", num_layers=1, hidden_dim=16, num_heads=2)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
        ...                        CheckpointMeta(p.featurizer, p.relation, ["dG"]))
        >>> table = predict_smiles(["CCO", ""], path)
        >>> table["error"].isna().tolist(), table["error"][1]
        ([True, False], 'empty SMILES')
    """
    return Predictor(checkpoint, **kwargs).predict(smiles)
