"""The search: every trial is an ordinary training run of a resolved configuration, so the best
trial's ``config.yaml`` reproduces it with ``dgl-graphtx train --config``."""
from __future__ import annotations

import json
import logging
import math
import multiprocessing
import os
import re
import signal
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import pandas as pd

from ...atomic_io import atomic_to_csv, atomic_write_text
from ...errors import INTERRUPTED_EXIT, ConfigError, DamagedFileError, GraphTxError, one_line, raised_by_interruption
from ...logs import log_to_file
from ...training import ProcessHooks, json_safe
from ...training.metrics import METRIC_DIRECTION, resolve_metrics
from ...validation import check_number
from ..config import RunConfig, resolve_run_config
from ..distributed import end_with_launcher
from ..experiment import ExperimentResult
from ..from_config import train_from_config
from ..plan import RunPlan
from .space import Param, as_overrides, search_space

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]
PRUNERS = ("median", "hyperband", "none")
STUDY_NAME = "dgl_graphtx"
JOURNAL = "hpopt.journal"
BASE_CONFIG = "base_config.yaml"
#: What a search's folder holds (the journal's lock files and temporary files of these included; ``cache``
#: is where searches of earlier versions cached featurized molecules with ``--no-cache``).
SEARCH_FILES = (JOURNAL, BASE_CONFIG, "hpopt.log", "trials", "trials.csv", "best_trial.json", "config.yaml", "cache")
#: What a search writes once it has a journal: without the journal, a folder holding these is no search to continue.
JOURNALED_FILES = ("trials", "trials.csv", "best_trial.json", "config.yaml")


@dataclass(frozen=True)
class SearchSettings:
    """Budget and strategy of a search.

    Args:
        trials: trials in total (counting those of an earlier, resumed search).
        timeout: seconds after which no new trial starts (``None``: no limit).
        jobs: trials run at the same time, each in its own process.
        pruner: ``median`` (stop a trial whose validation metric is worse than the median of
            earlier trials at the same epoch), ``hyperband``, or ``none``.
        startup_trials: trials the median pruner lets finish before pruning any.
        warmup_epochs: epochs of a trial before it may be pruned.
        seed: seed of the TPE sampler (process ``j`` of a parallel search uses ``seed + j``; a
            resumed search seeds from ``seed``, ``j`` and the trials already run, see :func:`sampler_seed`).

    Example:
        >>> SearchSettings(trials=20, jobs=2).pruner
        'median'
    """

    trials: int = 10
    timeout: Optional[float] = 600.0
    jobs: int = 1
    pruner: str = "median"
    startup_trials: int = 3
    warmup_epochs: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        check_number("trials (--trials)", self.trials, 1, integer=True)
        check_number("jobs (--jobs)", self.jobs, 1, integer=True)
        check_number("startup_trials", self.startup_trials, 0, integer=True)
        check_number("warmup_epochs", self.warmup_epochs, 0, integer=True)
        if self.timeout is not None:
            check_number("timeout (--timeout, seconds)", self.timeout, 0, low_open=True)
        if self.pruner not in PRUNERS:
            raise ConfigError(f"pruner (--pruner) must be one of {PRUNERS}, got {self.pruner!r}")


@dataclass
class SearchResult:
    """The best trial: its configuration (saved as ``out_dir/config.yaml``), its validation value
    of ``metric``, and every trial as a table (``trials.csv``)."""

    best_config: RunConfig
    best_value: float
    best_trial: int
    metric: str
    trials: pd.DataFrame


def _optuna():
    try:
        import optuna
    except ModuleNotFoundError:
        raise GraphTxError('hyperparameter search needs Optuna: pip install "dgl_graphtx[hpopt]" (or optuna)') from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def _storage(path: Path):
    optuna = _optuna()
    try:  # Optuna >= 4
        from optuna.storages.journal import JournalFileBackend
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    except ImportError:  # Optuna 3
        return optuna.storages.JournalStorage(optuna.storages.JournalFileStorage(str(path)))


