"""SMILES in, predictions out: batched inference from a checkpoint, one row per input."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from . import _dgl_env  # noqa: F401
import dgl

from .checkpoint import LoadedCheckpoint, load_checkpoint
from .datasets import PackedGraphs, read_molecules
from .devices import resolve_device
from .errors import ConfigError
from .featurize import MoleculeFeaturizer, describe_molecule, featurize_each
from .featurize.molecule import MoleculeLike

PathLike = Union[str, Path]


class Embeddings(NamedTuple):
    """What :meth:`Predictor.embed` returns.

    Attributes:
        table: one row per input: ``smiles`` (or the given identifiers) and ``error``.
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

    Args:
        checkpoint: path of a checkpoint written by training, or an already loaded one.
        device: ``auto``, ``cpu``, ``cuda``...
        batch_size: molecules per forward pass.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
        ...                        CheckpointMeta(p.featurizer, p.relation, ["logS"]))
        >>> table = Predictor(path).predict(["CCO", "not a smiles"])
        >>> list(table.columns), table["error"].isna().tolist()
        (['smiles', 'logS', 'error'], [True, False])
    """

    def __init__(self, checkpoint: Union[PathLike, LoadedCheckpoint], device: str = "auto", batch_size: int = 256) -> None:
        self.device = resolve_device(device)
        loaded = checkpoint if isinstance(checkpoint, LoadedCheckpoint) else load_checkpoint(checkpoint)
        self.model = loaded.model.to(self.device).eval()
        self.meta = loaded.meta
        self.featurizer = MoleculeFeaturizer(loaded.meta.featurizer, loaded.meta.relation)
        self.batch_size = batch_size

    @property
    def target_names(self) -> List[str]:
        """Names of the predicted columns."""
        return list(self.meta.target_names)

    def _featurized_batches(
        self, molecules: List[MoleculeLike], progress: bool
    ) -> Tuple[List[int], List[Optional[str]], Iterator[Tuple[torch.Tensor, dgl.DGLGraph, dgl.DGLGraph]]]:
        """Rows featurized, per-row errors, and batches ``(row positions, graph, relation graph)``
        on the device (``rows[positions]`` are the input rows of a batch)."""
        errors: List[Optional[str]] = [None] * len(molecules)
        graphs, relations, rows = [], [], []
        for row, featurized, error in featurize_each(self.featurizer, molecules, progress):
            if featurized is None:
                errors[row] = error
                continue
            graphs.append(featurized[0])
            relations.append(featurized[1])
            rows.append(row)

        def batches() -> Iterator[Tuple[torch.Tensor, dgl.DGLGraph, dgl.DGLGraph]]:
            if not rows:
                return
            packed_graphs, packed_relations = PackedGraphs.from_graphs(graphs), PackedGraphs.from_graphs(relations)
            for start in range(0, len(rows), self.batch_size):
                chunk = torch.arange(start, min(start + self.batch_size, len(rows)))
                yield chunk, packed_graphs.batch(chunk).to(self.device), packed_relations.batch(chunk).to(self.device)

        return rows, errors, batches()

    @staticmethod
    def _as_list(molecules: Union[MoleculeLike, Iterable[MoleculeLike]]) -> List[MoleculeLike]:
        return [molecules] if isinstance(molecules, (str, bytes, Chem.Mol)) else list(molecules)

    @staticmethod
    def _names(molecules: List[MoleculeLike], identifiers: Optional[Sequence[str]]) -> List[str]:
        if identifiers is None:
            return [describe_molecule(m) for m in molecules]
        if len(identifiers) != len(molecules):
            raise ConfigError(f"got {len(identifiers)} identifiers for {len(molecules)} molecules")
        return list(identifiers)

    def predict(
        self,
        molecules: Union[MoleculeLike, Iterable[MoleculeLike]],
        progress: bool = False,
        identifiers: Optional[Sequence[str]] = None,
    ) -> pd.DataFrame:
        """Predict every input (one SMILES / molecule, or any iterable of them: list, pandas Series,
        numpy array); returns columns ``smiles`` (``identifiers`` when given, e.g. those of
        :func:`~dgl_graphtx.datasets.read_molecules`), one per target, and ``error``."""
        molecules = self._as_list(molecules)
        names = self._names(molecules, identifiers)
        predictions = np.full((len(molecules), len(self.target_names)), np.nan)
        rows, errors, batches = self._featurized_batches(molecules, progress)
        outputs = [self.model.predict(graph, relation).cpu() for _, graph, relation in batches]
        if outputs:
            predictions[rows] = torch.cat(outputs).double().numpy()
        table = pd.DataFrame(predictions, columns=self.target_names)
        table.insert(0, "smiles", names)
        table["error"] = errors
        return table

    def predict_file(self, path: PathLike, smiles_col: str = "smiles", delimiter: Optional[str] = None,
                     progress: bool = False) -> pd.DataFrame:
        """Predict every molecule of a file: CSV/TSV (gzipped too), SDF / ``.sdf.gz`` or ``.smi``
        (see :func:`~dgl_graphtx.datasets.read_molecules`); unreadable SDF records are named by
        their record number in the ``smiles`` column.

        Example:
            >>> import tempfile
            >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
            >>> from dgl_graphtx.datasets import example_sdf_path
            >>> from dgl_graphtx.models import build_model, get_preset
            >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
            >>> path = save_checkpoint(tempfile.mkdtemp() + "/m.pt", build_model(p.model),
            ...                        CheckpointMeta(p.featurizer, p.relation, ["y"]))
            >>> Predictor(path).predict_file(example_sdf_path()).shape
            (8, 3)
        """
        table = read_molecules(path, smiles_col, delimiter, explicit_hydrogens=self.meta.featurizer.explicit_hydrogens)
        return self.predict(table.molecules, progress=progress, identifiers=table.identifiers)

    def embed(
        self,
        molecules: Union[MoleculeLike, Iterable[MoleculeLike]],
        atoms: bool = False,
        progress: bool = False,
        identifiers: Optional[Sequence[str]] = None,
    ) -> Embeddings:
        """The pooled molecule representation the model's head reads (``[M, d]``, NaN rows for
        invalid inputs) and, with ``atoms=True``, each molecule's final atom states ``[n_i, d]``.

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
        molecules = self._as_list(molecules)
        names = self._names(molecules, identifiers)
        dim = self.model.config.hidden_dim
        pooled = np.full((len(molecules), dim), np.nan, dtype=np.float32)
        per_atom: List[Optional[np.ndarray]] = [None] * len(molecules)
        rows, errors, batches = self._featurized_batches(molecules, progress)
        for chunk, graph, relation in batches:
            mol_states, atom_states = self.model.embed(graph, relation)
            batch_rows = [rows[i] for i in chunk.tolist()]
            pooled[batch_rows] = mol_states.cpu().float().numpy()
            if atoms:
                for row, states in zip(batch_rows, torch.split(atom_states.cpu(), graph.batch_num_nodes().tolist())):
                    per_atom[row] = states.float().numpy()
        table = pd.DataFrame({"smiles": names, "error": errors})
        return Embeddings(table, pooled, per_atom if atoms else None)

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
