"""Featurization settings, kept in one frozen dataclass so they can key caches and checkpoints."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict

from ..errors import ConfigError
from ..validation import check_number

ATOM_FEATURES = ("ogb", "canonical")
COORDINATES = ("none", "auto", "conformer", "etkdg")


@dataclass(frozen=True)
class FeaturizerConfig:
    """How a molecule becomes a graph.

    Args:
        atom_features: ``"ogb"`` (9 categorical atom / 3 categorical bond features, int64) or
            ``"canonical"`` (dgllife ``CanonicalAtomFeaturizer`` / ``CanonicalBondFeaturizer``, float).
        explicit_hydrogens: add hydrogens as nodes (``Chem.AddHs``).
        coordinates: ``"none"``; ``"conformer"`` (use the molecule's 3-D conformer, error if
            absent); ``"etkdg"`` (always generate with RDKit ETKDG); ``"auto"`` (conformer when
            present, else ETKDG).
        mmff: relax generated conformers with MMFF94 when parameters exist.
        embed_seed: random seed of ETKDG, so coordinates are reproducible.
        rwse_steps: if > 0, store ``k``-step random-walk landing probabilities in
            ``ndata["rwse"]`` (random-walk structural encoding).

    Example:
        >>> FeaturizerConfig(coordinates="auto").needs_coordinates
        True
    """

    atom_features: str = "ogb"
    explicit_hydrogens: bool = False
    coordinates: str = "none"
    mmff: bool = False
    embed_seed: int = 0xF00D
    rwse_steps: int = 0

    def __post_init__(self) -> None:
        if self.atom_features not in ATOM_FEATURES:
            raise ConfigError(f"atom_features must be one of {ATOM_FEATURES}, got {self.atom_features!r}")
        if self.coordinates not in COORDINATES:
            raise ConfigError(f"coordinates must be one of {COORDINATES}, got {self.coordinates!r}")
        check_number("rwse_steps", self.rwse_steps, 0, 1024, integer=True)
        check_number("embed_seed", self.embed_seed, 0, 2**31 - 1, integer=True)
        for name in ("explicit_hydrogens", "mmff"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")

    @property
    def needs_coordinates(self) -> bool:
        """Whether featurization produces 3-D coordinates."""
        return self.coordinates != "none"

    def to_dict(self) -> Dict[str, Any]:
        """Plain-dict form for JSON, cache keys and checkpoints."""
        return asdict(self)