def sampler_seed(seed: int, worker: int, start: int) -> int:
    """The TPE seed of process ``worker`` of a search that begins with ``start`` trials already in
    its journal: ``seed + worker`` for a new search, else a seed drawn from all three, so that a
    resumed search proposes new points (the same seed would repeat the first search's) and a
    resume of the same journal with the same seed proposes the same ones.

    Example:
        >>> sampler_seed(0, 1, 0), sampler_seed(0, 0, 4) == sampler_seed(0, 0, 4), sampler_seed(0, 0, 4) == sampler_seed(0, 0, 5)
        (1, True, False)
    """
    if start == 0:
        return seed + worker
    import numpy as np
    return int(np.random.SeedSequence((seed, worker, start)).generate_state(1)[0])


def check_journal(path: Path) -> None:
    """Refuse the journal ``path`` when a record of it is cut short or is not a record: Optuna
    skips an incomplete last line when it reads, but its next record would be written onto it.

    Example:
        >>> import tempfile
        >>> journal = Path(tempfile.mkdtemp()) / JOURNAL; _ = journal.write_text('{"op_code": 0}\\n{"op_co')
        >>> check_journal(journal)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.DamagedFileError: ... ends in an incomplete record ...
    """
    *lines, tail = path.read_bytes().split(b"\n")
    if tail.strip():
        raise DamagedFileError(f"{path} ends in an incomplete record (a search killed while writing it leaves one): "
                               "remove that last line (the trial it began is lost) and --resume, or start again in a new --out")
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or "op_code" not in record:
            raise DamagedFileError(f"{path} is damaged: line {number} is not a journal record; restore the journal "
                                   "or start again in a new --out")


def _study(out: Path, settings: SearchSettings, direction: str, worker: int, start: int = 0):
    """The search's study in ``out``'s journal, sampling for process ``worker`` of a search that
    began with ``start`` trials in the journal (see :func:`sampler_seed`)."""
    optuna = _optuna()
    pruner = {"median": lambda: optuna.pruners.MedianPruner(settings.startup_trials, settings.warmup_epochs),
              "hyperband": lambda: optuna.pruners.HyperbandPruner(min_resource=max(settings.warmup_epochs, 1)),
              "none": optuna.pruners.NopPruner}[settings.pruner]()
    sampler = optuna.samplers.TPESampler(seed=sampler_seed(settings.seed, worker, start))
    try:
        return optuna.create_study(study_name=STUDY_NAME, storage=_storage(out / JOURNAL), load_if_exists=True,
                                   direction="minimize" if direction == "min" else "maximize", sampler=sampler, pruner=pruner)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as err:  # records Optuna cannot replay
        raise DamagedFileError(f"{out / JOURNAL} is damaged ({type(err).__name__}: {err}); restore the journal or start "
                               "again in a new --out") from None


class PruningHooks(ProcessHooks):
    """Single-process hooks that report each epoch's validation ``metric`` to an Optuna trial and
    stop the run (``optuna.TrialPruned``) when the pruner says so."""

    def __init__(self, trial: Any, metric: str) -> None:
        self.trial = trial
        self.metric = metric

    def end_epoch(self, epoch: int, row: Dict[str, float]) -> None:
        value = row.get(f"valid_{self.metric}")
        if value is None or not math.isfinite(value):
            return
        self.trial.report(float(value), epoch)
        if self.trial.should_prune():
            raise _optuna().TrialPruned(f"epoch {epoch}: valid {self.metric} {value:.4f}")


