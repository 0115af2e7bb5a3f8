"""Integer tensors stored in the smallest dtype that holds their values, and restored exactly.

Featurized molecules are mostly small integers held as int64 (atom and bond feature indices, bond
classes, shortest-path distances) or int32 (node indices local to a molecule). On disk they fit
in int8 or int16; :func:`narrow_integers` converts them (checking the range of every tensor) and
:func:`widen_integers` gives back tensors equal to the originals, dtype included, so a cached
dataset loads exactly as it was built.
"""
from __future__ import annotations

from typing import Any

import torch

#: Candidate storage dtypes, smallest first.
STORAGE_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)

#: Key marking a narrowed tensor: ``{NARROWED: tensor, "dtype": "int64"}``.
NARROWED = "narrowed_from"


def smallest_integer_dtype(tensor: torch.Tensor) -> torch.dtype:
    """The smallest of :data:`STORAGE_DTYPES` holding every value of the integer ``tensor``.

    Example:
        >>> smallest_integer_dtype(torch.tensor([0, 127])), smallest_integer_dtype(torch.tensor([-1, 300]))
        (torch.int8, torch.int16)
    """
    if tensor.numel() == 0:
        return torch.int8
    low, high = int(tensor.min()), int(tensor.max())
    return next(d for d in STORAGE_DTYPES if torch.iinfo(d).min <= low and high <= torch.iinfo(d).max)


def narrow_integers(tree: Any) -> Any:
    """``tree`` (dicts and lists of tensors and plain values) with every int16/32/64 tensor that
    fits a smaller dtype replaced by ``{NARROWED: smaller tensor, "dtype": original dtype name}``.

    Example:
        >>> stored = narrow_integers({"spd": torch.tensor([0, 3, 11]), "y": torch.tensor([0.5])})
        >>> stored["spd"]["narrowed_from"].dtype, stored["spd"]["dtype"], stored["y"].dtype
        (torch.int8, 'int64', torch.float32)
    """
    if isinstance(tree, dict):
        return {key: narrow_integers(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [narrow_integers(value) for value in tree]
    if isinstance(tree, torch.Tensor) and tree.dtype in STORAGE_DTYPES[1:]:
        dtype = smallest_integer_dtype(tree)
        if dtype != tree.dtype:
            return {NARROWED: tree.to(dtype), "dtype": str(tree.dtype).replace("torch.", "")}
    return tree


def widen_integers(tree: Any) -> Any:
    """Inverse of :func:`narrow_integers`: every narrowed tensor back in its original dtype.

    Example:
        >>> original = {"bond": torch.tensor([[0, 41]]), "ids": ["CCO"]}
        >>> back = widen_integers(narrow_integers(original))
        >>> torch.equal(back["bond"], original["bond"]), back["bond"].dtype, back["ids"]
        (True, torch.int64, ['CCO'])
    """
    if isinstance(tree, dict):
        if set(tree) == {NARROWED, "dtype"}:
            return tree[NARROWED].to(getattr(torch, tree["dtype"]))
        return {key: widen_integers(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [widen_integers(value) for value in tree]
    return tree

