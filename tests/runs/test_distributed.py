"""Distributed data-parallel training and resumable runs, with real processes on localhost.

Every spawned job is bounded twice: each collective times out after 60 s (``DistributedConfig``),
and each launcher call after ``JOB_TIMEOUT_S``. The reference job (``distributed_job.py``) is a
1-layer vanilla transformer without dropout on 97 FreeSolv molecules, 4 epochs, global batch 16.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

import numpy as np
import pandas as pd
import pytest
import torch

from command_processes import REPO, assert_process_ends, command_env, run_bounded, shown
from distributed_job import EPOCHS, run_job

from dgl_graphtx.checkpoint import load_checkpoint
from dgl_graphtx.cli.common import without_option
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.runs.distributed import DistributedConfig, choose_backend, launch_local, report_user_error
from dgl_graphtx.training import ProcessHooks

JOB = Path(__file__).resolve().parents[1] / "distributed_job.py"
JOB_TIMEOUT_S = 150
#: 1 vs 2 processes: the same global batches and the same mean gradients up to float32 summation
#: order (Adam's normalisation magnifies that rounding in near-zero gradients, hence not 1e-6).
METRIC_RTOL = 1e-3


def _run(args: List[str], retries: int = 0) -> subprocess.CompletedProcess:
    return run_bounded(args, JOB_TIMEOUT_S, retries)


def torchrun(*job_args: str, nproc: int = 2, retries: int = 0) -> subprocess.CompletedProcess:
    """``distributed_job.py`` under torchrun's elastic launcher (past its time limit, see ``run_bounded``)."""
    return _run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                 "--monitor-interval=0.5", str(JOB), *job_args], retries)


def _metrics(out: Path) -> dict:
    """metrics.json without its run_id (each run has its own identity)."""
    metrics = json.loads((out / "metrics.json").read_text())
    metrics.pop("run_id", None)
    return metrics


def _weights(path: Path) -> dict:
    return load_checkpoint(path).model.state_dict()


def _assert_same_weights(a: Path, b: Path, atol: float = 0.0) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.allclose(wa[key], wb[key], atol=atol, rtol=0), key


@pytest.fixture(scope="module")
def single_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("single")
    run_job(out, ProcessHooks())
    return out


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    job = torchrun(str(out))
    assert job.returncode == 0, shown(job.stderr)
    return out


def test_two_processes_match_one_process_and_checkpoint_predicts_in_a_plain_process(single_run, two_process_run):
    one, two = _metrics(single_run), _metrics(two_process_run)
    assert one["sizes"] == two["sizes"]
    assert one["best_epoch"] == two["best_epoch"]
    for part in ("valid", "test"):
        for name in ("rmse", "mae"):
            assert two[part][name] == pytest.approx(one[part][name], rel=METRIC_RTOL), (part, name)
    log1, log2 = pd.read_csv(single_run / "log.csv"), pd.read_csv(two_process_run / "log.csv")
    assert len(log2) == EPOCHS  # one log, written once, by rank 0
    np.testing.assert_allclose(log2["train_loss"], log1["train_loss"], rtol=METRIC_RTOL)
    # the gathered test predictions cover every test molecule once, in order
    table, reference = pd.read_csv(two_process_run / "test_predictions.csv"), pd.read_csv(single_run / "test_predictions.csv")
    assert table["row"].tolist() == reference["row"].tolist()
    np.testing.assert_allclose(table["expt_pred"], reference["expt_pred"], rtol=METRIC_RTOL, atol=METRIC_RTOL)
    predicted = Predictor(two_process_run / "best.pt", device="cpu").predict(table["smiles"].tolist())
    np.testing.assert_allclose(predicted["expt_pred"], table["expt_pred"], rtol=1e-5, atol=1e-5)


def test_failing_rank_ends_the_job_with_its_error_and_the_run_resumes_to_the_same_result(two_process_run, tmp_path):
    start = time.perf_counter()
    failed = torchrun(str(tmp_path), "--fail-rank", "1", "--fail-epoch", "3")
    assert failed.returncode != 0
    assert time.perf_counter() - start < JOB_TIMEOUT_S
    assert "injected failure in rank 1 at the start of epoch 3" in failed.stderr
    assert load_checkpoint(tmp_path / "last.pt").training_state["epoch"] == 2
    assert not (tmp_path / "metrics.json").exists()
    # CI once saw this job print nothing for 150 s (torch 2.2.1; never here): a resume stopped then is
    # resumed again, with the stacks of the stopped one as a warning
    resumed = torchrun(str(tmp_path), "--resume", retries=1)
    assert resumed.returncode == 0, shown(resumed.stderr)
    assert _metrics(tmp_path) == _metrics(two_process_run)
    _assert_same_weights(tmp_path / "best.pt", two_process_run / "best.pt")
    _assert_same_weights(tmp_path / "last.pt", two_process_run / "last.pt")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "log.csv").drop(columns="seconds"),
                                  pd.read_csv(two_process_run / "log.csv").drop(columns="seconds"))


