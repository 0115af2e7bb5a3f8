"""Distributed data-parallel training on PyTorch's own engine (``torch.distributed``, DDP).

Everything distributed lives here; the trainer only talks to the
:class:`~dgl_graphtx.training.ProcessHooks` interface that :class:`DistributedContext` implements:

* process group from torchrun's environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR``...), backend ``nccl`` on CUDA and ``gloo`` on CPU unless overridden, a timeout
  on every collective so a lost peer ends the job instead of hanging it;
* the model wrapped in :class:`~torch.nn.parallel.DistributedDataParallel`; each process trains on
  its share of every global batch (``DistributedSampler``, reshuffled per epoch with
  ``set_epoch``);
* validation and test predictions split over the processes and gathered, so every metric covers
  the whole split with every molecule counted once, and early stopping decides the same everywhere;
* rank 0 alone writes checkpoints, logs, plots and tables and shows progress bars;
* :func:`launch_local`: ``dgl-graphtx train --nproc N`` starts torchrun's elastic launcher.
"""
from __future__ import annotations

import atexit
import dataclasses
import datetime
import logging
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, List, NoReturn, Sequence, Union

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..devices import resolve_device
from ..errors import ConfigError
from ..training import ProcessHooks, TrainConfig
from ..validation import check_number

logger = logging.getLogger("dgl_graphtx")

BACKENDS = ("auto", "gloo", "nccl")
#: Exit status of a process stopped by a user error (printed as one ``error:`` line).
USER_ERROR_EXIT = 2
#: Seconds a process other than the main one waits after a user error for the main one to stop the job.
USER_ERROR_GRACE_S = 10.0
#: Seconds beyond that grace a process whose peer stopped waits for the peer's own report.
PEER_REPORT_S = 5.0


@dataclass
class DistributedConfig:
    """Settings of a distributed run.

    Args:
        backend: ``auto`` (``nccl`` when the device is CUDA, ``gloo`` otherwise), ``gloo`` or ``nccl``.
        timeout_s: seconds any collective may wait for the other processes before the job fails.
        find_unused_parameters: let DDP tolerate parameters without a gradient in a step (every
            built-in model uses all its parameters; set it for custom models that do not).

    Example:
        >>> DistributedConfig(backend="gloo").timeout_s
        600.0
    """

    backend: str = "auto"
    timeout_s: float = 600.0
    find_unused_parameters: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        check_number("timeout_s (--dist-timeout)", self.timeout_s, 0, low_open=True)


def reports_errors() -> bool:
    """Whether this process reports user errors at once: a single process, or the main one of a
    job (the others wait for it: see :func:`report_user_error`).

    Example:
        >>> import os; os.environ.get("RANK") is None and reports_errors()
        True
    """
    return not launched_by_torchrun() or os.environ.get("RANK", "0") == "0"


def report_user_error(message: str, grace_s: float = USER_ERROR_GRACE_S, after_peers: bool = False) -> int:
    """Print ``message`` as the one ``error:`` line and return :data:`USER_ERROR_EXIT`.

    In a distributed job the main process prints it. Another process first waits ``grace_s``
    seconds for the main one, which usually meets the same error, to stop the job (the launcher
    then ends the waiting process, so the error is printed once and the job's status is the main
    process's); it prints the error itself only if it is still running then, so that an error of
    its own is not lost. ``after_peers``: the error is that another process stopped (which
    reports its own error once its wait is over), so this process waits longer than that, the
    main one included, and says its line only if the job is still running then.

    Example:
        >>> import os; os.environ.get("RANK") is None and report_user_error("no such column", grace_s=0)
        2
    """
    if after_peers and launched_by_torchrun():
        time.sleep(grace_s + PEER_REPORT_S)
    elif not reports_errors():
        time.sleep(grace_s)
    print(f"error: {message}", file=sys.stderr)
    return USER_ERROR_EXIT