def run_trial(config: RunConfig, run_dir: Path, hooks: ProcessHooks) -> Tuple[float, Dict[str, float], str]:
    """Train ``config`` into ``run_dir`` as ``dgl-graphtx train`` does (:func:`~dgl_graphtx.runs.from_config.train_from_config`:
    its pretrained backbone, uncertainty method and all); the validation value of the watched
    metric at the best epoch, the test metrics and the metric's name, as ``(value, test, metric)``."""
    metric = resolve_metrics(config.model.task, config.train.metrics)[0]
    # a search trains single runs in this process (hyperparameter_search checks it): one model's result
    result = cast(ExperimentResult, train_from_config(config, run_dir, hooks=hooks))
    return result.train.best_metrics.get(metric, math.nan), result.test_metrics, metric


def _objective(out: Path, space: Sequence[Param]):
    def objective(trial: Any) -> float:
        values = {param.key: param.suggest(trial) for param in space}
        config = resolve_run_config(out / BASE_CONFIG, overrides=as_overrides(values))
        metric = resolve_metrics(config.model.task, config.train.metrics)[0]
        run = f"trials/trial_{trial.number}"
        trial.set_user_attr("run", run)  # relative to the search's folder, which may be moved or copied
        value, test, _ = run_trial(config, out / run, PruningHooks(trial, metric))
        trial.set_user_attr("test", json_safe(test))
        return value
    return objective


def run_folder(out: Path, attr: str) -> Path:
    """The run folder of a trial whose ``run`` attribute is ``attr``: ``trials/trial_<n>``
    relative to the search's folder ``out``; searches of earlier versions stored the path as
    ``--out`` gave it (``runs/search/trials/trial_<n>``), which names the same folder of ``out``.

    Example:
        >>> run_folder(Path("/s"), "trials/trial_3").as_posix(), run_folder(Path("/s"), "old/out/trials/trial_3").as_posix()
        ('/s/trials/trial_3', '/s/trials/trial_3')
    """
    return out / "trials" / Path(attr).name


