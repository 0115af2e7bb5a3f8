"""Applicability domain: which molecules a model has seen the like of, so predictions for the
others carry a warning (dummy atoms, elements absent from training, more atoms or fragments than
any training molecule, atom or bond feature values, such as a chirality, that no training
molecule had) instead of passing silently."""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np
import torch
from rdkit import Chem

from ..datasets import PackedGraphs
from ..datasets.featurized import Featurized
from ..featurize.molecule import to_mol

#: Elements of typical organic molecules and their common counter-ions, assumed when a checkpoint
#: does not record its training domain (H B C N O F Na Mg Si P S Cl K Ca Zn Se Br I).
DEFAULT_ELEMENTS: Tuple[int, ...] = (1, 5, 6, 7, 8, 9, 11, 12, 14, 15, 16, 17, 19, 20, 30, 34, 35, 53)
#: Fragment count above which an input is called a mixture when no training domain is recorded.
DEFAULT_MAX_FRAGMENTS = 4
#: Distinct values a feature column may take to be recorded; a column with more (a continuous
#: feature) is not checked.
MAX_RECORDED_VALUES = 256
#: Values seen in training per feature column (``None``: a column that is not checked).
SeenValues = Tuple[Optional[Tuple[float, ...]], ...]
#: Words for a feature value: ``(level, column, value) -> text``, ``None`` for a column checked otherwise.
DescribeFeature = Callable[[str, int, float], Optional[str]]


def seen_values(features: torch.Tensor) -> SeenValues:
    """The distinct values of each column of ``features`` (2-D: ``[rows, columns]``).

    Example:
        >>> seen_values(torch.tensor([[0, 5], [1, 5], [0, 5]]))
        ((0.0, 1.0), (5.0,))
    """
    out = []
    for column in features.T:
        values = torch.unique(column.double()).tolist()
        out.append(tuple(values) if len(values) <= MAX_RECORDED_VALUES else None)
    return tuple(out)


