"""Reproducible train/validation/test splits: random, Bemis-Murcko scaffold, k-means clusters of
fingerprints and Kennard-Stone; and k folds for cross-validation."""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Dict, Hashable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from rdkit import Chem, rdBase
from rdkit.Chem.Scaffolds import MurckoScaffold

from ..errors import ConfigError


#: Train, validation and test fractions of a split when none are given.
DEFAULT_FRACTIONS: Tuple[float, float, float] = (0.8, 0.1, 0.1)


class Split(NamedTuple):
    """Index lists of the three parts of a split."""

    train: List[int]
    valid: List[int]
    test: List[int]


def check_fractions(fractions: Sequence[float]) -> None:
    """Refuse split ``fractions`` that are not three finite non-negative numbers summing to 1.

    Example:
        >>> check_fractions((0.8, 0.1, 0.1))
        >>> check_fractions((float("nan"), 0.1, 0.1))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: split fractions (data.fractions) must be three finite non-negative numbers ..., got (nan, 0.1, 0.1)
    """
    if len(fractions) != 3 or not all(math.isfinite(f) and f >= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ConfigError("split fractions (data.fractions) must be three finite non-negative numbers summing to 1, "
                          f"got {tuple(fractions)}")


def _sizes(n: int, fractions: Tuple[float, float, float]) -> Tuple[int, int]:
    check_fractions(fractions)
    n_train = int(round(fractions[0] * n))
    n_valid = int(round(fractions[1] * n))
    return n_train, min(n_valid, n - n_train)


def random_split(n: int, fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS, seed: int = 0) -> Split:
    """Shuffle ``range(n)`` with ``seed`` and cut it by ``fractions``.

    Example:
        >>> s = random_split(10, seed=1)
        >>> len(s.train), len(s.valid), len(s.test), sorted(s.train + s.valid + s.test) == list(range(10))
        (8, 1, 1, True)
    """
    order = np.random.default_rng(seed).permutation(n).tolist()
    n_train, n_valid = _sizes(n, fractions)
    return Split(order[:n_train], order[n_train : n_train + n_valid], order[n_train + n_valid :])


def murcko_scaffold(smiles: str) -> str:
    """Bemis-Murcko scaffold SMILES (empty string for acyclic or unparsable molecules).

    Example:
        >>> murcko_scaffold("CCc1ccccc1O")
        'c1ccccc1'
    """
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return ""
    return MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=False)


def scaffold_split(
    smiles: Sequence[str], fractions: Tuple[float, float, float] = DEFAULT_FRACTIONS, seed: int = 0
) -> Split:
    """Scaffold split: molecules sharing a Bemis-Murcko scaffold land in the same part.

    Balanced variant (after chemprop): scaffold sets larger than half the validation or test
    size are placed first, largest first, so they fill training; the remaining sets are shuffled
    with ``seed``; then sets are assigned greedily to train, else valid, else test. Different
    seeds give different, reproducible splits.

    Example:
        >>> s = scaffold_split(["c1ccccc1C", "c1ccccc1O", "C1CC1C", "CCO"], (0.5, 0.25, 0.25))
        >>> sorted(s.train)
        [0, 1]
    """
    n = len(smiles)
    n_train, n_valid = _sizes(n, fractions)
    n_test = n - n_train - n_valid
    groups: Dict[str, List[int]] = defaultdict(list)
    for index, smi in enumerate(smiles):
        groups[murcko_scaffold(smi)].append(index)
    sets = list(groups.values())
    big = [s for s in sets if len(s) > n_valid / 2 or len(s) > n_test / 2]
    small = [s for s in sets if not (len(s) > n_valid / 2 or len(s) > n_test / 2)]
    big.sort(key=lambda group: (-len(group), group[0]))
    np.random.default_rng(seed).shuffle(small)
    return assign_groups(big + small, n_train, n_valid)


def assign_groups(groups: Sequence[Sequence[int]], n_train: int, n_valid: int) -> Split:
    """Place whole groups, in the order given, into train while it has room, else valid while it
    has room, else test (the greedy rule of chemprop's scaffold and cluster splits).

    Example:
        >>> assign_groups([[0, 3], [1], [2], [4]], 3, 1)
        Split(train=[0, 1, 3], valid=[2], test=[4])
    """
    train: List[int] = []
    valid: List[int] = []
    test: List[int] = []
    for group in groups:
        if len(train) + len(group) <= n_train:
            train.extend(group)
        elif len(valid) + len(group) <= n_valid:
            valid.extend(group)
        else:
            test.extend(group)
    return Split(sorted(train), sorted(valid), sorted(test))


def carve(indices: Sequence[int], size: int, seed: int = 0, groups: Optional[Sequence[Hashable]] = None) -> Tuple[List[int], List[int]]:
    """``(kept, carved)``: about ``size`` of ``indices`` set apart, drawn with ``seed``. With
    ``groups`` (one value per dataset row, e.g. scaffolds), whole groups are carved, made like
    the validation and test parts of :func:`scaffold_split`: groups larger than half of ``size``
    stay (one large scaffold set would otherwise make up most of the carved part), the others are
    taken in an order shuffled by ``seed``, each while it fits in ``size``; when none fits, the
    smallest group is carved, so that a part asked for is never empty.

    Example:
        >>> carve(range(8), 4, seed=0, groups=["a", "a", "b", "c", "c", "c", "d", "e"])  # c (3 > 4 / 2) stays
        ([2, 3, 4, 5], [0, 1, 6, 7])
        >>> carve(range(6), 1, groups=["a", "a", "b", "b", "b", "b"])  # none fits: the smallest group
        ([2, 3, 4, 5], [0, 1])
        >>> len(carve(range(10), 3)[1])
        3
    """
    indices = list(indices)
    if groups is None:
        order = np.random.default_rng(seed).permutation(len(indices))
        chosen = set(order[:size].tolist())
        carved = [i for position, i in enumerate(indices) if position in chosen]
    else:
        members: Dict[Hashable, List[int]] = defaultdict(list)
        for i in indices:
            members[groups[i]].append(i)
        sets = list(members.values())
        np.random.default_rng(seed).shuffle(sets)
        carved = []
        for group in sets:
            if len(group) <= size / 2 and len(carved) + len(group) <= size:
                carved.extend(group)
        if not carved and size > 0 and sets:
            smallest: List[int] = min(sets, key=len)
            carved = list(smallest)
    taken = set(carved)
    return sorted(i for i in indices if i not in taken), sorted(carved)
