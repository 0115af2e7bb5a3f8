"""Model outputs as named table columns (one per target; class probabilities for multiclass).

One naming everywhere (``predict``, ``evaluate``, ``test_predictions.csv``): the prediction of
target ``t`` is the column ``t_pred`` (:func:`prediction_column`), so a table can hold the measured
``t`` beside it; uncertainty columns are ``t_std``, ``t_lo``, ``t_hi`` and class probabilities
``t_prob_<k>``.
"""
from __future__ import annotations

from typing import List, Sequence

import numpy as np
import pandas as pd

#: What the prediction column of a target adds to the target's name.
PREDICTION_SUFFIX = "_pred"


def prediction_column(name: str) -> str:
    """The column holding the prediction of target ``name``.

    Example:
        >>> prediction_column("logS")
        'logS_pred'
    """
    return f"{name}{PREDICTION_SUFFIX}"


def predicted_targets(table: pd.DataFrame) -> List[str]:
    """The targets of a table of saved predictions: every ``<t>`` with a ``<t>_pred`` column.

    Example:
        >>> predicted_targets(pd.DataFrame(columns=["row", "smiles", "logS", "logS_pred", "logS_std", "x_pred"]))
        ['logS']
    """
    return [n for n in table.columns if prediction_column(n) in table.columns]


def prediction_frame(task: str, num_classes: int, names: Sequence[str], values: np.ndarray) -> pd.DataFrame:
    """Predictions ``values`` (``[M, T]``, or ``[M, T * K]`` class probabilities for ``multiclass``)
    as columns ``<target>_pred`` (:func:`prediction_column`); a multiclass target gets its most
    probable class there and ``<target>_prob_<k>`` for every class ``k``. Rows that are all NaN
    stay NaN.

    Example:
        >>> prediction_frame("multiclass", 3, ["kind"], np.array([[0.2, 0.7, 0.1]])).columns.tolist()
        ['kind_pred', 'kind_prob_0', 'kind_prob_1', 'kind_prob_2']
        >>> prediction_frame("multiclass", 3, ["kind"], np.array([[0.2, 0.7, 0.1]]))["kind_pred"].tolist()
        [1.0]
    """
    values = np.asarray(values, dtype=np.float64)
    if task != "multiclass":
        return pd.DataFrame(values, columns=[prediction_column(name) for name in names])
    columns = {}
    for t, name in enumerate(names):
        probs = values[:, t * num_classes:(t + 1) * num_classes]
        missing = np.isnan(probs).any(1)
        columns[prediction_column(name)] = np.where(missing, np.nan, np.nan_to_num(probs).argmax(1))
        for k in range(num_classes):
            columns[f"{name}_prob_{k}"] = probs[:, k]
    return pd.DataFrame(columns)


def prediction_values(task: str, num_classes: int, names: Sequence[str], table: pd.DataFrame) -> np.ndarray:
    """The inverse of :func:`prediction_frame`: the model outputs ``[M, T]`` (``[M, T * K]``
    class probabilities for ``multiclass``) read back from ``table``.

    Example:
        >>> frame = prediction_frame("multiclass", 2, ["a"], np.array([[0.4, 0.6]]))
        >>> prediction_values("multiclass", 2, ["a"], frame).tolist()
        [[0.4, 0.6]]
    """
    if task == "multiclass":
        columns = [f"{name}_prob_{k}" for name in names for k in range(num_classes)]
    else:
        columns = [prediction_column(name) for name in names]
    return table[columns].to_numpy(dtype=np.float64)