@dataclass(frozen=True)
class Domain:
    """What the training molecules looked like.

    Args:
        elements: atomic numbers present in the training set.
        max_heavy_atoms: the largest training molecule's heavy-atom count (``None``: unknown).
        max_fragments: the most disconnected fragments of a training molecule.
        atom_values, bond_values: the values each atom and bond feature column took in training
            (see :meth:`with_feature_values`; ``None``: not recorded, as in checkpoints written
            before they were, whose molecules are not checked for them).

    Example:
        >>> domain = Domain.from_molecules(["CCO", "c1ccccc1O"])
        >>> domain.check("CCN"), domain.check("CCO")
        ('outside the training domain: element N not in the training set', None)
    """

    elements: Tuple[int, ...] = DEFAULT_ELEMENTS
    max_heavy_atoms: Optional[int] = None
    max_fragments: int = DEFAULT_MAX_FRAGMENTS
    atom_values: Optional[SeenValues] = None
    bond_values: Optional[SeenValues] = None

    @classmethod
    def from_molecules(cls, molecules: Iterable[Any]) -> "Domain":
        """The domain spanned by ``molecules`` (SMILES or RDKit molecules; unreadable ones ignored)."""
        elements: Set[int] = set()
        atoms, fragments = 0, 1
        for molecule in molecules:
            try:
                mol = to_mol(molecule)
            except Exception:  # the training report already lists unreadable inputs
                continue
            elements.update(a.GetAtomicNum() for a in mol.GetAtoms())
            atoms = max(atoms, mol.GetNumHeavyAtoms())
            fragments = max(fragments, len(Chem.GetMolFrags(mol)))
        return cls(tuple(sorted(elements)), atoms, fragments)

    def with_feature_values(self, graphs: PackedGraphs, rows: Sequence[int]) -> "Domain":
        """This domain with the atom and bond feature values of the graphs ``rows`` of ``graphs``
        (the training part) recorded.

        Example:
            >>> from dgl_graphtx.datasets import MoleculeDataset
            >>> ds = MoleculeDataset(["CCO", "C[C@H](N)O"], progress=False)
            >>> Domain().with_feature_values(ds.graphs, [0]).atom_values[1]  # chirality: none only
            (0.0,)
        """
        training_rows = np.asarray(list(rows), dtype=np.int64)

        def picked(offsets: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
            parts = [torch.arange(int(offsets[r]), int(offsets[r] + counts[r])) for r in training_rows]
            return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)

        atoms = graphs.ndata["feat"][picked(graphs.node_offsets, graphs.num_nodes)]
        bonds = graphs.edata["feat"][picked(graphs.edge_offsets, graphs.num_edges)]
        return dataclasses.replace(self, atom_values=seen_values(atoms), bond_values=seen_values(bonds))

    @classmethod
    def from_dict(cls, data: Optional[Dict[str, Any]]) -> "Domain":
        """Inverse of :meth:`to_dict`; ``None`` (a checkpoint without a domain) gives the default."""
        if not isinstance(data, dict):
            return cls()

        def values(stored: Optional[List[Optional[List[float]]]]) -> Optional[SeenValues]:
            return None if stored is None else tuple(None if v is None else tuple(float(x) for x in v) for v in stored)

        return cls(tuple(int(z) for z in data.get("elements", DEFAULT_ELEMENTS)),
                   None if data.get("max_heavy_atoms") is None else int(data["max_heavy_atoms"]),
                   int(data.get("max_fragments", DEFAULT_MAX_FRAGMENTS)),
                   values(data.get("atom_values")), values(data.get("bond_values")))

    def to_dict(self) -> Dict[str, Any]:
        """Plain data, for checkpoints."""
        def values(seen: Optional[SeenValues]) -> Optional[List[Optional[List[float]]]]:
            return None if seen is None else [None if v is None else list(v) for v in seen]

        return {**asdict(self), "elements": list(self.elements), "atom_values": values(self.atom_values),
                "bond_values": values(self.bond_values)}

    def unseen_mask(self, level: str, features: torch.Tensor) -> torch.Tensor:
        """Which rows of ``features`` (the ``atom`` or ``bond`` features of many graphs) hold a
        value no training molecule had, in one pass (bool ``[rows]``).

        Example:
            >>> Domain(atom_values=((0.0, 1.0), None)).unseen_mask("atom", torch.tensor([[0, 7], [2, 7]])).tolist()
            [False, True]
        """
        recorded = self.atom_values if level == "atom" else self.bond_values
        out = torch.zeros(len(features), dtype=torch.bool)
        if recorded is None:
            return out
        for column, seen in enumerate(recorded[:features.shape[1]]):
            if seen is not None:
                out |= ~torch.isin(features[:, column].double(), torch.tensor(seen, dtype=torch.float64))
        return out

    def unseen_features(self, atoms: torch.Tensor, bonds: torch.Tensor, describe: DescribeFeature) -> List[str]:
        """Why a molecule whose graph has the atom features ``atoms`` and bond features ``bonds``
        lies outside the domain: the feature values no training molecule had (nothing when they
        were not recorded).

        Example:
            >>> from dgl_graphtx.datasets import MoleculeDataset
            >>> from dgl_graphtx.featurize import MoleculeFeaturizer
            >>> ds = MoleculeDataset(["CCO", "CC(N)O"], progress=False)
            >>> domain = Domain().with_feature_values(ds.graphs, [0, 1])
            >>> graph = MoleculeFeaturizer().molecular_graph("C[C@H](N)O")
            >>> domain.unseen_features(graph.ndata["feat"], graph.edata["feat"], MoleculeFeaturizer().describe_feature)
            ['atom chirality R never seen in training']
        """
        reasons = []
        for level, features, recorded in (("atom", atoms, self.atom_values), ("bond", bonds, self.bond_values)):
            if recorded is None or not len(features):
                continue
            for column, values in enumerate(seen_values(features)):
                seen = recorded[column] if column < len(recorded) else None
                if seen is None or values is None:
                    continue
                words = [describe(level, column, v) for v in values if v not in seen]
                named = [w for w in words if w is not None]
                if named:
                    reasons.append(f"{', '.join(named)} never seen in training")
        return reasons

    def unseen_in(self, done: Featurized, describe: DescribeFeature) -> List[List[str]]:
        """Per input row of ``done``, :meth:`unseen_features` of its graph: one pass over all the
        features, the words only where a value is unseen.

        Example:
            >>> from dgl_graphtx.datasets import MoleculeDataset
            >>> from dgl_graphtx.datasets.featurized import featurize_and_pack
            >>> from dgl_graphtx.featurize import MoleculeFeaturizer
            >>> domain = Domain().with_feature_values(MoleculeDataset(["CCO"], progress=False).graphs, [0])
            >>> domain.unseen_in(featurize_and_pack(MoleculeFeaturizer(), ["CO", "C1C", "CN"]), MoleculeFeaturizer().describe_feature)
            [[], [], ['atom degree 3 never seen in training']]
        """
        out: List[List[str]] = [[] for _ in done.errors]
        if done.graphs is None:
            return out
        graphs = done.graphs
        positions = torch.arange(len(done.rows))
        flagged = set(torch.repeat_interleave(positions, graphs.num_nodes)[self.unseen_mask("atom", graphs.ndata["feat"])].tolist())
        flagged |= set(torch.repeat_interleave(positions, graphs.num_edges)[self.unseen_mask("bond", graphs.edata["feat"])].tolist())
        for position in sorted(flagged):
            nodes = slice(int(graphs.node_offsets[position]), int(graphs.node_offsets[position] + graphs.num_nodes[position]))
            edges = slice(int(graphs.edge_offsets[position]), int(graphs.edge_offsets[position] + graphs.num_edges[position]))
            out[done.rows[position]] = self.unseen_features(graphs.ndata["feat"][nodes], graphs.edata["feat"][edges], describe)
        return out

    def check(self, molecule: Any, features: Iterable[str] = ()) -> Optional[str]:
        """Why ``molecule`` lies outside the domain (reasons joined by ``;``, with ``features``:
        :meth:`unseen_features` of its graph), or ``None``."""
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
        reasons.extend(features)
        return "outside the training domain: " + "; ".join(reasons) if reasons else None
