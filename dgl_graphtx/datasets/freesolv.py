"""The FreeSolv hydration free energy set, shipped with the package (works offline)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Union

import pandas as pd

from .molecule_dataset import MoleculeDataset

#: Column holding the experimental hydration free energy (kcal/mol).
FREESOLV_TARGET = "expt"


def _data_file(name: str) -> Path:
    return Path(str(resources.files("dgl_graphtx.datasets") / "data" / name))


def freesolv_path() -> Path:
    """Path of the embedded ``freesolv.csv``."""
    return _data_file("freesolv.csv")


def example_sdf_path() -> Path:
    """Path of the embedded 8-molecule SDF with 3-D coordinates (CDK2 ligands)."""
    return _data_file("cdk2_sample.sdf")


def freesolv(as_dataset: bool = False, **dataset_kwargs: Any) -> Union[pd.DataFrame, MoleculeDataset]:
    """FreeSolv (Mobley & Guthrie 2014, via MoleculeNet): 642 molecules, hydration free energy.

    Args:
        as_dataset: return a :class:`MoleculeDataset` with target ``expt`` instead of the table.
        **dataset_kwargs: passed to :meth:`MoleculeDataset.from_csv` (featurizer, relation, ...).

    Returns:
        A DataFrame with columns ``iupac, smiles, expt, calc`` (kcal/mol), or a dataset.

    Example:
        >>> df = freesolv()
        >>> len(df), list(df.columns)
        (642, ['iupac', 'smiles', 'expt', 'calc'])
    """
    if as_dataset:
        return MoleculeDataset.from_csv(freesolv_path(), "smiles", [FREESOLV_TARGET], **dataset_kwargs)
    return pd.read_csv(freesolv_path())
