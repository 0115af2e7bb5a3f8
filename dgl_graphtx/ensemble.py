"""Ensembles and replicates: ``K`` models with different seeds on the same split (the prediction is
their mean, the per-molecule standard deviation its uncertainty), repeated over ``R`` splits
(metrics reported as mean and standard deviation over replicates)."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from .datasets import MoleculeDataset, Split
from .errors import ConfigError
from .experiment import ExperimentResult, make_split, train_and_evaluate
from .featurize.molecule import MoleculeLike
from .models import Preset
from .predict import Predictor
from .training import TrainConfig, compute_metrics

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]


@dataclass
class EnsembleResult:
    """What :func:`train_ensemble` produced.

    Attributes:
        members: ``[replicate][member]`` experiment results.
        predictions: test parts of every replicate: ``replicate``, ``row``, ``smiles`` and per
            target the label, ``<t>_pred`` (ensemble mean) and ``<t>_std`` (spread of the members).
        metrics: one row per replicate: the ensemble's test metrics and the members' mean.
        summary: ``{metric: {"mean": .., "std": ..}}`` of the ensemble metrics over replicates.
        spearman: Spearman rho of ``std`` vs ``|error|`` over all test molecules (first target;
            NaN with a single member).
    """

    members: List[List[ExperimentResult]]
    predictions: pd.DataFrame
    metrics: pd.DataFrame
    summary: Dict[str, Dict[str, float]]
    spearman: float


def member_seed(seed: int, replicate: int, member: int, size: int) -> int:
    """Seed of one member: ``seed + replicate * size + member`` (with ``size=1`` replicate ``r``
    is the single run with seed ``seed + r``, split and initialisation alike).

    Example:
        >>> [member_seed(0, r, k, 3) for r in range(2) for k in range(3)]
        [0, 1, 2, 3, 4, 5]
    """
    return seed + replicate * size + member


def ensemble_table(tables: Sequence[pd.DataFrame], names: Sequence[str]) -> pd.DataFrame:
    """Mean and standard deviation (``ddof=0``) over members' prediction tables with the same rows:
    ``<t>_pred``-style or bare target columns are averaged; a ``<t>_std`` column follows each.

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


