"""K folds for cross-validation: every molecule is in the test part of exactly one fold."""
from __future__ import annotations

from collections import defaultdict
from typing import Hashable, List, Sequence

import numpy as np

from ..errors import ConfigError
from .splits import Split, murcko_scaffold

#: How molecules are grouped into folds.
FOLD_KINDS = ("random", "scaffold", "group")


def _check(k: int, n: int) -> None:
    if k < 3:
        raise ConfigError(f"cross-validation needs --cv K >= 3 folds (one test, one validation, the rest training), got {k}")
    if k > n:
        raise ConfigError(f"--cv {k} asks for more folds than there are molecules ({n})")


def folds_to_splits(folds: Sequence[Sequence[int]]) -> List[Split]:
    """One :class:`Split` per fold ``f``: test is fold ``f``, validation fold ``f + 1`` (cyclically),
    training all the others.

    Example:
        >>> folds_to_splits([[0], [1], [2, 3]])[2]
        Split(train=[1], valid=[0], test=[2, 3])
    """
    k = len(folds)
    return [Split(sorted(i for g in range(k) if g not in (f, (f + 1) % k) for i in folds[g]),
                  sorted(folds[(f + 1) % k]), sorted(folds[f])) for f in range(k)]


def group_folds(groups: Sequence[Hashable], k: int, seed: int = 0) -> List[List[int]]:
    """``k`` folds of row indices that keep rows with the same group value together: groups larger
    than a fold's fair share go first, largest first, the rest in an order shuffled by ``seed``;
    each group joins the fold with the fewest rows so far (the lowest fold on a tie).

    Example:
        >>> group_folds(["a", "a", "b", "c", "c", "c"], 3)
        [[3, 4, 5], [0, 1], [2]]
    """
    _check(k, len(groups))
    members = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    sets = list(members.values())
    if len(sets) < k:
        raise ConfigError(f"--cv {k} needs at least {k} distinct groups, but the data has {len(sets)}")
    share = len(groups) / k
    big = sorted((s for s in sets if len(s) > share / 2), key=lambda s: (-len(s), s[0]))
    small = [s for s in sets if len(s) <= share / 2]
    np.random.default_rng(seed).shuffle(small)
    folds: List[List[int]] = [[] for _ in range(k)]
    for members_of_group in big + small:
        min(folds, key=len).extend(members_of_group)
    return [sorted(f) for f in folds]


def random_folds(n: int, k: int, seed: int = 0) -> List[List[int]]:
    """``range(n)`` shuffled with ``seed`` and cut into ``k`` folds of sizes differing by at most one.

    Example:
        >>> sorted(len(f) for f in random_folds(10, 3))
        [3, 3, 4]
    """
    _check(k, n)
    order = np.random.default_rng(seed).permutation(n)
    return [sorted(part.tolist()) for part in np.array_split(order, k)]


def cv_splits(kind: str, k: int, seed: int = 0, *, n: int = 0, smiles: Sequence[str] = (),
              groups: Sequence[Hashable] = ()) -> List[Split]:
    """The ``k`` splits of a cross-validation: ``random`` (``n`` rows), ``scaffold`` (rows grouped
    by the Bemis-Murcko scaffold of ``smiles``) or ``group`` (rows grouped by ``groups``, e.g. a
    column of the data). See :func:`folds_to_splits` for the parts of each split.

    Example:
        >>> [s.test for s in cv_splits("group", 3, groups=["x", "y", "z", "x"])]
        [[0, 3], [1], [2]]
    """
    if kind == "random":
        folds = random_folds(n, k, seed)
    elif kind == "scaffold":
        folds = group_folds([murcko_scaffold(s) for s in smiles], k, seed)
    elif kind == "group":
        folds = group_folds(list(groups), k, seed)
    else:
        raise ConfigError(f"cross-validation folds must be one of {FOLD_KINDS}, got {kind!r}")
    return folds_to_splits(folds)
