"""Featurization settings, kept in one frozen dataclass so they can key caches and checkpoints."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional

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


@dataclass(frozen=True)
class SizeLimits:
    """Budgets that keep one huge molecule from exhausting memory (attention over a complete
    relation graph costs memory in ``atoms ** 2``). A molecule above a budget is refused with the
    reason before its relation graph is built (``max_atoms``) or before the model sees it.

    Args:
        max_atoms: most graph nodes (heavy atoms, plus hydrogens when they are explicit).
        max_relation_edges: most relation-graph edges (node pairs attention scores).

    Example:
        >>> SizeLimits(max_atoms=200).max_relation_edges
        1048576
    """

    max_atoms: int = 1000
    max_relation_edges: int = 1 << 20

    def __post_init__(self) -> None:
        check_number("max_atoms", self.max_atoms, 1, integer=True)
        check_number("max_relation_edges", self.max_relation_edges, 1, integer=True)

    def check_atoms(self, count: int) -> Optional[str]:
        """Why ``count`` atoms are over budget, or ``None``.

        Example:
            >>> SizeLimits(max_atoms=10).check_atoms(12)
            'molecule has 12 atoms, above the budget of 10 (max_atoms: raise it with predict --max-atoms or train --set ...'
        """
        if count > self.max_atoms:
            return (f"molecule has {count} atoms, above the budget of {self.max_atoms} (max_atoms: raise it with predict --max-atoms "
                    "or train --set data.max_atoms=N if memory allows)")
        return None

    def check_relation_edges(self, count: int) -> Optional[str]:
        """Why ``count`` relation edges are over budget, or ``None``."""
        if count > self.max_relation_edges:
            return (f"relation graph has {count} edges, above the budget of {self.max_relation_edges} "
                    "(max_relation_edges); use a hops/radius relation or raise the limit if memory allows")
        return None
