"""The split kinds a run names (``data.split``), each computed from a dataset's molecules by
:func:`make_split`."""
from __future__ import annotations

from typing import Tuple, Union

from ..errors import ConfigError
from .molecule_dataset import MoleculeDataset
from .space_splits import kennard_stone_split, kmeans_split, morgan_fingerprints
from .splits import Split, random_split, scaffold_split

#: The split kinds :func:`make_split` computes (``kmeans`` and ``kennard_stone`` on Morgan fingerprints).
SPLITS = ("random", "scaffold", "kmeans", "kennard_stone")


def make_split(dataset: MoleculeDataset, kind: Union[str, Split], fractions: Tuple[float, float, float], seed: int) -> Split:
    """Random, scaffold, k-means or Kennard-Stone split of ``dataset`` (scaffolds and Morgan
    fingerprints from the dataset's SMILES; Kennard-Stone on fingerprints with the Jaccard
    distance ignores ``seed``); a given :class:`Split` (e.g. from
    :func:`~dgl_graphtx.datasets.load_labelled`) is used as it is.

    Example:
        >>> ds = MoleculeDataset(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O"], [[1.0]] * 5, progress=False)
        >>> [len(part) for part in make_split(ds, "kennard_stone", (0.6, 0.2, 0.2), seed=0)]
        [3, 1, 1]
    """
    if isinstance(kind, Split):
        return kind
    if kind == "random":
        return random_split(len(dataset), fractions, seed)
    if kind == "scaffold":
        return scaffold_split(dataset.identifiers, fractions, seed)
    if kind == "kmeans":
        return kmeans_split(morgan_fingerprints(dataset.identifiers), fractions, seed)
    if kind == "kennard_stone":
        return kennard_stone_split(morgan_fingerprints(dataset.identifiers), fractions, metric="jaccard")
    raise ConfigError(f"split must be one of {SPLITS}, got {kind!r}")
