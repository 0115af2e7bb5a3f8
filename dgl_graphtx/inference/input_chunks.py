"""Inputs taken a chunk at a time, with the names reports give them: what bounds the memory of
prediction and embedding whatever the input size."""
from __future__ import annotations

from typing import Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Sized, Tuple, Union

import pandas as pd
from rdkit import Chem
from tqdm.auto import tqdm

from ..errors import ConfigError
from ..featurize import describe_molecule
from ..featurize.molecule import MoleculeLike


def as_inputs(molecules: Union[MoleculeLike, Iterable[MoleculeLike]]) -> Iterable[MoleculeLike]:
    """One SMILES / molecule as a list of it, any iterable of them as it is; anything else, and a
    table or mapping (whose iteration gives its column names or keys), is a one-line error.

    Example:
        >>> as_inputs("CCO"), as_inputs(("CCO", "C"))
        (['CCO'], ('CCO', 'C'))
        >>> as_inputs(pd.DataFrame({"smiles": ["CCO"], "y": [1.0]}))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: expected SMILES or RDKit molecules, got a DataFrame (columns 'smiles', 'y'): pass its column ...
    """
    if isinstance(molecules, (str, bytes, Chem.Mol)):
        return [molecules]
    if isinstance(molecules, pd.DataFrame):
        columns = ", ".join(repr(str(c)) for c in molecules.columns[:6]) + (", ..." if len(molecules.columns) > 6 else "")
        example = next((str(c) for c in molecules.columns if "smiles" in str(c).lower()), "smiles")
        raise ConfigError(f"expected SMILES or RDKit molecules, got a DataFrame (columns {columns}): pass its column of SMILES, "
                          f"e.g. table[{example!r}], or predict a file with predict_file")
    if isinstance(molecules, Mapping):
        raise ConfigError(f"expected SMILES or RDKit molecules, got a {type(molecules).__name__}, whose iteration gives its keys: "
                          "pass list(d.values()) or list(d) for the SMILES it holds")
    if isinstance(molecules, Iterable):
        return molecules
    raise ConfigError(f"expected a SMILES string, an RDKit molecule or an iterable of them, "
                      f"got {type(molecules).__name__} {molecules!r}")


def indexed_like(table: pd.DataFrame, molecules: object) -> pd.DataFrame:
    """``table`` (one row per input) with the index of ``molecules`` when they are a pandas Series,
    so that its columns assigned back to the Series' table line up with their rows; otherwise
    ``table`` as it is (numbered from 0).

    Example:
        >>> kept = pd.Series(["C", "CC"], index=[7, 3])  # e.g. the rows of a table left after a filter
        >>> indexed_like(pd.DataFrame({"y_pred": [1.0, 2.0]}), kept).index.tolist()
        [7, 3]
    """
    if isinstance(molecules, pd.Series) and len(molecules) == len(table):
        return table.set_axis(molecules.index, axis=0)
    return table


def indexed_rows(long_table: pd.DataFrame, molecules: object) -> pd.DataFrame:
    """A long table's ``row`` column (positions in the input: one row per atom or bond) as labels of
    the index :func:`indexed_like` gives the prediction table, so each row still points at its molecule.

    Example:
        >>> atoms = pd.DataFrame({"row": [0, 0, 1], "atom": [0, 1, 0]})
        >>> indexed_rows(atoms, pd.Series(["OC", "C"], index=[7, 3]))["row"].tolist()
        [7, 7, 3]
    """
    if isinstance(molecules, pd.Series):
        return long_table.assign(row=molecules.index[long_table["row"].to_numpy(dtype=int)])
    return long_table


def input_chunks(
    molecules: Union[MoleculeLike, Iterable[MoleculeLike]], chunk_size: int, progress: bool = False,
    identifiers: Optional[Sequence[str]] = None, carried: Optional[pd.DataFrame] = None,
    prepare: Optional[Callable[[MoleculeLike], MoleculeLike]] = None,
) -> Iterator[Tuple[int, List[MoleculeLike], List[str]]]:
    """Consecutive chunks of ``chunk_size`` inputs (one SMILES / molecule, or any iterable of
    them): the first one's position, the inputs (each passed through ``prepare``, e.g.
    :func:`~dgl_graphtx.featurize.molecule.prepare_input`), and the names reports give them
    (``identifiers``, else :func:`~dgl_graphtx.featurize.describe_molecule` of the prepared input).
    ``identifiers`` and ``carried`` (the columns carried to the output) must have one row per input.

    Example:
        >>> [(start, names) for start, _, names in input_chunks(["C", "CC", "CCC"], 2)]
        [(0, ['C', 'CC']), (2, ['CCC'])]
    """
    inputs = as_inputs(molecules)
    items = iter(inputs)
    total = len(inputs) if isinstance(inputs, Sized) else None
    if identifiers is not None and total is not None and len(identifiers) != total:
        raise ConfigError(f"got {len(identifiers)} identifiers for {total} molecules")
    if carried is not None and total is not None and len(carried) != total:
        raise ConfigError(f"got {len(carried)} rows of carried columns for {total} molecules")
    names = iter(identifiers) if identifiers is not None else None
    start = 0
    with tqdm(total=total, desc="predicting", unit="mol", disable=not progress) as bar:
        while True:
            chunk = [m if prepare is None else prepare(m) for _, m in zip(range(chunk_size), items)]
            if not chunk:
                return
            given = [n for _, n in zip(range(len(chunk)), names)] if names is not None else []
            if names is not None and len(given) != len(chunk):
                raise ConfigError("fewer identifiers than molecules")
            yield start, chunk, given or [describe_molecule(m) for m in chunk]
            start += len(chunk)
            bar.update(len(chunk))