def train_ensemble(
    dataset: MoleculeDataset,
    preset: Preset,
    train_config: TrainConfig = TrainConfig(),
    split: Union[str, Split] = "random",
    fractions: Tuple[float, float, float] = (0.8, 0.1, 0.1),
    ensemble_size: int = 1,
    replicates: int = 1,
    out_dir: Optional[PathLike] = None,
) -> EnsembleResult:
    """Train ``ensemble_size`` models per split over ``replicates`` splits and evaluate the
    ensemble mean on each test part.

    Replicate ``r`` splits with seed ``train_config.seed + r``; member ``k`` trains with
    :func:`member_seed`. A given :class:`Split` allows a single replicate. With ``out_dir``,
    member runs go to ``replicate_<r>/member_<k>/`` and ``ensemble_test_predictions.csv`` and
    ``ensemble_metrics.json`` to ``out_dir``.

    Example:
        >>> from dgl_graphtx.datasets import freesolv
        >>> from dgl_graphtx.models import get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> ds = MoleculeDataset.from_dataframe(freesolv()[:40], target_cols=["expt"],
        ...                                     featurizer=p.featurizer, relation=p.relation, progress=False)
        >>> r = train_ensemble(ds, p, TrainConfig(epochs=1, progress=False), ensemble_size=2, replicates=2)
        >>> len(r.metrics), sorted(r.summary["rmse"]), "expt_std" in r.predictions
        (2, ['mean', 'std'], True)
    """
    if ensemble_size < 1 or replicates < 1:
        raise ConfigError(f"ensemble size and replicates must be >= 1, got {ensemble_size} and {replicates}")
    if isinstance(split, Split) and replicates > 1:
        raise ConfigError("replicates need random or scaffold splits; the data defines a single split")
    out = Path(out_dir) if out_dir is not None else None
    names = list(dataset.target_names)
    members: List[List[ExperimentResult]] = []
    predictions, rows = [], []
    for replicate in range(replicates):
        parts = make_split(dataset, split, fractions, train_config.seed + replicate)
        runs = []
        for member in range(ensemble_size):
            seed = member_seed(train_config.seed, replicate, member, ensemble_size)
            logger.info("replicate %d/%d, member %d/%d (seed %d)", replicate + 1, replicates, member + 1, ensemble_size, seed)
            member_dir = out / f"replicate_{replicate}" / f"member_{member}" if out is not None else None
            runs.append(train_and_evaluate(dataset, preset, dataclasses.replace(train_config, seed=seed), parts,
                                           fractions, member_dir))
        members.append(runs)
        table = ensemble_table([r.test_predictions for r in runs], [f"{n}_pred" for n in names])
        table = table.rename(columns={f"{n}_pred_std": f"{n}_std" for n in names})
        table.insert(0, "replicate", replicate)
        predictions.append(table)
        labels = table[names].to_numpy(dtype=float)
        metrics = compute_metrics(preset.model.task, labels, table[[f"{n}_pred" for n in names]].to_numpy(dtype=float))
        member_means = {f"member_{k}": float(np.mean([r.test_metrics[k] for r in runs])) for k in metrics}
        rows.append({"replicate": replicate, **metrics, **member_means})
    frame = pd.concat(predictions, ignore_index=True)
    metrics_frame = pd.DataFrame(rows)
    summary = {k: {"mean": float(metrics_frame[k].mean()), "std": float(metrics_frame[k].std(ddof=0))}
               for k in metrics_frame.columns if k != "replicate"}
    first = names[0]
    errors = (frame[f"{first}_pred"] - frame[first]).abs()
    keep = errors.notna() & frame[f"{first}_std"].notna()
    rho = float(spearmanr(frame.loc[keep, f"{first}_std"], errors[keep]).statistic) if ensemble_size > 1 and keep.sum() > 2 else float("nan")
    if out is not None:
        frame.to_csv(out / "ensemble_test_predictions.csv", index=False)
        report = {"ensemble_size": ensemble_size, "replicates": replicates, "summary": summary,
                  "spearman_std_vs_abs_error": None if np.isnan(rho) else rho, "replicate_metrics": rows}
        (out / "ensemble_metrics.json").write_text(json.dumps(report, indent=2))
    return EnsembleResult(members, frame, metrics_frame, summary, rho)


def checkpoints_in(path: PathLike) -> List[Path]:
    """``path`` itself if it is a file, else every ``best.pt`` below the folder (sorted).

    Example:
        >>> checkpoints_in("no/such/folder")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: no checkpoint at no/such/folder
    """
    path = Path(path)
    if path.is_file():
        return [path]
    found = sorted(path.rglob("best.pt")) if path.is_dir() else []
    if not found:
        raise ConfigError(f"no checkpoint at {path}")
    return found


def ensemble_predict(predictors: Sequence[Predictor], molecules: Sequence[MoleculeLike], progress: bool = False,
                     identifiers: Optional[Sequence[str]] = None, features: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """Mean prediction of several predictors with a ``<target>_std`` column per target
    (``features``: the user feature columns of models trained with them, see :meth:`Predictor.predict`).

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> paths = [save_checkpoint(tempfile.mkdtemp() + "/best.pt", build_model(p.model),
        ...                          CheckpointMeta(p.featurizer, p.relation, ["y"])) for _ in range(2)]
        >>> list(ensemble_predict([Predictor(x) for x in paths], ["CCO"]).columns)
        ['smiles', 'y', 'y_std', 'error', 'warning']
    """
    names = predictors[0].target_names
    if any(p.target_names != names for p in predictors):
        raise ConfigError(f"the checkpoints predict different targets: {[p.target_names for p in predictors]}")
    tables = [p.predict(molecules, progress=progress and i == 0, identifiers=identifiers, features=features)
              for i, p in enumerate(predictors)]
    return ensemble_table(tables, names)
