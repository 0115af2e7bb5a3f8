"""Reproducible train/validation/test splits: random, Bemis-Murcko scaffold, k-means clusters of
fingerprints and Kennard-Stone; and k folds for cross-validation."""
from __future__ import annotations

from collections import defaultdict
from typing import Dict, List, NamedTuple, Sequence, Tuple

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


def _sizes(n: int, fractions: Tuple[float, float, float]) -> Tuple[int, int]:
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ConfigError(f"split fractions must be three non-negative numbers summing to 1, got {fractions}")
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
