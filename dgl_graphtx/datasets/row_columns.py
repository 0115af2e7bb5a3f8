"""Per-row columns beyond the targets: censored labels (``<5.2``, ``>7``), sample weights and
cross-validation groups."""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import ConfigError

#: Censoring codes: the true value is below (``<``), equal to, or above (``>``) the number given.
BELOW, EXACT, ABOVE = -1, 0, 1


def split_censored(frame: pd.DataFrame) -> Tuple[pd.DataFrame, np.ndarray]:
    """Target cells such as ``"<5.2"`` or ``"> 7"`` as their number plus a censoring code per cell
    (:data:`BELOW`, :data:`EXACT`, :data:`ABOVE`), as chemprop reads inequality labels.

    Example:
        >>> numbers, codes = split_censored(pd.DataFrame({"y": ["<5.2", "3", ">7", None]}))
        >>> numbers["y"].tolist()[:3], codes[:, 0].tolist()
        (['5.2', '3', '7'], [-1, 0, 1, 0])
    """
    codes = np.zeros(frame.shape, dtype=np.int8)
    columns = {}
    for col, name in enumerate(frame.columns):
        raw = frame.iloc[:, col]
        text = raw.astype("string").str.strip()
        below = text.str.startswith("<").fillna(False).to_numpy(dtype=bool)
        above = text.str.startswith(">").fillna(False).to_numpy(dtype=bool)
        codes[below, col], codes[above, col] = BELOW, ABOVE
        stripped = text.str.lstrip("<>").str.strip().astype(object).to_numpy()
        columns[name] = pd.Series(np.where(below | above, stripped, raw.to_numpy(dtype=object)), index=frame.index, dtype=object)
    out = pd.DataFrame(columns, index=frame.index)
    return out, codes


def sample_weights(values: Sequence[str], source: str, column: str) -> np.ndarray:
    """A weight column as float64: blank cells weigh 1; negative, infinite or non-numeric cells
    are an error naming the row.

    Example:
        >>> sample_weights(["2", "", "0.5"], "d.csv", "w").tolist()
        [2.0, 1.0, 0.5]
    """
    out: List[float] = []
    for row, text in enumerate(values):
        try:
            weight = float(text) if text != "" else 1.0
        except ValueError:
            weight = float("nan")
        if not np.isfinite(weight) or weight < 0:
            raise ConfigError(f"row {row} of {source}: weight column {column!r} holds {text!r}; "
                              "weights must be finite numbers >= 0 (blank means 1)")
        out.append(weight)
    return np.asarray(out, dtype=np.float64)


def fold_groups(values: Sequence[str], source: str, column: str) -> List[str]:
    """A group column (``--group-col``) as given; a blank cell is an error naming its row, since
    blanks would otherwise make one group of every molecule without one.

    Example:
        >>> fold_groups(["a", "b", "a"], "d.csv", "series")
        ['a', 'b', 'a']
        >>> fold_groups(["a", "", ""], "d.csv", "series")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: row 1 of d.csv: group column 'series' is blank (2 rows in all); give every molecule a group, ...
    """
    blank = [row for row, text in enumerate(values) if text == ""]
    if blank:
        raise ConfigError(f"row {blank[0]} of {source}: group column {column!r} is blank ({len(blank)} rows in all); "
                          "give every molecule a group, or its own name as one")
    return list(values)
