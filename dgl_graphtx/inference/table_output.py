"""Result tables written (and read back) by the commands, in the format the name asks for: ``.csv``
(commas), ``.tsv`` / ``.tab`` (tabs) or ``.parquet`` (needs pyarrow: ``pip install "dgl_graphtx[parquet]"``).
The name is checked before any work, so a run never ends on an unwritable format."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Sequence, Union

import pandas as pd

from ..atomic_io import atomic_path
from ..errors import ConfigError, DamagedFileError
from ..saved_files import read_csv, verified

PathLike = Union[str, Path]
TABLE_FORMATS = (".csv", ".tsv", ".tab", ".parquet")
PARQUET_HINT = 'writing Parquet needs pyarrow: pip install "dgl_graphtx[parquet]" (or choose a .csv / .tsv output)'


def table_format(path: PathLike, formats: Sequence[str] = TABLE_FORMATS, option: str = "--output") -> str:
    """The suffix of ``path`` (``.csv``, ``.tsv``, ``.tab``, ``.parquet``...), checked against
    ``formats``; Parquet also needs pyarrow installed.

    Example:
        >>> table_format("preds.TSV")
        '.tsv'
        >>> table_format("out/preds.xlsx")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: --output must end in one of .csv, .tsv, .tab, .parquet, got out/preds.xlsx
    """
    suffix = Path(path).suffix.lower()
    if suffix not in formats:
        raise ConfigError(f"{option} must end in one of {', '.join(formats)}, got {path}")
    if suffix == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ConfigError(PARQUET_HINT)
    return suffix


def table_separator(path: PathLike) -> str:
    """The delimiter of a text table named ``path``: a tab for ``.tsv`` / ``.tab``, else a comma.

    Example:
        >>> table_separator("x.tsv"), table_separator("x.csv")
        ('\\t', ',')
    """
    return "\t" if Path(path).suffix.lower() in (".tsv", ".tab") else ","


def write_table(frame: pd.DataFrame, path: PathLike) -> Path:
    """Write ``frame`` atomically as CSV, TSV or Parquet, by the suffix of ``path``.

    Example:
        >>> import tempfile
        >>> out = write_table(pd.DataFrame({"a": [1], "b": ["x"]}), tempfile.mkdtemp() + "/t.tsv")
        >>> out.read_text()
        'a\\tb\\n1\\tx\\n'
    """
    path = Path(path)
    suffix = table_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False, sep=table_separator(path))
    return path


def read_table(path: PathLike) -> pd.DataFrame:
    """A table written by :func:`write_table` or a run (``test_predictions.csv``...), by the
    suffix of ``path``, read guarded (:mod:`~dgl_graphtx.saved_files`: checked against its run
    folder's record; an empty, cut or binary file is one error naming it); a missing file is a
    one-line error.

    Example:
        >>> import tempfile
        >>> read_table(write_table(pd.DataFrame({"a": [1]}), tempfile.mkdtemp() + "/t.csv")).to_dict("list")
        {'a': [1]}
    """
    suffix = table_format(path, option="the table")
    fix = "give the table as train or predict wrote it (or train again to write it again)"
    if verified(path, fix, optional=True) is None:
        raise ConfigError(f"table not found: {path}")
    if suffix != ".parquet":
        table = read_csv(path, fix, sep=table_separator(path))
        assert table is not None  # it exists (checked above)
        return table
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow's errors derive from these
        raise DamagedFileError(f"{path} is damaged: it is not a readable Parquet table ({type(err).__name__}: {err}); {fix}") from None
