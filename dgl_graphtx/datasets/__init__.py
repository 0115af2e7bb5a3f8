"""Molecule datasets: building, caching, splitting, batching, and the embedded FreeSolv data."""
from .collate import MoleculeBatch, collate_molecules
from .freesolv import FREESOLV_TARGET, example_sdf_path, freesolv, freesolv_path
from .molecule_dataset import MoleculeDataset, read_molecule_csv, smiles_column
from .packed import PackedGraphs
from .report import InputReport, RowIssue
from .splits import Split, murcko_scaffold, random_split, scaffold_split

__all__ = [
    "FREESOLV_TARGET",
    "InputReport",
    "MoleculeBatch",
    "MoleculeDataset",
    "PackedGraphs",
    "RowIssue",
    "Split",
    "collate_molecules",
    "example_sdf_path",
    "freesolv",
    "freesolv_path",
    "murcko_scaffold",
    "random_split",
    "read_molecule_csv",
    "scaffold_split",
    "smiles_column",
]
