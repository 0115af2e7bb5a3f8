"""K folds for cross-validation: every molecule is in the test part of exactly one fold, and the
validation part of each run is carved from the other K - 1 folds."""
from __future__ import annotations

from collections import defaultdict
from typing import Hashable, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError
from .split_kinds import SPLIT_KINDS, molecule_groups
from .splits import Split, carve


def fold_kinds() -> Tuple[str, ...]:
    """How molecules can be grouped into folds: the split kinds that allow folds, or ``group`` (a
    column of group names).

    Example:
        >>> fold_kinds()
        ('random', 'scaffold', 'kmeans', 'group')
    """
    return tuple(name for name, kind in SPLIT_KINDS.items() if kind.folds) + ("group",)


#: The validation share of the molecules outside the test fold: 0.1 / (0.8 + 0.1), the share of
#: the default 80/10/10 split's validation part among the molecules that are not tested.
VALID_SHARE = 1 / 9


def _check(k: int, n: int) -> None:
    if k < 3:
        raise ConfigError(f"cross-validation needs --cv K >= 3 folds, got {k}")
    if k > n:
        raise ConfigError(f"--cv {k} asks for more folds than there are molecules ({n})")


def folds_to_splits(folds: Sequence[Sequence[int]], valid_share: float = VALID_SHARE, seed: int = 0,
                    groups: Optional[Sequence[Hashable]] = None) -> List[Split]:
    """One :class:`Split` per fold ``f``: test is fold ``f``; the validation part, about
    ``valid_share`` of the other folds' molecules (at least one), is carved from them with
    ``seed + f`` (whole ``groups`` when given, see :func:`~dgl_graphtx.datasets.splits.carve`);
    the rest trains.

    Example:
        >>> folds_to_splits([[0, 1, 2], [3, 4, 5], [6, 7, 8]], valid_share=0.5, seed=1)[0].test
        [0, 1, 2]
        >>> [len(part) for part in folds_to_splits([[0, 1, 2], [3, 4, 5], [6, 7, 8]], valid_share=0.5)[0]]
        [3, 3, 3]
    """
    splits = []
    for f, test in enumerate(folds):
        rest = sorted(i for g, fold in enumerate(folds) if g != f for i in fold)
        train, valid = carve(rest, max(1, round(valid_share * len(rest))), seed + f, groups)
        if not valid or not train:
            raise ConfigError(f"cross-validation fold {f}: no {'validation' if not valid else 'training'} molecules could be "
                              f"carved from the other folds' {len(rest)} molecules with whole groups; use fewer or smaller groups")
        splits.append(Split(train, valid, sorted(test)))
    return splits


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


def fold_groups(kind: str, seed: int = 0, *, smiles: Sequence[str] = (),
                groups: Sequence[Hashable] = ()) -> Optional[List[Hashable]]:
    """The groups the folds of ``kind`` keep together: ``groups`` for ``group``, else those of the
    split kind (:func:`~dgl_graphtx.datasets.split_kinds.molecule_groups`; ``None`` for ``random``).

    Example:
        >>> fold_groups("scaffold", smiles=["c1ccccc1O", "CCO"]), fold_groups("group", groups=["x", "y"])
        (['c1ccccc1', ''], ['x', 'y'])
    """
    if kind not in fold_kinds():
        raise ConfigError(f"cross-validation folds must be one of {fold_kinds()}, got {kind!r}")
    return list(groups) if kind == "group" else molecule_groups(kind, smiles, seed)


def cv_splits(kind: str, k: int, seed: int = 0, *, n: int = 0, smiles: Sequence[str] = (),
              groups: Sequence[Hashable] = (), valid_share: float = VALID_SHARE) -> List[Split]:
    """The ``k`` splits of a cross-validation: folds ``random`` (``n`` rows), by a split kind's
    groups (``scaffold``, ``kmeans``: computed from ``smiles``) or by ``groups`` (``group``: e.g.
    a column of the data). Each fold is tested once; validation is carved from the other folds
    keeping the same groups whole (see :func:`folds_to_splits`).

    Example:
        >>> [s.test for s in cv_splits("group", 3, groups=["x", "y", "z", "x"])]
        [[0, 3], [1], [2]]
    """
    together = fold_groups(kind, seed, smiles=smiles, groups=groups)
    folds = random_folds(n, k, seed) if together is None else group_folds(together, k, seed)
    return folds_to_splits(folds, valid_share, seed, together)