#: Seconds between a process's looks at whether its launcher is still there (:func:`end_with_launcher`).
LAUNCHER_POLL_S = 0.5
#: The environment variable through which :func:`launch_local` tells its processes its own pid.
LAUNCHER_PID = "DGL_GRAPHTX_LAUNCHER_PID"


def end_with_launcher(poll_s: float = LAUNCHER_POLL_S) -> threading.Thread:
    """End this process when the process that started it ends (the launcher of ``--nproc``, or
    torchrun's agent), whatever stopped it, SIGKILL included: torchrun starts each process in a
    session of its own, so a signal to the command's process group does not reach them, and they
    would go on writing into the run's files unseen. A daemon thread checks the parent every
    ``poll_s`` seconds; what the process wrote stays as its files record it (a resume continues).
    The parent is the pid :data:`LAUNCHER_PID` names (set by :func:`launch_local`, so that a
    launcher gone before this call is noticed too), else the parent at the call.

    Example (in each process of a job, first thing)::

        end_with_launcher()
    """
    parent = int(os.environ.get(LAUNCHER_PID, os.getppid()))

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    thread = threading.Thread(target=watch, name="end-with-launcher", daemon=True)
    thread.start()
    return thread


def end_process(code: int) -> NoReturn:
    """End this process of a torchrun job with exit status ``code`` once its work is done: as the
    interpreter would, the threads that are not daemons are waited for, the exit handlers run and
    the output is flushed, but without the interpreter's shutdown, during which a thread of the
    process group that still asks for the interpreter's lock (to free a tensor Python made) ends
    the process with ``std::terminate`` (seen as SIGABRT, the job failed after its work was done).

    Example (the last line of a process's script)::

        end_process(0 if done else 1)
    """
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def launched_by_torchrun() -> bool:
    """Whether this process is one of several started by torchrun (``WORLD_SIZE`` > 1).

    Example:
        >>> import os; os.environ.get("WORLD_SIZE") is None and launched_by_torchrun()
        False
    """
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def choose_backend(device: torch.device, requested: str = "auto") -> str:
    """``nccl`` for CUDA devices and ``gloo`` otherwise, unless ``requested`` names one.

    Example:
        >>> choose_backend(torch.device("cpu")), choose_backend(torch.device("cuda", 0))
        ('gloo', 'nccl')
    """
    if requested != "auto":
        if requested == "nccl" and device.type != "cuda":
            raise ConfigError("the nccl backend needs CUDA devices; use --backend gloo (or auto) on CPU")
        return requested
    return "nccl" if device.type == "cuda" else "gloo"


def local_device(device: Union[str, torch.device], local_rank: int, local_processes: int = 1) -> torch.device:
    """The device of the process with ``local_rank`` of ``local_processes`` on its machine:
    ``auto`` and ``cuda`` become ``cuda:<local_rank>`` (CPU without CUDA), one GPU per process.

    More processes than visible GPUs, or several processes on one explicit ``cuda:i``, are
    refused with a :class:`ConfigError` (NCCL cannot run two processes of a job on one GPU, and
    the job would fail at its first collective): the launcher checks this before it starts the
    processes (:func:`check_processes`).

    Example:
        >>> local_device("cpu", 3, 4)
        device(type='cpu')
    """
    if str(device) in ("auto", "cuda") and torch.cuda.is_available():
        visible = torch.cuda.device_count()
        if local_processes > visible:
            raise ConfigError(f"{local_processes} processes on this machine need one GPU each, but torch sees {visible}; "
                              f"start at most {visible} (--nproc), or train the {local_processes} processes on the CPU "
                              "with --device cpu")
        return torch.device("cuda", local_rank)
    resolved = resolve_device(device)
    if resolved.type == "cuda" and local_processes > 1:
        raise ConfigError(f"--device {device} puts all {local_processes} processes on one GPU, which NCCL refuses; use "
                          "--device cuda (one GPU per process) or --device cpu")
    return resolved


