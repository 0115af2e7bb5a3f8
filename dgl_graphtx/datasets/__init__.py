"""Molecule datasets: building, caching, splitting, batching, the embedded FreeSolv data, and
QM9 with DFT geometries (needs ``qm9pack``: ``pip install "dgl_graphtx[qm9]"``)."""
from .collate import MoleculeBatch, collate_molecule_tensors, collate_molecules
from .edge_batches import EdgeBudgetBatchSampler, relation_edge_counts
from .extra_features import ExtraFeatures, add_extra_features
from .featurized import Featurized, featurize_and_pack
from .folds import cv_splits, fold_groups, fold_kinds, folds_to_splits, group_folds, random_folds
from .freesolv import FREESOLV_TARGET, example_sdf_path, freesolv, freesolv_path
from .labelled import load_labelled
from .molecule_dataset import MoleculeDataset, featurization_settings
from .packed import PackedGraphs
from .qm9 import QM9_ORBITAL_TARGETS, QM9_TARGETS, qm9
from .readers import MoleculeTable, read_molecule_csv, read_molecules, smiles_column, split_labels
from .report import InputReport, RowIssue
from .sharded_store import featurize_file, featurize_to_store, is_store, load_store
from .space_splits import kennard_stone_order, kennard_stone_split, kmeans_clusters, kmeans_split, morgan_fingerprints
from .split_kinds import SPLIT_KINDS, SPLITS, SplitKind, make_split, molecule_groups, split_kind
from .splits import Split, assign_groups, carve, murcko_scaffold, random_split, scaffold_split

__all__ = [
    "EdgeBudgetBatchSampler",
    "ExtraFeatures",
    "FREESOLV_TARGET",
    "Featurized",
    "InputReport",
    "MoleculeBatch",
    "MoleculeDataset",
    "MoleculeTable",
    "PackedGraphs",
    "QM9_ORBITAL_TARGETS",
    "QM9_TARGETS",
    "RowIssue",
    "SPLITS",
    "SPLIT_KINDS",
    "Split",
    "SplitKind",
    "add_extra_features",
    "assign_groups",
    "carve",
    "cv_splits",
    "fold_groups",
    "fold_kinds",
    "folds_to_splits",
    "group_folds",
    "kennard_stone_order",
    "kennard_stone_split",
    "kmeans_clusters",
    "kmeans_split",
    "morgan_fingerprints",
    "random_folds",
    "collate_molecule_tensors",
    "collate_molecules",
    "example_sdf_path",
    "featurization_settings",
    "featurize_and_pack",
    "featurize_file",
    "featurize_to_store",
    "freesolv",
    "freesolv_path",
    "load_labelled",
    "make_split",
    "molecule_groups",
    "is_store",
    "load_store",
    "murcko_scaffold",
    "qm9",
    "relation_edge_counts",
    "random_split",
    "read_molecule_csv",
    "read_molecules",
    "scaffold_split",
    "smiles_column",
    "split_kind",
    "split_labels",
]
