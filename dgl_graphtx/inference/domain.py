"""Applicability domain: which molecules a model has seen the like of, so predictions for the
others carry a warning (dummy atoms, elements absent from training, more atoms or fragments than
any training molecule) instead of passing silently."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, Optional, Tuple

from rdkit import Chem

from ..featurize.molecule import to_mol

#: Elements of typical organic molecules and their common counter-ions, assumed when a checkpoint
#: does not record its training domain (H B C N O F Na Mg Si P S Cl K Ca Zn Se Br I).
DEFAULT_ELEMENTS: Tuple[int, ...] = (1, 5, 6, 7, 8, 9, 11, 12, 14, 15, 16, 17, 19, 20, 30, 34, 35, 53)
#: Fragment count above which an input is called a mixture when no training domain is recorded.
DEFAULT_MAX_FRAGMENTS = 4


@dataclass(frozen=True)
class Domain:
    """What the training molecules looked like.

    Args:
        elements: atomic numbers present in the training set.
        max_heavy_atoms: the largest training molecule's heavy-atom count (``None``: unknown).
        max_fragments: the most disconnected fragments of a training molecule.

    Example:
        >>> domain = Domain.from_molecules(["CCO", "c1ccccc1O"])
        >>> domain.check("CCN"), domain.check("CCO")
        ('outside the training domain: element N not in the training set', None)
    """

    elements: Tuple[int, ...] = DEFAULT_ELEMENTS
    max_heavy_atoms: Optional[int] = None
    max_fragments: int = DEFAULT_MAX_FRAGMENTS

    @classmethod
    def from_molecules(cls, molecules: Iterable[Any]) -> "Domain":
        """The domain spanned by ``molecules`` (SMILES or RDKit molecules; unreadable ones ignored)."""
        elements, atoms, fragments = set(), 0, 1
        for molecule in molecules:
            try:
                mol = to_mol(molecule)
            except Exception:  # the training report already lists unreadable inputs
                continue
            elements.update(a.GetAtomicNum() for a in mol.GetAtoms())
            atoms = max(atoms, mol.GetNumHeavyAtoms())
            fragments = max(fragments, len(Chem.GetMolFrags(mol)))
        return cls(tuple(sorted(elements)), atoms, fragments)

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "Domain":
        """Inverse of :meth:`to_dict`; ``None`` (a checkpoint without a domain) gives the default."""
        if not isinstance(data, dict):
            return cls()
        return cls(tuple(int(z) for z in data.get("elements", DEFAULT_ELEMENTS)),
                   None if data.get("max_heavy_atoms") is None else int(data["max_heavy_atoms"]),
                   int(data.get("max_fragments", DEFAULT_MAX_FRAGMENTS)))

    def to_dict(self) -> Dict[str, Any]:
        """Plain data, for checkpoints."""
        return {**asdict(self), "elements": list(self.elements)}

    def check(self, molecule: Any) -> Optional[str]:
        """Why ``molecule`` lies outside the domain (reasons joined by ``;``), or ``None``."""
        mol = to_mol(molecule)
        reasons = []
        if any(a.GetAtomicNum() == 0 for a in mol.GetAtoms()):
            reasons.append("dummy atom '*' (not a real element)")
        table = Chem.GetPeriodicTable()
        unseen = sorted({a.GetAtomicNum() for a in mol.GetAtoms()} - set(self.elements) - {0})
        if unseen:
            names = ", ".join(table.GetElementSymbol(z) for z in unseen)
            reasons.append(f"element{'s' if len(unseen) > 1 else ''} {names} not in the training set")
        if self.max_heavy_atoms is not None and mol.GetNumHeavyAtoms() > self.max_heavy_atoms:
            reasons.append(f"{mol.GetNumHeavyAtoms()} heavy atoms, more than any training molecule ({self.max_heavy_atoms})")
        fragments = len(Chem.GetMolFrags(mol))
        if fragments > self.max_fragments:
            reasons.append(f"{fragments} fragments, more than any training molecule ({self.max_fragments})")
        return "outside the training domain: " + "; ".join(reasons) if reasons else None
