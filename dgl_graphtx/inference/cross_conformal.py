"""CV+ intervals from a cross-validation's folder: every molecule of the data calibrates once,
with its out-of-fold score against the model of the fold that left it out, and a new molecule's
interval combines those scores with every fold model's prediction of it (see
:func:`~dgl_graphtx.uncertainty.cv_plus_intervals`). The folder's ``cv_metrics.json`` and
``oof_predictions.csv`` are read guarded (:mod:`~dgl_graphtx.saved_files`): a folder of folds
whose report or out-of-fold table is missing or damaged is refused in one line, never averaged
without its intervals; too few out-of-fold labels for the coverage (unbounded intervals) are said."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..datasets.report import show_value
from ..errors import ConfigError, DamagedFileError
from ..saved_files import read_csv, read_json
from ..training.outputs import predicted_targets, prediction_column
from ..uncertainty import cv_plus_intervals, uncertainty_method
from ..uncertainty.conformal import conformal_rank, needed_scores, out_of_fold_scores
from .checkpoint_paths import BEST, checkpoints_in

logger = logging.getLogger("dgl_graphtx")

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
        intervals). A folder of folds without a readable report or out-of-fold table is a
        :class:`~dgl_graphtx.errors.DamagedFileError`."""
        folder = Path(folder)
        fix = (f"run the cross-validation again (--cv with --overwrite --out {folder}), or name its folds' {BEST} files "
               "to average them without CV+ intervals")
        report = read_json(folder / CV_REPORT, fix, optional=True)
        if report is None:
            if folder.is_dir() and any(p.is_dir() and re.fullmatch(r"fold_\d+", p.name) for p in folder.iterdir()):
                raise DamagedFileError(f"{folder} holds the folds of a cross-validation but no {CV_REPORT} (it stopped before "
                                       f"the end, or the file was deleted); {fix}")
            return None
        settings = report.get("uncertainty")
        if settings is None or report.get("task", "regression") != "regression":
            return None
        try:
            folds, coverage, method = int(report["folds"]), float(settings["coverage"]), uncertainty_method(settings["method"])
        except (KeyError, TypeError, ValueError) as err:
            raise DamagedFileError(f"{folder / CV_REPORT} is damaged ({type(err).__name__}: {err}); {fix}") from None
        checkpoints = [folder / f"fold_{k}" / BEST for k in range(folds)]
        if checkpoints_in(folder) != checkpoints:
            raise ConfigError(f"{folder} should hold the checkpoints of its {folds} folds and no other, "
                              f"found {[str(p) for p in checkpoints_in(folder)]}")
        oof = read_csv(folder / OOF_FILE, fix, columns=("row", "fold"))
        assert oof is not None  # not optional
        names = predicted_targets(oof)
        normalised = method.scores == "normalised" and all(f"{n}_std" in oof for n in names)
        try:
            scores = {n: out_of_fold_scores(oof[n].to_numpy(float), oof[prediction_column(n)].to_numpy(float),
                                            oof[f"{n}_std"].to_numpy(float) if normalised else None) for n in names}
        except ValueError as err:  # text where numbers belong
            raise DamagedFileError(f"{folder / OOF_FILE} is damaged ({err}); {fix}") from None
        cv = cls(coverage, _oof_folds(oof, folds, folder / OOF_FILE, fix), scores, normalised, checkpoints)
        cv.warn_if_unbounded(folder)
        return cv

    def warn_if_unbounded(self, folder: Path) -> None:
        """Say which targets have too few out-of-fold labels for a finite CV+ interval at the coverage."""
        for name, target_scores in self.scores.items():
            n = int((~np.isnan(target_scores)).sum())
            if conformal_rank(n, self.coverage) > n:
                logger.warning("CV+ intervals of %s at coverage %g need at least %d out-of-fold molecules with a label; %s "
                               "has %d: they are unbounded (lo=-inf, hi=inf); cross-validate more molecules or lower "
                               "--coverage", name, self.coverage, needed_scores(self.coverage), folder / OOF_FILE, n)

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


def _oof_folds(oof: pd.DataFrame, folds: int, path: Path, fix: str) -> np.ndarray:
    """The ``fold`` column of an out-of-fold table, each a fold number below ``folds``."""
    numbers = pd.to_numeric(oof["fold"], errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~np.isin(numbers, np.arange(folds)))
    if len(bad):
        raise DamagedFileError(f"{path} is damaged: row {int(bad[0])} has fold {show_value(oof['fold'].iloc[bad[0]])}, not one of "
                               f"0..{folds - 1}; {fix}")
    return numbers.astype(int)


def stored_cv_plus(folders: Sequence[PathLike]) -> Optional[CVPlus]:
    """:meth:`CVPlus.from_folder` when exactly one folder is given, else ``None``.

    Example:
        >>> stored_cv_plus(["no/such/folder"]) is None
        True
    """
    return CVPlus.from_folder(folders[0]) if len(folders) == 1 else None

