"""Predicting with an ensemble: the members' mean, their spread as ``<target>_std`` (with the
members' own variances where every member predicts one: members with different uncertainty heads
are combined on what they share, with a warning), and calibrated intervals from a stored
calibration (:func:`~dgl_graphtx.runs.ensemble.train_ensemble` writes one per replicate)."""
from __future__ import annotations

import itertools
import logging
import math
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..errors import ConfigError, DamagedFileError
from ..featurize.molecule import MoleculeLike
from ..featurize.similarity import SIMILARITY_COLUMN
from ..saved_files import read_json
from ..training.outputs import prediction_column, prediction_frame
from ..uncertainty import Calibration
from ..uncertainty.evaluation import UncertainPredictions, add_uncertainty_columns
from .cross_conformal import CVPlus
from .input_chunks import indexed_like
from .predictor import Predictor

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
#: A replicate's calibration of its members' spread, in its folder.
CALIBRATION_FILE = "calibration.json"


def ensemble_table(tables: Sequence[pd.DataFrame], names: Sequence[str]) -> pd.DataFrame:
    """Mean and standard deviation (``ddof=0``) over members' prediction tables with the same rows:
    the columns ``names`` are averaged; a ``<name>_std`` column follows each.

    Example:
        >>> a = pd.DataFrame({"smiles": ["C"], "y": [1.0]}); b = pd.DataFrame({"smiles": ["C"], "y": [3.0]})
        >>> ensemble_table([a, b], ["y"]).values.tolist()
        [['C', 2.0, 1.0]]
    """
    out = tables[0].drop(columns=list(names)).copy()
    for name in names:
        stack = np.stack([t[name].to_numpy(dtype=float) for t in tables])
        position = tables[0].columns.get_loc(name)
        out.insert(min(position, len(out.columns)), name, stack.mean(0))
        out.insert(out.columns.get_loc(name) + 1, f"{name}_std", stack.std(0))
    return out


def combine_members(tables: Sequence[pd.DataFrame], names: Sequence[str]) -> pd.DataFrame:
    """:func:`ensemble_table` of the members' prediction columns (``<name>_pred``), with
    ``<name>_std`` the members' spread; when every member predicts its own ``<name>_std``, its mean
    variance is added (total variance = variance of the means + mean of the variances; members
    without one leave the spread alone), and their own intervals are dropped, as is their
    similarity to their training parts (``similarity_to_training``), which may differ.

    Example:
        >>> a = pd.DataFrame({"smiles": ["C"], "y_pred": [1.0], "y_std": [3.0]}); b = a.assign(y_pred=[3.0])
        >>> combine_members([a, b], ["y"]).values.tolist()  # sqrt(1 + 9)
        [['C', 2.0, 3.1622776601683795]]
    """
    own = [f"{n}_{s}" for n in names for s in ("std", "lo", "hi")] + [SIMILARITY_COLUMN]
    member_variance = {n: np.mean([t[f"{n}_std"].to_numpy(float) ** 2 for t in tables], axis=0)
                       for n in names if all(f"{n}_std" in t for t in tables)}
    out = ensemble_table([t.drop(columns=[c for c in own if c in t]) for t in tables], [prediction_column(n) for n in names])
    out = out.rename(columns={f"{prediction_column(n)}_std": f"{n}_std" for n in names})
    for name, variance in member_variance.items():
        out[f"{name}_std"] = np.sqrt(out[f"{name}_std"].to_numpy(float) ** 2 + variance)
    return _with_mean_class_probabilities(out, tables, names)


def _with_mean_class_probabilities(out: pd.DataFrame, tables: Sequence[pd.DataFrame], names: Sequence[str]) -> pd.DataFrame:
    """``out`` with each multiclass target's ``<name>_prob_<k>`` the members' mean probabilities
    and ``<name>_pred`` the most probable class of that mean (a class index has no spread: no
    ``<name>_std``), rather than the mean of the members' classes.

    Example:
        >>> a = pd.DataFrame({"k_pred": [0.0], "k_prob_0": [0.6], "k_prob_1": [0.4], "k_prob_2": [0.0]})
        >>> b = pd.DataFrame({"k_pred": [2.0], "k_prob_0": [0.4], "k_prob_1": [0.0], "k_prob_2": [0.6]})
        >>> combine_members([a, a, b], ["k"]).round(3).values.tolist()
        [[0.0, 0.533, 0.267, 0.2]]
    """
    for name in names:
        columns = list(itertools.takewhile(tables[0].__contains__, (f"{name}_prob_{k}" for k in itertools.count())))
        if not columns:
            continue
        frame = prediction_frame("multiclass", len(columns), [name], np.mean([t[columns].to_numpy(float) for t in tables], axis=0))
        out = out.drop(columns=[f"{name}_std", *columns])
        for offset, column in enumerate(frame.columns[1:], start=out.columns.get_loc(prediction_column(name)) + 1):
            out.insert(offset, column, frame[column].to_numpy())
        out[prediction_column(name)] = frame[prediction_column(name)].to_numpy()
    return out


