"""Molecule datasets: building, caching, splitting, batching, and the embedded FreeSolv data."""
from .collate import MoleculeBatch, collate_molecules
from .freesolv import FREESOLV_TARGET, example_sdf_path, freesolv, freesolv_path
from .molecule_dataset import MoleculeDataset, featurization_settings, read_molecule_csv, smiles_column
from .molecule_source import MoleculeTable, read_molecule_table
from .packed import PackedGraphs
from .report import InputReport, RowIssue
from .sharded_store import featurize_file, featurize_to_store, is_store, load_store
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
    "featurization_settings",
    "featurize_file",
    "featurize_to_store",
    "freesolv",
    "freesolv_path",
    "is_store",
    "load_store",
    "murcko_scaffold",
    "random_split",
    "read_molecule_csv",
    "read_molecule_table",
    "scaffold_split",
    "smiles_column",
]