def _run_one(study: Any, objective: Any) -> Any:
    """Ask ``study`` for a trial, run ``objective`` on it and tell the outcome: a library error
    (:class:`~dgl_graphtx.errors.GraphTxError`) fails the trial with its one-line reason as the
    ``error`` attribute (no traceback); any other exception fails it and is raised again. The finished trial."""
    optuna = _optuna()
    trial = study.ask()
    try:
        value = objective(trial)
    except optuna.TrialPruned:
        return study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    except GraphTxError as err:
        trial.set_user_attr("error", one_line(err))
        return study.tell(trial, state=optuna.trial.TrialState.FAIL)
    except BaseException:
        study.tell(trial, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
        raise
    if not math.isfinite(value):
        trial.set_user_attr("error", f"the validation metric is {value} at every epoch")
        return study.tell(trial, state=optuna.trial.TrialState.FAIL)
    return study.tell(trial, value)


def _progress(total: int):
    def callback(study: Any, trial: Any) -> None:
        done = [t for t in study.trials if t.state.is_finished()]
        complete = [t for t in done if t.value is not None and t.state.name == "COMPLETE"]
        best = f"; best {study.best_value:.4f} (trial {study.best_trial.number})" if complete else ""
        value = f" {trial.value:.4f}" if trial.value is not None else ""
        error = f" ({trial.user_attrs['error']})" if "error" in trial.user_attrs else ""
        logger.info("trial %d %s%s%s%s; %d of %d trials done", trial.number, trial.state.name.lower(), value, error, best,
                    len(done), total)
    return callback


def _optimize(out: Path, space: Sequence[Param], settings: SearchSettings, direction: str, worker: int,
              trials: int, deadline: Optional[float], start: int) -> None:
    """One process's share of the search: ``trials`` trials (fewer if the deadline passes), in a
    search that began with ``start`` trials in its journal."""
    if trials < 1:
        return
    study = _study(out, settings, direction, worker, start)
    objective, progress = _objective(out, space), _progress(settings.trials)
    for _ in range(trials):
        if deadline is not None and time.time() >= deadline:
            break
        progress(study, _run_one(study, objective))


def _shares(out: Path, settings: SearchSettings, direction: str) -> Tuple[List[int], int]:
    """Trials left to run, dealt out to the processes, and the trials already in the journal;
    trials a killed search left ``RUNNING`` are marked failed first. A ``trials/trial_<n>`` folder
    the journal has no trial for (the folder of another search) is refused: trial ``n`` would fail on it."""
    optuna = _optuna()
    study = _study(out, settings, direction, 0)
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        logger.warning("trial %d was interrupted by an earlier search: marked failed", trial.number)
        study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
    start = len(study.get_trials(deepcopy=False))
    folders = (out / "trials").iterdir() if (out / "trials").is_dir() else ()
    strays = sorted(p.name for p in folders if re.fullmatch(r"trial_\d+", p.name) and int(p.name[6:]) >= start)
    if strays:
        raise ConfigError(f"{out / 'trials'} holds {', '.join(strays[:4])}{', ...' if len(strays) > 4 else ''}, which "
                          f"{out / JOURNAL} knows no trial of; remove it or start again in a new --out")
    left = max(settings.trials - start, 0)
    return [left // settings.jobs + (j < left % settings.jobs) for j in range(settings.jobs)], start


def _worker(out: str, space: Sequence[Param], settings: SearchSettings, direction: str, worker: int,
            trials: int, deadline: Optional[float], start: int) -> None:
    import torch

    from ...logs import configure_logging

    end_with_launcher()  # a search killed outright (SIGKILL) takes its processes with it
    torch.set_num_threads(1)
    configure_logging(0)
    try:
        with log_to_file(Path(out) / "hpopt.log"):
            _optimize(Path(out), space, settings, direction, worker, trials, deadline, start)
    except BaseException as err:  # Ctrl-C reaches every process of the search: the main one says it, once
        if raised_by_interruption(err):  # Optuna's journal lock, say, may fail to clean up while it unwinds
            # the main process passes Ctrl-C on to its processes (where it reached the main one alone):
            # one that the signal reached already must not be interrupted again in its exit handlers
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            sys.exit(INTERRUPTED_EXIT)
        raise


def hyperparameter_search(base: RunConfig, out_dir: PathLike, settings: SearchSettings = SearchSettings(),
                          space: Optional[Sequence[Param]] = None, resume: bool = False) -> SearchResult:
    """Search ``space`` (default: :func:`~dgl_graphtx.runs.hpopt.search_space` of the base model) around
    the resolved configuration ``base`` with Optuna's TPE sampler, watching the first of the
    run's metrics on the validation part (``train.metrics``; RMSE or ROC-AUC by default).

    Writes to ``out_dir`` (a new or empty folder, or a search to continue: a folder holding
    anything else, such as a training run, is refused untouched): ``hpopt.log``,
    ``base_config.yaml``, ``hpopt.journal`` (Optuna's journal storage: ``resume=True`` continues
    a search up to ``settings.trials`` trials), ``trials/trial_<n>/`` (an ordinary run folder per
    trial), ``trials.csv``, ``best_trial.json`` and ``config.yaml``, the best trial's
    configuration: ``dgl-graphtx train --config out_dir/config.yaml`` repeats the best trial
    (exactly on CPU with the same thread count).
    """
    if not RunPlan.from_config(base).single:  # the plan checks every rule between the base's settings
        raise ConfigError("hyperparameter search trains single runs; drop --cv, --ensemble-size and --replicates")
    if base.data.path is None or not base.data.targets:
        raise ConfigError("no training data or targets: give DATA and --targets (or data.path / data.targets)")
    _optuna()
    out = Path(out_dir)
    check_search_folder(out)
    journal = out / JOURNAL
    if journal.exists() and not resume:
        raise ConfigError(f"{out} already holds a search ({JOURNAL}); continue it with --resume or choose another --out")
    if journal.exists():
        check_journal(journal)
    else:
        check_no_journal_left(out)
    out.mkdir(parents=True, exist_ok=True)
    with log_to_file(out / "hpopt.log"):
        if resume and not journal.exists():
            logger.info("no %s yet: starting a new search", journal)
        return _search(base, out, settings, space, resume)


def check_search_folder(out: Path) -> None:
    """Refuse ``out`` when it holds anything but the files of a search (:data:`SEARCH_FILES`): a
    training run, a store, other files. A missing or empty folder is fine.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()); _ = (run / "best.pt").write_bytes(b"")
        >>> check_search_folder(run)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: ... holds files that are not an hpopt search (best.pt); ...
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a folder for the search")
    foreign = sorted(p.name for p in out.iterdir() if not _in_search(p.name)) if out.is_dir() else []
    if foreign:
        shown = ", ".join(foreign[:8]) + (", ..." if len(foreign) > 8 else "")
        raise ConfigError(f"{out} holds files that are not an hpopt search ({shown}); give a new or empty --out, or a "
                          "search's folder to continue it with --resume")


def check_no_journal_left(out: Path) -> None:
    """Refuse ``out`` when it holds what a search writes after its journal (:data:`JOURNALED_FILES`:
    trial folders, results) but no journal: trial ``n`` would fail on ``trials/trial_<n>``, and
    the results would mix two searches.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()); (out / "trials" / "trial_0").mkdir(parents=True)
        >>> check_no_journal_left(out)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: ... holds trials/ of a search but no hpopt.journal ...
    """
    left = [name + "/" if (out / name).is_dir() else name for name in JOURNALED_FILES
            if (out / name).is_file() or ((out / name).is_dir() and any((out / name).iterdir()))]
    if left:
        raise ConfigError(f"{out} holds {', '.join(left)} of a search but no {JOURNAL} to continue it from: remove "
                          f"{' and '.join(left)} (or the folder), or give a new --out")


def _in_search(name: str) -> bool:
    """Whether ``name`` is one of a search's files, its journal's lock, or a temporary file of one."""
    bare = name[1:] if name.startswith(".") else name
    return any(bare == own or bare.startswith(own + ".") for own in SEARCH_FILES)


def _search(base: RunConfig, out: Path, settings: SearchSettings, space: Optional[Sequence[Param]], resume: bool) -> SearchResult:
    """The search of :func:`hyperparameter_search` in its checked folder ``out``."""
    base = _as_trials_run(base)
    if not resume or not (out / BASE_CONFIG).exists():
        base.save(out / BASE_CONFIG)
    else:
        saved = resolve_run_config(out / BASE_CONFIG)
        searched, given = _results_settings(saved), _results_settings(base)
        if searched != given:  # any --threads or cache may continue it
            raise ConfigError(f"--resume needs the settings of the search in {out}: {_first_difference(searched, given)} "
                              f"(see {out / BASE_CONFIG})")
        if (saved.data.cache, saved.data.cache_dir) != (base.data.cache, base.data.cache_dir):
            replace(saved, data=replace(saved.data, cache=base.data.cache, cache_dir=base.data.cache_dir)).save(out / BASE_CONFIG)
    space = tuple(space) if space is not None else search_space(base.model.variant)
    metric = resolve_metrics(base.model.task, base.train.metrics)[0]
    direction = METRIC_DIRECTION[metric]
    logger.info("searching %d trial(s) in %d process(es), watching valid %s (%s); space: %s", settings.trials,
                settings.jobs, metric, direction, "; ".join(p.describe() for p in space))
    deadline = time.time() + settings.timeout if settings.timeout is not None else None
    shares, start = _shares(out, settings, direction)
    if settings.jobs == 1:
        _optimize(out, space, settings, direction, 0, shares[0], deadline, start)
    else:
        context = multiprocessing.get_context("spawn")
        workers = [context.Process(target=_worker, args=(str(out), space, settings, direction, j, share, deadline, start))
                   for j, share in enumerate(shares) if share]
        for process in workers:
            process.start()
        try:
            for process in workers:
                process.join()
        except KeyboardInterrupt:  # the processes stop their trials too (interrupted, as the main one), then it is said
            _stop(workers)
            raise
        for process in workers:
            if process.exitcode:
                logger.warning("a search process ended with exit code %s; see %s", process.exitcode, out / "hpopt.log")
    return _summarise(out, settings, direction, metric)


def _stop(workers: Sequence[Any], grace_s: float = 30.0) -> None:
    """Interrupt the search's ``workers`` (as Ctrl-C would, where the signal reached the main
    process alone) and wait for them; one still running after ``grace_s`` seconds is terminated."""
    for process in workers:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGINT)
    for process in workers:
        process.join(grace_s)
        if process.is_alive():
            process.terminate()
            process.join()


def _as_trials_run(base: RunConfig) -> RunConfig:
    """``base`` as its trials run: without progress bars, featurized molecules cached in the
    run's cache folder (``data.cache_dir``, else the user's, as an absolute path) or, with
    ``data.cache`` off (``--no-cache``), not at all."""
    data = base.data
    if data.cache:
        data = replace(data, cache_dir=str(Path(cast(str, data.dataset_cache)).resolve()))
    return replace(base, data=data, train=replace(base.train, progress=False))


def _first_difference(saved: RunConfig, given: RunConfig) -> str:
    """The first setting in which ``given`` differs from the search's ``saved`` one, in words.

    Example:
        >>> a = resolve_run_config(overrides=["data.targets=y"])
        >>> _first_difference(a, resolve_run_config(overrides=["data.targets=y", "train.epochs=7"]))
        'train.epochs is 7 now, 100 in the search'
    """
    for section in ("preset", "data", "model", "featurizer", "relation", "train", "ensemble", "uncertainty"):
        old, new = asdict(getattr(saved, section)), asdict(getattr(given, section))
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return f"{section}.{key} is {new.get(key)!r} now, {old.get(key)!r} in the search"
    return "a setting differs"


def _results_settings(config: RunConfig) -> RunConfig:
    """``config`` without the settings that leave a trial's results as they are: threads and cache."""
    return replace(config.with_threads(None), data=replace(config.data, cache=True, cache_dir=None))