def with_intervals(table: pd.DataFrame, names: Sequence[str], calibration: Calibration) -> pd.DataFrame:
    """``table`` (``<t>_pred`` means, ``<t>_std`` spreads) with the calibrated std and intervals.

    Example:
        >>> from dgl_graphtx.uncertainty import Calibration
        >>> table = pd.DataFrame({"y_pred": [1.0], "y_std": [0.5]})
        >>> list(with_intervals(table, ["y"], Calibration("ensemble", 0.9, z_scale=[2.0], conformal=[1.0])).columns)
        ['y_pred', 'y_std', 'y_lo', 'y_hi']
    """
    mean = table[[prediction_column(n) for n in names]].to_numpy(dtype=float)
    std, lo, hi = calibration.apply(mean, table[[f"{n}_std" for n in names]].to_numpy(dtype=float))
    table = table.drop(columns=[f"{n}_std" for n in names])
    return add_uncertainty_columns(table, names, UncertainPredictions(mean, std, lo, hi), prediction_column)


def stored_calibration(folders: Sequence[PathLike]) -> Optional[Calibration]:
    """The ensemble calibration in ``<folder>/calibration.json`` when exactly one folder is given
    and holds one (a replicate folder written by :func:`train_ensemble`), or is an ensemble's
    folder of one replicate (the same members), else ``None``; an ensemble's folder of several
    replicates, each calibrated for its own members, is predicted without one, and a warning says so.

    Example:
        >>> stored_calibration(["no/such/folder"]) is None
        True
    """
    if len(folders) != 1 or not Path(folders[0]).is_dir():
        return None
    folder = Path(folders[0])
    replicates = sorted(path for path in folder.glob("replicate_*") if path.is_dir())
    if len(replicates) > 1:
        if any((replicate / CALIBRATION_FILE).is_file() for replicate in replicates):
            logger.warning("%s holds %d replicates, each calibrated for its own members: all their members predict together "
                           "with their uncalibrated spread as the std and no interval; give one replicate's folder (%s) for "
                           "its calibrated std and interval", folder, len(replicates), replicates[0])
        return None
    path = (replicates[0] if replicates else folder) / CALIBRATION_FILE
    fix = "train the ensemble again (--overwrite), or predict with its members' best.pt files to leave the calibration out"
    data = read_json(path, fix, optional=True)
    if data is None:
        return None
    try:
        data["conformal"] = [math.inf if q is None else float(q) for q in data.get("conformal") or []] or None
        return Calibration.from_dict(data)
    except (TypeError, ValueError, KeyError) as err:
        raise DamagedFileError(f"{path} is damaged: it is not a calibration ({type(err).__name__}: {err}); {fix}") from None


def warn_of_other_heads(predictors: Sequence[Predictor]) -> None:
    """Say so when some members predict their own std (an uncertainty head, MC dropout) and others
    do not: they are combined on what they share, the mean and the members' spread.

    Example:
        >>> warn_of_other_heads([])
    """
    methods = [p.uncertainty.method for p in predictors]
    if len(set(m == "none" for m in methods)) > 1:
        counts = ", ".join(f"{m} for {methods.count(m)}" for m in sorted(set(methods)))
        logger.warning("the ensemble's members predict with different uncertainty methods (%s): they are combined on what "
                       "they share, the mean and the members' spread; their own variances are left out", counts)


