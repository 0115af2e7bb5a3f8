"""The processes of ``hpopt --jobs 2``: Ctrl-C is one line (each process printed its traceback),
and a search killed outright takes its processes with it (they went on running its trials)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("optuna")

from command_processes import REPO, assert_process_ends, command_env, interruptible  # noqa: E402
from dgl_graphtx.datasets import freesolv  # noqa: E402

SLOW_TRIALS = ["--model", "vanilla", "--epochs", "500", "--device", "cpu", "--no-progress", "--threads", "1", "--kernel", "none",
               "--features-generators", "none", "--set", "model.num_layers=1", "model.hidden_dim=16", "model.num_heads=2"]


def _searching(tmp_path):
    """``hpopt --jobs 2`` in a process group of its own, once both its processes train a trial."""
    data, out = tmp_path / "d.csv", tmp_path / "search"
    freesolv()[:40][["smiles", "expt"]].to_csv(data, index=False)
    argv = ["hpopt", data, "--targets", "expt", "--out", out, "--trials", "4", "--pruner", "none", "--jobs", "2", *SLOW_TRIALS]
    job = subprocess.Popen([sys.executable, "-m", "dgl_graphtx", *map(str, argv)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=command_env(), cwd=REPO, start_new_session=True,
                           preexec_fn=interruptible)
    deadline = time.time() + 240
    while len(list((out / "trials").glob("trial_*/log.csv"))) < 2 and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    assert job.poll() is None, job.communicate()
    workers = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(job.pid)], capture_output=True, text=True).stdout.split()]
    return job, workers


def test_ctrl_c_of_a_parallel_search_is_one_line(tmp_path):
    job, _ = _searching(tmp_path)
    os.killpg(job.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
    _, err = job.communicate(timeout=120)
    assert job.returncode == 130, err
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: interrupted (Ctrl-C); what was written is kept: rerun the same command with --resume to continue"]


def test_a_search_killed_outright_takes_its_processes_with_it(tmp_path):
    job, workers = _searching(tmp_path)
    assert workers, "the search started no processes"
    job.kill()
    job.communicate(timeout=60)
    for pid in workers:
        assert_process_ends(pid, 30, f"process {pid} of the killed search went on")


def test_an_error_raised_while_ctrl_c_unwinds_a_process_is_the_interruption(tmp_path, monkeypatch):
    """Ctrl-C interrupted Optuna's journal lock in a process of ``hpopt --jobs 2``, whose clean-up
    then failed (``os.unlink`` of the lock's file): that error's traceback was printed, where the
    process should end as interrupted, quietly; an error of its own still surfaces."""
    import logging

    from dgl_graphtx.errors import INTERRUPTED_EXIT
    from dgl_graphtx.runs.hpopt import search

    def interrupted_lock(*args):
        try:
            raise KeyboardInterrupt
        finally:
            raise FileNotFoundError("hpopt.journal.lock")

    monkeypatch.setattr(search, "end_with_launcher", lambda: None)
    handlers = list(logging.getLogger("dgl_graphtx").handlers)
    try:
        monkeypatch.setattr(search, "_optimize", interrupted_lock)
        with pytest.raises(SystemExit) as ended:
            search._worker(str(tmp_path), [], None, "minimize", 0, 1, None, 0)
        assert ended.value.code == INTERRUPTED_EXIT
        monkeypatch.setattr(search, "_optimize", lambda *args: (_ for _ in ()).throw(FileNotFoundError("its own")))
        with pytest.raises(FileNotFoundError, match="its own"):
            search._worker(str(tmp_path), [], None, "minimize", 0, 1, None, 0)
    finally:
        logging.getLogger("dgl_graphtx").handlers[:] = handlers


def test_a_process_ending_as_interrupted_lets_a_second_ctrl_c_pass_its_exit_handlers(tmp_path):
    """Ctrl-C reaches every process of the search, and the main one passes it on to its processes
    as well: a second SIGINT came while a process ran its exit handlers (torch's, once in 16 runs of
    test_ctrl_c_of_a_parallel_search_is_one_line), and its traceback was printed. A process ending
    as interrupted runs them to their end."""
    script = ("import atexit, sys, time\n"
              "from dgl_graphtx.runs.hpopt import search\n"
              "def interrupted(*args):\n"
              "    atexit.register(lambda: (print('exiting', flush=True), time.sleep(3), print('handlers done', flush=True)))\n"
              "    raise KeyboardInterrupt\n"
              "search._optimize = interrupted\n"
              "search._worker(sys.argv[1], (), None, 'min', 0, 1, None, 0)\n")
    job = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=command_env(), cwd=REPO, preexec_fn=interruptible)
    assert job.stdout.readline() == "exiting\n"
    job.send_signal(signal.SIGINT)
    out, err = job.communicate(timeout=120)
    assert (job.returncode, out, "Traceback" in err) == (130, "handlers done\n", False), err
