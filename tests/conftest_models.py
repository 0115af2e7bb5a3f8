"""Shared helpers for the modelling-layer tests (models, training, checkpoints, CLI).

Not a pytest conftest: test modules import what they need from here explicitly. Everything is
tiny (1-2 layers, width 16, 2-4 heads, a few dozen FreeSolv molecules) so the tests stay fast on
a shared CPU.
"""
from __future__ import annotations

import functools
import os
import sys
from typing import List, Optional, Sequence, Tuple

os.environ.setdefault("DGLBACKEND", "pytorch")
# ogb checks PyPI for a newer version in a background thread; tests never touch the network.
sys.modules.setdefault("outdated", None)
os.environ.setdefault("OUTDATED_IGNORE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402
from rdkit import Chem  # noqa: E402

from dgl_graphtx.datasets import MoleculeBatch, MoleculeDataset, freesolv  # noqa: E402
from dgl_graphtx.featurize import FeaturizerConfig  # noqa: E402
from dgl_graphtx.models import Preset, get_preset  # noqa: E402
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402

# The CPU is shared with other jobs: intra-op threads only oversubscribe it (a 10x slowdown was
# measured for these tiny models). Results do not depend on this setting in any test here.
torch.set_num_threads(1)

#: Every named preset of every model.
ALL_PRESETS: List[Tuple[str, str]] = [
    ("grpe", "tiny"),
    ("grpe", "small"),
    ("moire", "2d"),
    ("moire", "3d"),
    ("gradformer", "default"),
    ("vanilla", "tiny"),
    ("graphormer", "tiny"),
]

TINY = dict(num_layers=2, hidden_dim=16, num_heads=4, dropout=0.0, attn_dropout=0.0)


@functools.lru_cache(maxsize=None)
def freesolv_frame() -> pd.DataFrame:
    """The embedded FreeSolv table (read once)."""
    return freesolv()


def freesolv_rows(start: int, stop: int) -> pd.DataFrame:
    return freesolv_frame().iloc[start:stop].reset_index(drop=True)


def tiny_preset(model: str, preset: Optional[str] = None, **overrides) -> Preset:
    """``get_preset`` shrunk to 2 layers / width 16 / 4 heads, without dropout."""
    kwargs = dict(TINY)
    kwargs.update(overrides)
    return get_preset(model, preset, **kwargs)


@functools.lru_cache(maxsize=None)
def _dataset(featurizer: FeaturizerConfig, relation: RelationConfig, start: int, stop: int, targets: Tuple[str, ...]) -> MoleculeDataset:
    frame = freesolv_rows(start, stop)
    return MoleculeDataset.from_dataframe(
        frame, "smiles", list(targets), featurizer=featurizer, relation=relation, progress=False
    )


def dataset_for(
    featurizer: FeaturizerConfig,
    relation: RelationConfig,
    start: int = 0,
    stop: int = 24,
    targets: Sequence[str] = ("expt",),
) -> MoleculeDataset:
    """FreeSolv rows ``start:stop`` featurized with the given settings (cached per settings)."""
    return _dataset(featurizer, relation, start, stop, tuple(targets))


def batch_of(dataset: MoleculeDataset, indices: Optional[Sequence[int]] = None) -> MoleculeBatch:
    """One batch through the dataset's own vectorised ``__getitems__``."""
    if indices is None:
        indices = list(range(len(dataset)))
    return dataset.__getitems__(list(indices))


def has_nitrogen(smiles: str) -> float:
    """1.0 if the molecule contains a nitrogen atom (computed with RDKit, not the library)."""
    mol = Chem.MolFromSmiles(smiles)
    return float(any(atom.GetSymbol() == "N" for atom in mol.GetAtoms()))


def seeded_model(preset: Preset, seed: int = 0):
    """``build_model`` with torch seeded, so a test's initial weights never depend on test order."""
    from dgl_graphtx.models import build_model

    torch.manual_seed(seed)
    return build_model(preset.model)


def tiny_checkpoint(folder, model: str, seed: int = 0, targets=("y",), **overrides):
    """``folder/m.pt``: a seeded :func:`tiny_preset` model of variant ``model`` saved as a checkpoint."""
    from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint

    preset = tiny_preset(model, "tiny", **overrides)
    return save_checkpoint(folder / "m.pt", seeded_model(preset, seed=seed),
                           CheckpointMeta(preset.featurizer, preset.relation, list(targets)))
