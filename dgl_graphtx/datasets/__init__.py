"""Molecule datasets: building, caching, splitting, batching, and the embedded FreeSolv data."""
from .collate import MoleculeBatch, collate_molecules
from .freesolv import FREESOLV_TARGET, example_sdf_path, freesolv, freesolv_path
from .labelled import load_labelled
from .molecule_dataset import MoleculeDataset
from .packed import PackedGraphs
from .readers import MoleculeTable, read_molecule_csv, read_molecules, smiles_column, split_labels
from .report import InputReport, RowIssue
from .splits import Split, murcko_scaffold, random_split, scaffold_split

__all__ = [
    "FREESOLV_TARGET",
    "InputReport",
    "MoleculeBatch",
    "MoleculeDataset",
    "MoleculeTable",
    "PackedGraphs",
    "RowIssue",
    "Split",
    "collate_molecules",
    "example_sdf_path",
    "freesolv",
    "freesolv_path",
    "load_labelled",
    "murcko_scaffold",
    "random_split",
    "read_molecule_csv",
    "read_molecules",
    "scaffold_split",
    "smiles_column",
    "split_labels",
]
