"""The split kinds a run names (``data.split``): one table, the single source of their names, how
each divides a dataset's molecules, and which molecules each keeps together, so that
cross-validation folds and the parts carved from a split (validation, calibration) keep them
together too.

``--split``'s choices and help, :class:`~dgl_graphtx.runs.config.DataConfig`'s check,
:func:`make_split`, the cross-validation folds (:func:`~dgl_graphtx.datasets.cv_splits`) and the
carved calibration part all read :data:`SPLIT_KINDS`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Tuple, Union

from ..errors import ConfigError
from .molecule_dataset import MoleculeDataset
from .space_splits import kennard_stone_split, kmeans_clusters, kmeans_split, morgan_fingerprints
from .splits import Split, murcko_scaffold, random_split, scaffold_split

Fractions = Tuple[float, float, float]


@dataclass(frozen=True)
class SplitKind:
    """One split kind.

    Args:
        name: its name (``--split``, ``data.split``).
        summary: one line on how it divides the data, shown by ``--help`` and the docs.
        split: the :class:`Split` of a dataset's SMILES by fractions and seed.
        groups: one value per molecule naming the molecules it keeps together (from the SMILES
            and the seed); ``None``: every molecule alone.
        folds: whether cross-validation (``--cv``) can cut folds of this kind.

    Example:
        >>> spec = SPLIT_KINDS["scaffold"]
        >>> spec.groups(["c1ccccc1O", "CCO"], 0), spec.folds
        (['c1ccccc1', ''], True)
    """

    name: str
    summary: str
    split: Callable[[Sequence[str], Fractions, int], Split]
    groups: Optional[Callable[[Sequence[str], int], List[Hashable]]] = None
    folds: bool = True


def _table(*kinds: SplitKind) -> Dict[str, SplitKind]:
    return {kind.name: kind for kind in kinds}


#: Every split kind, in the order the CLI and the docs list them.
SPLIT_KINDS: Dict[str, SplitKind] = _table(
    SplitKind("random", "shuffled rows", lambda smiles, fractions, seed: random_split(len(smiles), fractions, seed)),
    SplitKind("scaffold", "whole Bemis-Murcko scaffold sets, large sets to training first (balanced, as chemprop)",
              scaffold_split, groups=lambda smiles, seed: [murcko_scaffold(s) for s in smiles]),
    SplitKind("kmeans", "whole k-means clusters (10) of Morgan fingerprints, largest first to training (as chemprop)",
              lambda smiles, fractions, seed: kmeans_split(morgan_fingerprints(smiles), fractions, seed),
              groups=lambda smiles, seed: kmeans_clusters(morgan_fingerprints(smiles), seed).tolist()),
    SplitKind("kennard_stone", "Kennard-Stone order of Morgan fingerprints (Jaccard): the spanning molecules train, "
                               "the most interior test; no seed",
              lambda smiles, fractions, seed: kennard_stone_split(morgan_fingerprints(smiles), fractions, metric="jaccard"),
              folds=False),
)

#: The split kind names, in table order.
SPLITS: Tuple[str, ...] = tuple(SPLIT_KINDS)


def split_kind(name: str) -> SplitKind:
    """The entry of split kind ``name``, or a one-line :class:`ConfigError` listing the choices.

    Example:
        >>> split_kind("kmeans").folds, split_kind("kennard_stone").folds
        (True, False)
    """
    if name not in SPLIT_KINDS:
        raise ConfigError(f"data.split must be one of {tuple(SPLIT_KINDS)}, got {name!r}")
    return SPLIT_KINDS[name]


def molecule_groups(name: str, smiles: Sequence[str], seed: int) -> Optional[List[Hashable]]:
    """The groups split kind ``name`` keeps together (one value per molecule), or ``None``.

    Example:
        >>> molecule_groups("scaffold", ["c1ccccc1C", "C1CC1"], 0), molecule_groups("random", ["C"], 0)
        (['c1ccccc1', 'C1CC1'], None)
    """
    spec = split_kind(name)
    return spec.groups(smiles, seed) if spec.groups is not None else None


def make_split(dataset: MoleculeDataset, kind: Union[str, Split], fractions: Fractions, seed: int) -> Split:
    """The :class:`Split` of ``dataset`` by split kind ``kind`` (:data:`SPLIT_KINDS`, computed
    from the dataset's SMILES; Kennard-Stone ignores ``seed``); a given :class:`Split` (e.g. from
    :func:`~dgl_graphtx.datasets.load_labelled`) is used as it is.

    Example:
        >>> ds = MoleculeDataset(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O"], [[1.0]] * 5, progress=False)
        >>> [len(part) for part in make_split(ds, "kennard_stone", (0.6, 0.2, 0.2), seed=0)]
        [3, 1, 1]
    """
    if isinstance(kind, Split):
        return kind
    return split_kind(kind).split(dataset.identifiers, fractions, seed)
