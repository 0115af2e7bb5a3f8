"""What ``--checkpoint`` may name, resolved the same way by every command and by :class:`~dgl_graphtx.inference.Predictor`:
a checkpoint file, a run folder (its ``best.pt``) or an ensemble folder (every ``best.pt`` below it).

A run that was stopped before it finished (its ``run.json`` says ``running``) still has the
``best.pt`` of its best epoch so far. Named itself it is used (with a warning when its run folder
is named); found among the members of an ensemble folder it is left out, with a warning naming it,
so an ensemble is never averaged over a half-trained member without a word; a folder none of
whose runs finished is refused. A finished run whose ``best.pt`` is gone (or changed since it
was written, as its folder's record says) is refused, never silently left out of its ensemble.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import List, Optional, Sequence, Union

from ..errors import CheckpointError
from ..saved_files import read_json, verified

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
#: The checkpoint a run keeps (the best validation epoch).
BEST = "best.pt"
#: A run folder's state: ``{"run_id": ..., "status": "running" | "complete"}``.
RUN_INFO = "run.json"
#: What to do about a run folder's damaged file.
RETRAIN = "train the run again (--overwrite), or restore the folder from a backup"


#: The journal of a hyperparameter search's folder (``dgl-graphtx hpopt``), whose trials are no ensemble.
SEARCH_JOURNAL = "hpopt.journal"


def run_error(folder: PathLike) -> str:
    """The ``error`` a failed run recorded in ``folder``'s ``run.json`` (``""`` if none).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()); _ = (run / RUN_INFO).write_text('{"status": "failed", "error": "no spread"}')
        >>> run_error(run)
        'no spread'
    """
    info = read_json(Path(folder) / RUN_INFO, RETRAIN, optional=True)
    error = info.get("error") if info is not None else None
    return error if isinstance(error, str) else ""


def run_status(folder: PathLike) -> Optional[str]:
    """The ``status`` in ``folder``'s ``run.json`` (``running``, ``complete`` or ``failed``), or ``None`` when
    it has none (a checkpoint copied out of its run, a run of an older version); a damaged one is
    a :class:`~dgl_graphtx.errors.DamagedFileError`.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()); _ = (run / RUN_INFO).write_text('{"status": "running"}')
        >>> run_status(run), run_status(run / "elsewhere")
        ('running', None)
    """
    info = read_json(Path(folder) / RUN_INFO, RETRAIN, optional=True)
    status = info.get("status") if info is not None else None
    return status if isinstance(status, str) else None


def natural_key(path: PathLike) -> List[Union[int, str]]:
    """Sort key of a path with its numbers compared as numbers (``fold_2`` before ``fold_10``).

    Example:
        >>> sorted(["fold_10/best.pt", "fold_2/best.pt"], key=natural_key)
        ['fold_2/best.pt', 'fold_10/best.pt']
    """
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def checkpoints_in(path: PathLike) -> List[Path]:
    """``path`` itself if it is a file; a run folder's ``best.pt``; else every ``best.pt`` below
    the folder (an ensemble's members or a cross-validation's folds, in the order of their
    numbers: ``fold_2`` before ``fold_10``) but those of runs that did not finish.

    Example:
        >>> checkpoints_in("no/such/folder")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: checkpoint not found: no/such/folder (give a best.pt, a run folder or an ensemble folder)
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / SEARCH_JOURNAL).is_file():
        raise CheckpointError(f"{path} is a hyperparameter search (hpopt): its trials are models of different settings, not "
                              f"an ensemble; give one trial's run ({path}/trials/trial_N; best_trial.json names the best), or "
                              f"train the best settings with --config {path}/config.yaml")
    if (path / BEST).is_file():
        status = run_status(path)
        if status == "running":
            logger.warning("%s has not finished training (its %s says running): its %s is the best epoch so far",
                           path, RUN_INFO, BEST)
        elif status == "failed":
            logger.warning("%s failed (its %s: %s): its %s is the network at its best epoch, without what the run adds after "
                           "training (the fingerprint kernel, the calibration)", path, RUN_INFO, run_error(path), BEST)
        return [path / BEST]  # load_checkpoint checks it against the folder's record
    runs = sorted({p.parent for name in (BEST, RUN_INFO) for p in path.rglob(name)}, key=natural_key) if path.is_dir() else []
    unfinished = [run for run in runs if run_status(run) in ("running", "failed")]
    finished = [run for run in runs if run not in unfinished]
    for run in finished:  # a finished run without its best.pt: refused (its record names a deleted one)
        if not (run / BEST).is_file():
            verified(run / BEST, RETRAIN, optional=True)
            raise CheckpointError(f"{run} holds a finished run ({RUN_INFO}) but no {BEST}; {RETRAIN}")
    found = [run / BEST for run in finished]
    if not found and (not unfinished or (path / "last.pt").is_file()):
        last = " (it holds last.pt only: the run has not finished an epoch with a validation score)" if (path / "last.pt").is_file() else ""
        raise CheckpointError(f"checkpoint not found: {path} (give a {BEST}, a run folder or an ensemble folder){last}")
    if not found:
        raise CheckpointError(f"{path} holds no finished run: the {RUN_INFO} of {', '.join(str(p) for p in unfinished)} "
                              f"says running or failed (the run stopped before the end); train again, or name one {BEST} to "
                              "use it as it is")
    if unfinished:
        logger.warning("%s: leaving out %d of %d members that did not finish (%s says running or failed): %s",
                       path, len(unfinished), len(runs), RUN_INFO, ", ".join(str(p) for p in unfinished))
    return found


def resolve_checkpoints(given: Union[PathLike, Sequence[PathLike]]) -> List[Path]:
    """Every checkpoint named by one or several ``--checkpoint`` values (see :func:`checkpoints_in`).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()); _ = (run / "best.pt").write_bytes(b"")
        >>> resolve_checkpoints([run]) == [run / "best.pt"]
        True
    """
    items = [given] if isinstance(given, (str, Path)) else list(given)
    return [path for item in items for path in checkpoints_in(item)]


def single_checkpoint(given: Union[PathLike, Sequence[PathLike]], use: str = "this") -> Path:
    """The one checkpoint ``given`` names; an ensemble (several) is an error naming ``use``.

    Example:
        >>> import tempfile
        >>> ens = Path(tempfile.mkdtemp())
        >>> for m in ("member_0", "member_1"):
        ...     (ens / m).mkdir(); _ = (ens / m / "best.pt").write_bytes(b"")
        >>> single_checkpoint(ens, "plot attention")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: ... holds 2 checkpoints (an ensemble); plot attention reads one model: give one of them, ...
    """
    paths = resolve_checkpoints(given)
    if len(paths) > 1:
        where = given if isinstance(given, (str, Path)) else ", ".join(str(g) for g in given)
        raise CheckpointError(f"{where} holds {len(paths)} checkpoints (an ensemble); {use} reads one model: "
                              f"give one of them, e.g. {paths[0]}")
    return paths[0]
