"""SMILES in, predictions out: batched inference from a checkpoint, one row per input."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, List, Optional, Union

import numpy as np
import pandas as pd
import torch
from rdkit import Chem

from .checkpoint import LoadedCheckpoint, load_checkpoint
from .datasets import PackedGraphs
from .devices import resolve_device
from .featurize import MoleculeFeaturizer, describe_molecule, featurize_each
from .featurize.molecule import MoleculeLike

PathLike = Union[str, Path]


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

    def predict(self, molecules: Union[MoleculeLike, Iterable[MoleculeLike]], progress: bool = False) -> pd.DataFrame:
        """Predict every input (one SMILES / molecule, or any iterable of them: list, pandas Series,
        numpy array); returns columns ``smiles``, one per target, and ``error``."""
        molecules = [molecules] if isinstance(molecules, (str, bytes, Chem.Mol)) else list(molecules)
        names = self.target_names
        predictions = np.full((len(molecules), len(names)), np.nan)
        errors: List[Optional[str]] = [None] * len(molecules)
        graphs, relations, rows = [], [], []
        for row, featurized, error in featurize_each(self.featurizer, molecules, progress):
            if featurized is None:
                errors[row] = error
                continue
            graphs.append(featurized[0])
            relations.append(featurized[1])
            rows.append(row)
        if rows:
            packed_graphs, packed_relations = PackedGraphs.from_graphs(graphs), PackedGraphs.from_graphs(relations)
            outputs = []
            for start in range(0, len(rows), self.batch_size):
                chunk = torch.arange(start, min(start + self.batch_size, len(rows)))
                graph = packed_graphs.batch(chunk).to(self.device)
                relation = packed_relations.batch(chunk).to(self.device)
                outputs.append(self.model.predict(graph, relation).cpu())
            predictions[rows] = torch.cat(outputs).double().numpy()
        table = pd.DataFrame(predictions, columns=names)
        table.insert(0, "smiles", [describe_molecule(m) for m in molecules])
        table["error"] = errors
        return table


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