def check_processes(processes: int, device: Union[str, torch.device]) -> torch.device:
    """Check before starting ``processes`` processes on this machine that each gets a device of
    its own (see :func:`local_device`); the first one's device.

    Example:
        >>> check_processes(2, "cpu")
        device(type='cpu')
    """
    return local_device(device, 0, processes)


class DistributedContext(ProcessHooks):
    """One process of a data-parallel job: the trainer's hooks implemented with ``torch.distributed``.

    Build it with :meth:`from_environment` inside a process started by torchrun; the batch size of
    :class:`~dgl_graphtx.training.TrainConfig` stays the *global* batch (each of the ``N``
    processes takes ``batch_size / N`` molecules per step), so a run gives the same results
    in expectation with any number of processes.

    Example (in a script started with ``torchrun --nproc-per-node 2 script.py``)::

        with DistributedContext.from_environment(device="auto") as ctx:
            with ctx.main_first():
                dataset = freesolv(as_dataset=True, cache_dir="cache")
            train_and_evaluate(dataset, preset, TrainConfig(device=str(ctx.device)), hooks=ctx, out_dir="run")
    """

    def __init__(self, rank: int, world_size: int, local_rank: int, device: torch.device, config: DistributedConfig) -> None:
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank
        self.device = device
        self.config = config

    @classmethod
    def from_environment(cls, device: Union[str, torch.device] = "auto",
                         config: DistributedConfig = DistributedConfig()) -> "DistributedContext":
        """Join the process group described by torchrun's environment variables."""
        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
        if missing:
            raise ConfigError(f"not started by torchrun ({', '.join(missing)} unset); launch with "
                              "'torchrun --nproc-per-node N -m dgl_graphtx ...' or 'dgl-graphtx train --nproc N'")
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        end_with_launcher()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        resolved = local_device(device, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        if resolved.type == "cuda":
            torch.cuda.set_device(resolved)
        backend = choose_backend(resolved, config.backend)
        dist.init_process_group(backend, rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=config.timeout_s))
        if rank != 0:  # other ranks stay quiet: warnings and errors only
            logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
        logger.info("process group: %d processes, backend %s, device %s", world_size, backend, resolved)
        return cls(rank, world_size, local_rank, resolved, config)

    def __enter__(self) -> "DistributedContext":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(wait=exc_type is None)

    def close(self, wait: bool = True) -> None:
        """Leave the process group; with ``wait``, after every process got here (rank 0 hosts the
        store the group lives on, so it must not leave while others still talk to it)."""
        if dist.is_initialized():
            if wait:
                dist.barrier()
            dist.destroy_process_group()

    @property
    def _comm_device(self) -> torch.device:
        return self.device if dist.get_backend() == "nccl" else torch.device("cpu")

    # -- ProcessHooks -------------------------------------------------------------------------
    def wrap_model(self, model: nn.Module) -> nn.Module:
        """``model`` in DistributedDataParallel (gradients averaged over processes in backward)."""
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids,
                                       find_unused_parameters=self.config.find_unused_parameters)

    def all_sum(self, values: torch.Tensor) -> torch.Tensor:
        total = values.to(self._comm_device).clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total.to(values.device)

    def gather_rows(self, local: torch.Tensor, num_rows: int) -> torch.Tensor:
        """Rows ``r, r + N, ...`` of every rank ``r`` put back in order (each row exactly once)."""
        width = -(-num_rows // self.world_size)
        padded = local.new_zeros((width, *local.shape[1:]))
        padded[: len(local)] = local
        parts = [torch.empty_like(padded, device=self._comm_device) for _ in range(self.world_size)]
        dist.all_gather(parts, padded.to(self._comm_device))
        out = local.new_empty((num_rows, *local.shape[1:]))
        for rank, part in enumerate(parts):
            count = len(range(rank, num_rows, self.world_size))
            out[rank :: self.world_size] = part[:count].to(local.device)
        return out

    def gather_objects(self, obj: Any) -> List[Any]:
        out: List[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        dist.barrier()


@contextmanager
def process_hooks(device: Union[str, torch.device] = "auto", config: DistributedConfig = DistributedConfig()) -> Iterator[ProcessHooks]:
    """The hooks of this process: a :class:`DistributedContext` when torchrun started several
    processes (left again at the end), else the single-process :class:`ProcessHooks`.

    Example:
        >>> with process_hooks("cpu") as hooks:
        ...     hooks.world_size
        1
    """
    if not launched_by_torchrun():
        yield ProcessHooks()
        return
    with DistributedContext.from_environment(device, config) as context:
        yield context


def process_settings(train: TrainConfig, hooks: ProcessHooks) -> TrainConfig:
    """``train`` for this process of a distributed job: the device torchrun gave its rank, and
    progress output on the main process only; unchanged in a single process.

    Example:
        >>> process_settings(TrainConfig(epochs=3), ProcessHooks()) == TrainConfig(epochs=3)
        True
    """
    if not isinstance(hooks, DistributedContext):
        return train
    return dataclasses.replace(train, device=str(hooks.device), progress=train.progress and hooks.is_main)


def launch_local(nproc: int, argv: Sequence[str], monitor_interval_s: float = 1.0) -> int:
    """Run ``python -m dgl_graphtx <argv>`` in ``nproc`` processes on this machine with torchrun's
    elastic launcher (``torch.distributed.run --standalone``); the exit status of the job.

    If one process fails, the launcher stops the others and reports the failing rank's error;
    the status is that process's exit code. A user error (exit code 2, as in a single process)
    has been printed by the main process as one line, so the launcher adds nothing to it.
    """
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    if nproc < 1:
        raise ConfigError(f"--nproc must be >= 1, got {nproc}")
    if launched_by_torchrun():
        raise ConfigError("--nproc starts torchrun itself; leave it out when launching with torchrun")
    args = torchrun.parse_args([
        "--standalone", f"--nproc-per-node={nproc}", f"--monitor-interval={monitor_interval_s}",
        "-m", "dgl_graphtx", *argv,
    ])
    # the launcher's log lines repeat what the summary below or the processes say; older torch
    # gives some of its loggers their own level, so each one is quietened, not only the parent
    elastic = [logging.getLogger(name) for name in list(logging.Logger.manager.loggerDict)
               if name == "torch.distributed.elastic" or name.startswith("torch.distributed.elastic.")]
    levels = [logger.level for logger in elastic]
    for logger in elastic:
        logger.setLevel(logging.CRITICAL)
    # inherited by the processes, which end with this one; only theirs: a process this one starts
    # later (hpopt --jobs, another --nproc) would take this pid for its parent's and end at once
    previous_launcher = os.environ.get(LAUNCHER_PID)
    os.environ[LAUNCHER_PID] = str(os.getpid())
    try:
        torchrun.run(args)
    except SignalException as err:  # the launcher was interrupted and stopped the processes
        print(f"error: interrupted (signal {int(err.sigval)}); the processes were stopped: rerun the command with --resume "
              "to continue", file=sys.stderr)
        return 128 + int(err.sigval)
    except ChildFailedError as err:
        codes = [failure.exitcode for failure in err.failures.values()]
        if USER_ERROR_EXIT in codes and all(c == USER_ERROR_EXIT or c < 0 for c in codes):
            return USER_ERROR_EXIT  # printed once by the process that met it; the others were stopped
        rank, first = err.get_first_failure()
        if first.exitcode < 0:  # a process was killed (no error of its own to show)
            print(f"error: process {rank} of the job was stopped by signal {-first.exitcode} ({first.signal_name()}); the "
                  "others were stopped: rerun the command with --resume to continue", file=sys.stderr)
            return 128 - first.exitcode
        print(err.format_msg(), file=sys.stderr)
        return next((c for c in codes if c > 0), 1)
    finally:
        for logger, level in zip(elastic, levels):
            logger.setLevel(level)
        if previous_launcher is None:
            os.environ.pop(LAUNCHER_PID, None)
        else:
            os.environ[LAUNCHER_PID] = previous_launcher
    return 0
