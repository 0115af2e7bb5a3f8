"""Bond classes: categorical bond features folded into one integer, plus special pair classes.

A bond with categorical features ``(f_0, ..., f_{K-1})`` and category counts ``(r_0, ..., r_{K-1})``
gets the mixed-radix class ``f_0 + r_0 * (f_1 + r_1 * (f_2 + ...))``, which is unique per feature
tuple. Relation-graph pairs that are not bonds get one of three special classes placed after the
bond classes: ``NO_EDGE`` (two different atoms without a bond), ``SELF`` (an atom with itself) and
``VIRTUAL`` (a pair touching the virtual node).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import torch

from ogb.utils.features import get_bond_feature_dims


@dataclass(frozen=True)
class BondVocabulary:
    """Mixed-radix codec for categorical bond features and the special pair classes.

    Args:
        radices: category count of each bond feature column (default: OGB's ``(5, 6, 2)``).

    Example:
        >>> vocab = BondVocabulary()
        >>> vocab.num_bond_types, vocab.no_edge, vocab.self_pair, vocab.virtual, vocab.num_classes
        (60, 60, 61, 62, 63)
        >>> cls = vocab.encode(torch.tensor([[1, 0, 1]]))
        >>> cls, vocab.decode(cls)
        (tensor([31]), tensor([[1, 0, 1]]))
    """

    radices: Tuple[int, ...] = tuple(get_bond_feature_dims())

    def __post_init__(self) -> None:
        if not self.radices or any(int(r) < 1 for r in self.radices):
            raise ValueError(f"radices must be positive category counts, got {self.radices}")

    @property
    def num_bond_types(self) -> int:
        """Number of distinct bond feature tuples."""
        return math.prod(self.radices)

    @property
    def no_edge(self) -> int:
        """Class of a pair of distinct atoms that share no bond."""
        return self.num_bond_types

    @property
    def self_pair(self) -> int:
        """Class of the pair of an atom with itself."""
        return self.num_bond_types + 1

    @property
    def virtual(self) -> int:
        """Class of any pair that has the virtual node at one end."""
        return self.num_bond_types + 2

    @property
    def num_classes(self) -> int:
        """Size of an embedding table indexed by bond class."""
        return self.num_bond_types + 3

    def encode(self, features: torch.Tensor) -> torch.Tensor:
        """Fold ``[E, K]`` categorical features into ``[E]`` int64 classes."""
        features = torch.as_tensor(features, dtype=torch.int64)
        if features.dim() != 2 or features.shape[1] != len(self.radices):
            raise ValueError(
                f"expected bond features of shape [E, {len(self.radices)}], got {tuple(features.shape)}"
            )
        radices = torch.tensor(self.radices, dtype=torch.int64, device=features.device)
        if features.numel() and ((features < 0) | (features >= radices)).any():
            raise ValueError(f"bond feature values out of range for radices {self.radices}")
        classes = torch.zeros(features.shape[0], dtype=torch.int64, device=features.device)
        for col in reversed(range(len(self.radices))):
            classes = classes * self.radices[col] + features[:, col]
        return classes

    def decode(self, classes: torch.Tensor) -> torch.Tensor:
        """Unfold ``[E]`` bond classes (no special classes) into ``[E, K]`` features."""
        classes = torch.as_tensor(classes, dtype=torch.int64)
        if classes.numel() and ((classes < 0) | (classes >= self.num_bond_types)).any():
            raise ValueError("special classes (NO_EDGE, SELF, VIRTUAL) have no bond features")
        cols = []
        rest = classes
        for radix in self.radices:
            cols.append(rest % radix)
            rest = torch.div(rest, radix, rounding_mode="floor")
        return torch.stack(cols, dim=1)
