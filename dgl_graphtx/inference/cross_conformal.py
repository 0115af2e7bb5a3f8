"""CV+ intervals from a cross-validation's folder: every molecule of the data calibrates once,
with its out-of-fold score against the model of the fold that left it out, and a new molecule's
interval combines those scores with every fold model's prediction of it (see
:func:`~dgl_graphtx.uncertainty.cv_plus_intervals`)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..training.outputs import predicted_targets, prediction_column
from ..uncertainty import cv_plus_intervals, uncertainty_method
from ..uncertainty.conformal import out_of_fold_scores
from .checkpoint_paths import BEST, checkpoints_in

PathLike = Union[str, Path]
#: Every molecule's out-of-fold prediction, in a cross-validation's folder.
OOF_FILE = "oof_predictions.csv"
#: The summary of a cross-validation (folds, task, uncertainty method and coverage), in its folder.
CV_REPORT = "cv_metrics.json"


@dataclass
class CVPlus:
    """The out-of-fold scores of a cross-validation, ready to give CV+ intervals.

    Attributes:
        coverage: the target coverage.
        folds: the fold (0 .. K-1) whose model scored each calibration molecule.
        scores: per target, every molecule's out-of-fold score (NaN where unlabelled).
        normalised: whether the scores are ``|r| / std`` (else ``|r|``).
        checkpoints: fold ``k``'s checkpoint at position ``k``.

    Example:
        >>> cv = CVPlus(0.6, np.array([0, 0, 1, 1]), {"y": np.array([1.0, 2.0, 3.0, 4.0])}, False, [])
        >>> lo, hi = cv.intervals("y", np.array([[0.0], [10.0]]))
        >>> float(lo[0]), float(hi[0])
        (-1.0, 13.0)
    """

    coverage: float
    folds: np.ndarray
    scores: Dict[str, np.ndarray]
    normalised: bool
    checkpoints: List[Path]

    @classmethod
    def from_folder(cls, folder: PathLike) -> Optional["CVPlus"]:
        """The CV+ scores of a cross-validation folder written with an uncertainty method for
        regression; ``None`` for any other folder (a run, an ensemble, a cross-validation without
        intervals)."""
        folder = Path(folder)
        if not (folder / CV_REPORT).is_file() or not (folder / OOF_FILE).is_file():
            return None
        report = json.loads((folder / CV_REPORT).read_text())
        settings = report.get("uncertainty")
        if settings is None or report.get("task", "regression") != "regression":
            return None
        checkpoints = [folder / f"fold_{k}" / BEST for k in range(int(report["folds"]))]
        if checkpoints_in(folder) != checkpoints:
            raise ConfigError(f"{folder} should hold the checkpoints of its {report['folds']} folds and no other, "
                              f"found {[str(p) for p in checkpoints_in(folder)]}")
        oof = pd.read_csv(folder / OOF_FILE)
        names = predicted_targets(oof)
        normalised = uncertainty_method(settings["method"]).scores == "normalised" and all(f"{n}_std" in oof for n in names)
        scores = {n: out_of_fold_scores(oof[n].to_numpy(float), oof[prediction_column(n)].to_numpy(float),
                                        oof[f"{n}_std"].to_numpy(float) if normalised else None) for n in names}
        return cls(float(settings["coverage"]), oof["fold"].to_numpy(int), scores, normalised, checkpoints)

    def intervals(self, name: str, fold_means: np.ndarray, fold_stds: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
        """CV+ ``(lo, hi)`` of target ``name`` for molecules predicted ``fold_means`` ``[K, M]``
        (and ``fold_stds`` with normalised scores) by the fold models; NaN where a fold model
        gave no prediction (an invalid molecule)."""
        stds = fold_stds if self.normalised else None
        if self.normalised and stds is None:
            raise ConfigError("these CV+ scores are normalised by the models' std; predict with it (no --uncertainty none)")
        lo, hi = np.full(fold_means.shape[1], np.nan), np.full(fold_means.shape[1], np.nan)
        ok = np.isfinite(fold_means).all(0) & (np.isfinite(stds).all(0) if stds is not None else True)
        if ok.any():
            lo[ok], hi[ok] = cv_plus_intervals(fold_means[:, ok], self.scores[name], self.folds, self.coverage,
                                               stds[:, ok] if stds is not None else None)
        return lo, hi


def stored_cv_plus(folders: Sequence[PathLike]) -> Optional[CVPlus]:
    """:meth:`CVPlus.from_folder` when exactly one folder is given, else ``None``.

    Example:
        >>> stored_cv_plus(["no/such/folder"]) is None
        True
    """
    return CVPlus.from_folder(folders[0]) if len(folders) == 1 else None