def test_single_process_killed_run_resumes_to_the_same_weights_and_metrics(single_run, tmp_path):
    killed = _run([sys.executable, str(JOB), str(tmp_path), "--fail-rank", "0", "--fail-epoch", "3", "--kill"])
    assert killed.returncode == -9, shown(killed.stderr)
    state = load_checkpoint(tmp_path / "last.pt").training_state
    assert state["epoch"] == 2 and len(state["history"]) == 2
    run_job(tmp_path, ProcessHooks(), resume=True)
    assert _metrics(tmp_path) == _metrics(single_run)
    _assert_same_weights(tmp_path / "best.pt", single_run / "best.pt")
    _assert_same_weights(tmp_path / "last.pt", single_run / "last.pt")


def test_resuming_a_finished_run_changes_nothing(single_run, tmp_path):
    for name in ("last.pt", "best.pt"):
        (tmp_path / name).write_bytes((single_run / name).read_bytes())
    result = run_job(tmp_path, ProcessHooks(), resume=True)
    assert len(result.train.history) == EPOCHS
    assert _metrics(tmp_path) == _metrics(single_run)


def test_resume_refuses_other_training_settings(single_run, tmp_path):
    from dgl_graphtx.training import Trainer, TrainConfig
    loaded = load_checkpoint(single_run / "last.pt")
    trainer = Trainer(loaded.model, TrainConfig(epochs=EPOCHS, batch_size=16, lr=1e-2, progress=False), out_dir=tmp_path, meta=loaded.meta)
    with pytest.raises(ConfigError, match="lr=0.003"):
        trainer.fit(_tiny_dataset(), resume=single_run / "last.pt")


def _tiny_dataset():
    from conftest_models import dataset_for, tiny_preset
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    return dataset_for(preset.featurizer, preset.relation, 0, 16)


def test_backend_choice_and_launcher_errors(monkeypatch):
    assert choose_backend(torch.device("cpu")) == "gloo"
    assert choose_backend(torch.device("cuda", 1)) == "nccl"
    assert choose_backend(torch.device("cuda", 0), "gloo") == "gloo"
    with pytest.raises(ConfigError, match="nccl backend needs CUDA"):
        choose_backend(torch.device("cpu"), "nccl")
    with pytest.raises(ConfigError, match="backend must be one of"):
        DistributedConfig(backend="mpi")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="leave it out when launching with torchrun"):
        launch_local(2, ["train"])
    assert without_option(["train", "a.csv", "--nproc=4", "--nproc", "2", "--out", "x"], "--nproc") == ["train", "a.csv", "--out", "x"]


def test_batch_size_must_divide_over_processes():
    hooks = ProcessHooks()
    hooks.world_size = 3
    with pytest.raises(ConfigError, match="not divisible by the 3 processes"):
        hooks.local_batch_size(16)
    assert hooks.local_batch_size(48) == 16