def _summarise(out: Path, settings: SearchSettings, direction: str, metric: str) -> SearchResult:
    study = _study(out, settings, direction, 0)
    frame = study.trials_dataframe()
    atomic_to_csv(frame, out / "trials.csv", index=False)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    if not complete:
        failed = [t for t in study.trials if "error" in t.user_attrs]
        reason = f" (trial {failed[-1].number}: {failed[-1].user_attrs['error']})" if failed else ""
        raise GraphTxError(f"no trial completed{reason}; see {out / 'hpopt.log'}, {out / 'trials.csv'} and "
                           f"{out}/trials/*/train.log")
    best = study.best_trial
    run = run_folder(out, best.user_attrs["run"])
    if not (run / "config.yaml").is_file():
        raise DamagedFileError(f"{run / 'config.yaml'}, the configuration of the best trial ({best.number}), is missing: "
                               f"restore {run} (the search's folder must be moved or copied whole)")
    shutil.copyfile(run / "config.yaml", out / "config.yaml")
    report = {"trial": best.number, "metric": metric, "valid": best.value, "test": best.user_attrs.get("test"),
              "params": best.params, "run": run.relative_to(out).as_posix(), "trials": len(study.trials),
              "complete": len(complete), "pruned": sum(t.state.name == "PRUNED" for t in study.trials)}
    atomic_write_text(json.dumps(report, indent=2, allow_nan=False, default=str), out / "best_trial.json")
    return SearchResult(resolve_run_config(out / "config.yaml"), best.value, best.number, metric, frame)
