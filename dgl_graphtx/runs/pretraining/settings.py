"""The settings of a pretraining run: what the backbone learns from (:class:`PretrainConfig`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...errors import ConfigError
from ...validation import check_number

#: What a backbone can be pretrained on: the RDKit descriptors, the elements of masked atoms, or both
#: (the two losses summed).
OBJECTIVES = ("descriptors", "atoms", "both")


@dataclass(frozen=True)
class PretrainConfig:
    """What the backbone learns from.

    Args:
        objective: what the backbone learns from: ``descriptors``; ``atoms``, the elements of
            masked atoms (the descriptor head then learns from detached node states, a probe
            whose held-out R2 selects the epoch); or ``both``, the two losses summed.
        generator: descriptor generator (see :mod:`dgl_graphtx.featurize.descriptors`).
        mask_share: share of the (molecule, descriptor) targets left out of each step's loss.
        atom_mask_share: probability of each atom to be masked at a step (``atoms``, ``both``).
        valid_share: share of the corpus held out to measure descriptor R2 (and select the epoch).
        workers: processes computing the descriptors.
        subset: pretrain on this many molecules of the corpus file, drawn with the run's seed
            (``None``: all).
        corpus_name, corpus_licence, notes: recorded in the model card.

    Example:
        >>> PretrainConfig(mask_share=0.25).valid_share
        0.05
        >>> PretrainConfig(objective="masked")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: unknown pretraining objective 'masked'; choose one of descriptors, atoms, both
    """

    objective: str = "descriptors"
    generator: str = "rdkit2d"
    mask_share: float = 0.15
    atom_mask_share: float = 0.15
    valid_share: float = 0.05
    workers: int = 1
    subset: Optional[int] = None
    corpus_name: str = "custom"
    corpus_licence: str = "unknown"
    notes: str = ""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"unknown pretraining objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        check_number("mask_share", self.mask_share, 0, 1, high_open=True)
        check_number("atom_mask_share", self.atom_mask_share, 0, 1, low_open=True)
        check_number("valid_share", self.valid_share, 0, 1, low_open=True, high_open=True)
        check_number("workers", self.workers, 1, integer=True)
        if self.subset is not None:
            check_number("subset", self.subset, 2, integer=True)