def _cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m dgl_graphtx ARGV`` in a fresh process, as a user runs it."""
    return _run([sys.executable, "-m", "dgl_graphtx", *argv])


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory) -> Path:
    from conftest_models import freesolv_rows
    path = tmp_path_factory.mktemp("csv") / "d.csv"
    freesolv_rows(0, 40)[["smiles", "expt"]].to_csv(path, index=False)
    return path


@pytest.mark.parametrize("mistake", ["missing file", "folder holds a run", "timeout nan", "timeout 0"])
def test_user_errors_of_a_two_process_run_are_found_before_the_processes_start(mistake, small_csv, tmp_path, monkeypatch):
    from cli_runner import assert_one_error_line, must_not_be_called, run_cli
    from dgl_graphtx.cli import train
    monkeypatch.setattr(train, "launch_local", must_not_be_called("the processes were started before the mistake was found"))
    out = tmp_path / "run"
    argv = ["train", small_csv, "--targets", "expt", "--out", out, "--nproc", "2", "--device", "cpu"]
    if mistake == "missing file":
        argv[1] = tmp_path / "missing.csv"
        expected = "data file not found"
    elif mistake == "folder holds a run":
        out.mkdir()
        (out / "best.pt").write_text("a finished run")
        expected = "already holds a run"
    else:
        argv += ["--dist-timeout", mistake.split()[1]]
        expected = "timeout_s (--dist-timeout) must be a finite number > 0"
    assert_one_error_line(run_cli(argv), expected)


def test_a_user_error_found_inside_the_processes_is_one_line_from_the_main_process(small_csv, tmp_path):
    """A mistake seen only once the data is read (a target the file lacks) stops both processes:
    one error line, exit status 2, no traceback, no launcher summary (it was 81 lines)."""
    job = _cli("train", str(small_csv), "--targets", "nope", "--out", str(tmp_path / "run"), "--nproc", "2",
               "--device", "cpu", "--dist-timeout", "60", "-q")
    lines = [line for line in job.stderr.splitlines() if line.strip()]
    assert job.returncode == 2, job.stderr
    assert lines == [f"error: column(s) ['nope'] not found in {small_csv}; available: ['smiles', 'expt']. "
                     "Check the spelling of the target names (they are case-sensitive)"], job.stderr


def test_a_user_error_of_another_process_is_reported_after_the_main_ones_grace(monkeypatch, capsys):
    """A process other than the main one waits for the main one to stop the job (which usually
    meets the same error and reports it once); still running after the grace, it reports its own
    error rather than losing it. The main process reports at once."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    naps: List[float] = []
    monkeypatch.setattr(time, "sleep", naps.append)
    assert report_user_error("column 'x' not found", grace_s=7.0) == 2
    assert naps == [7.0] and capsys.readouterr().err == "error: column 'x' not found\n"
    monkeypatch.setenv("RANK", "0")
    assert report_user_error("column 'x' not found", grace_s=7.0) == 2
    assert naps == [7.0] and capsys.readouterr().err == "error: column 'x' not found\n"


def test_a_process_ends_with_its_launcher_even_one_killed_by_sigkill(tmp_path):
    """torchrun starts each process in a session of its own: a SIGKILL to the command's process
    group left them running (predict --nproc went on writing its parts unseen)."""
    import signal
    child = ("import time; from dgl_graphtx.runs.distributed import end_with_launcher; end_with_launcher(0.1); "
             "time.sleep(60)")
    launcher = ("import os, subprocess, sys, time; os.environ['DGL_GRAPHTX_LAUNCHER_PID'] = str(os.getpid()); "
                "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True); print(p.pid, flush=True); "
                "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", launcher, child], stdout=subprocess.PIPE, text=True, env=command_env(), cwd=REPO)
    pid = int(parent.stdout.readline())
    os.kill(pid, 0)  # running (maybe still importing: it learns its launcher's pid from the environment)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert_process_ends(pid, 20, "the process outlived its launcher", poll_s=0.1)


def test_a_process_started_after_a_launch_is_not_taken_for_one_of_its_processes(tmp_path):
    """launch_local names itself the launcher of the processes it starts; it left that name in its
    environment, so a process started later (the workers of ``hpopt --jobs 2`` after an
    in-process ``--nproc`` run) took it for its parent's and ended at once."""
    assert launch_local(1, ["info"]) == 0
    worker = "import time; from dgl_graphtx.runs.distributed import end_with_launcher; end_with_launcher(0.05); time.sleep(1)"
    search = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]]).returncode)"
    done = subprocess.run([sys.executable, "-c", search, worker], env=command_env(), cwd=REPO, timeout=120)
    assert done.returncode == 0  # the worker lived while its parent (the search) did


def test_a_finished_process_ends_with_its_exit_handlers_run_and_its_output_flushed():
    """end_process skips only the interpreter's shutdown (where a process group's thread can abort
    the process): the status, a thread still working, the exit handlers (the featurizing pool's,
    logging's) and what was printed all stay."""
    script = ("import atexit, sys, threading, time; from dgl_graphtx.runs.distributed import end_process; "
              "atexit.register(lambda: print('handler ran')); print('buffered', end=' '); "
              "threading.Thread(target=lambda: (time.sleep(1), print('thread done', end=' '))).start(); "
              "sys.stderr.write('to stderr'); end_process(3)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
    assert (done.returncode, done.stdout, done.stderr) == (3, "buffered thread done handler ran\n", "to stderr")
