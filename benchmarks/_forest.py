"""The random-forest baseline of the accuracy benchmarks (scikit-learn, one thread)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def random_forest_predictions(x: np.ndarray, y: np.ndarray, fit_rows: Sequence[int], test_rows: Sequence[int],
                              task: str, seed: int, trees: int = 500) -> np.ndarray:
    """Test predictions of scikit-learn's random forest (``trees`` trees, one thread) fitted on
    ``fit_rows``: values for regression, the positive class's probability for classification."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    kind = RandomForestRegressor if task == "regression" else RandomForestClassifier
    forest = kind(n_estimators=trees, random_state=seed, n_jobs=1).fit(x[list(fit_rows)], y[list(fit_rows)])
    test = list(test_rows)
    return forest.predict(x[test]) if task == "regression" else forest.predict_proba(x[test])[:, 1]