def ensemble_chunks(predictors: Sequence[Predictor], molecules: Sequence[MoleculeLike], progress: bool = False,
                    identifiers: Optional[Sequence[str]] = None, calibration: Optional[Calibration] = None,
                    features: Optional[pd.DataFrame] = None, cv_plus: Optional[CVPlus] = None) -> Iterator[pd.DataFrame]:
    """:func:`ensemble_predict` one chunk at a time: every member predicts a chunk (the members'
    ``chunk_size``), and its combined table is yielded before the next chunk is featurized, so
    memory holds one chunk per member. An empty input gives one empty table with every column.
    With ``cv_plus`` (a cross-validation's folder, :func:`~dgl_graphtx.inference.stored_cv_plus`)
    the members are its fold models and the intervals are CV+ ones.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> model = save_checkpoint(tempfile.mkdtemp() + "/best.pt", build_model(p.model), CheckpointMeta(p.featurizer, p.relation, ["y"]))
        >>> [len(t) for t in ensemble_chunks([Predictor(model, chunk_size=2)] * 2, ["C", "CC", "CCC"])]
        [2, 1]
    """
    names = predictors[0].target_names
    if any(p.target_names != names for p in predictors):
        raise ConfigError(f"the checkpoints predict different targets: {[p.target_names for p in predictors]}")
    if cv_plus is not None and len(predictors) != len(cv_plus.checkpoints):
        raise ConfigError(f"CV+ needs the {len(cv_plus.checkpoints)} fold models of the cross-validation, got {len(predictors)}")
    if cv_plus is not None and set(names) - set(cv_plus.scores):
        raise ConfigError(f"the cross-validation's out-of-fold predictions hold no scores of {sorted(set(names) - set(cv_plus.scores))}, "
                          "which its fold models predict; run the cross-validation again (--overwrite)")
    warn_of_other_heads(predictors)
    members: List[Iterable[pd.DataFrame]]
    if len(molecules):
        members = [p.predict_chunks(molecules, progress=progress and i == 0, identifiers=identifiers, features=features)
                   for i, p in enumerate(predictors)]
    else:
        members = [[p.predict([], features=features)] for p in predictors]
    for tables in zip(*members):
        out = combine_members(tables, names)
        if cv_plus is not None:
            yield with_cv_plus_intervals(out, tables, names, cv_plus)
        else:
            yield with_intervals(out, names, calibration) if calibration is not None else out


def with_cv_plus_intervals(out: pd.DataFrame, tables: Sequence[pd.DataFrame], names: Sequence[str], cv_plus: CVPlus) -> pd.DataFrame:
    """``out`` (the fold models' combined table) with the CV+ ``<t>_lo`` and ``<t>_hi`` of the
    fold models' predictions ``tables`` (one per fold, in ``cv_plus``'s order)."""
    for name in names:
        stds = np.stack([t[f"{name}_std"].to_numpy(float) for t in tables]) if f"{name}_std" in tables[0] else None
        lo, hi = cv_plus.intervals(name, np.stack([t[prediction_column(name)].to_numpy(float) for t in tables]), stds)
        add_uncertainty_columns(out, [name], UncertainPredictions(lo[:, None], None, lo[:, None], hi[:, None]),
                                after=lambda n: f"{n}_std")
    return out


def ensemble_predict(predictors: Sequence[Predictor], molecules: Sequence[MoleculeLike], progress: bool = False,
                     identifiers: Optional[Sequence[str]] = None, calibration: Optional[Calibration] = None,
                     features: Optional[pd.DataFrame] = None, cv_plus: Optional[CVPlus] = None) -> pd.DataFrame:
    """Mean prediction of several predictors with a ``<target>_std`` column per target: the
    members' spread, combined with their own mean variance when they predict a std. A
    ``calibration`` (from ``replicate_<r>/calibration.json`` of :func:`train_ensemble`) scales
    the std and adds ``<target>_lo`` / ``<target>_hi``; with ``cv_plus`` (the predictors are a
    cross-validation's fold models, in fold order: :func:`~dgl_graphtx.inference.cross_conformal.stored_cv_plus`)
    ``<target>_lo`` / ``<target>_hi`` are CV+ intervals. ``features``: the user feature columns
    of models trained with them (see :meth:`Predictor.predict`). The rows of a pandas Series keep its index.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> paths = [save_checkpoint(tempfile.mkdtemp() + "/best.pt", build_model(p.model),
        ...                          CheckpointMeta(p.featurizer, p.relation, ["y"])) for _ in range(2)]
        >>> list(ensemble_predict([Predictor(x) for x in paths], ["CCO"]).columns)
        ['smiles', 'canonical_smiles', 'y_pred', 'y_std', 'error', 'warning']
    """
    return indexed_like(pd.concat(list(ensemble_chunks(predictors, molecules, progress, identifiers, calibration, features,
                                                       cv_plus)), ignore_index=True), molecules)
