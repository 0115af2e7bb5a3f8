"""``dgl-graphtx predict --nproc 2``, as a user runs it: two processes (torchrun's launcher, CPU,
gloo) write one table in input order, equal to one process's; mistakes are one line, found before
the processes start. The shards' own logic: tests/inference/test_prediction_shards.py."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pandas as pd
import pytest

from cli_runner import assert_one_error_line, must_not_be_called, run_cli
from command_processes import REPO, command_env, run_command
from conftest_models import freesolv_rows, tiny_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("model"), "vanilla", seed=7, num_layers=1)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    smiles = list(freesolv_rows(0, 30)["smiles"])
    path = tmp_path_factory.mktemp("in") / "in.tsv"
    pd.DataFrame({"id": [f"m{i:02d}" for i in range(31)], "smiles": smiles[:9] + ["C1CC"] + smiles[9:]}).to_csv(path, sep="\t", index=False)
    return path


def _argv(checkpoint, inputs, output, *more):
    return ["predict", "--checkpoint", str(checkpoint), "--input", str(inputs), "--id-col", "id", "--device", "cpu",
            "--chunk-size", "4", "--output", str(output), *more]


def test_two_processes_write_one_table_in_input_order(checkpoint, inputs, tmp_path):
    assert run_cli(_argv(checkpoint, inputs, tmp_path / "one.tsv"))[0] == 0
    job = run_command(_argv(checkpoint, inputs, tmp_path / "two.tsv", "--nproc", "2"))
    assert job.returncode == 0, job.stderr
    said = job.stdout.strip().splitlines()[-1]
    assert said == f"wrote 31 predictions (1 invalid, 0 outside the training domain) to {tmp_path / 'two.tsv'}"
    one, two = (pd.read_csv(tmp_path / name, sep="\t") for name in ("one.tsv", "two.tsv"))
    assert two.columns.tolist() == one.columns.tolist() and two["id"].tolist() == one["id"].tolist()
    assert two["error"].equals(one["error"]) and two["error"].notna().tolist() == [i == 9 for i in range(31)]
    np.testing.assert_allclose(two["y_pred"], one["y_pred"], rtol=0, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.tsv", "two.tsv"]


@pytest.mark.parametrize("mistake", ["no output", "parquet output", "sdf output", "atom targets", "output being written",
                                     "output a folder"])
def test_mistakes_are_one_line_before_the_processes_start(mistake, checkpoint, inputs, tmp_path, monkeypatch):
    from dgl_graphtx.cli import predict
    monkeypatch.setattr(predict, "launch_local", must_not_be_called("the processes were started before the mistake was found"))
    argv = _argv(checkpoint, inputs, tmp_path / "p.csv", "--nproc", "2")
    if mistake == "no output":
        argv = argv[:argv.index("--output")] + argv[argv.index("--output") + 2:]
        assert_one_error_line(run_cli(argv), "several processes write their rows into one .csv/.tsv --output")
    elif mistake == "parquet output":  # said first, with or without pyarrow (the probe: pyarrow was asked for first)
        argv[argv.index("--output") + 1] = str(tmp_path / "p.parquet")
        assert_one_error_line(run_cli(argv), "several processes write their rows into one .csv/.tsv --output")
    elif mistake == "sdf output":
        assert_one_error_line(run_cli([*argv, "--sdf-output", tmp_path / "p.sdf"]), "without --sdf-output")
    elif mistake == "output being written":  # by another run (the probe: refused at the join, after every row was predicted)
        writer, ready, done = _lock_holder(tmp_path / "p.csv")
        try:
            assert_one_error_line(run_cli(argv), "p.csv is being written by another run (it holds p.csv.partial.lock)")
        finally:
            done.set()
            writer.join()
    elif mistake == "output a folder":
        (tmp_path / "p.csv").mkdir()
        assert_one_error_line(run_cli(argv), "it is a folder; give a file name")
    else:  # found by each process once it has the model: refused in one line there
        from dgl_graphtx.errors import ConfigError
        from dgl_graphtx.inference.prediction_job import PredictionJob, run_prediction
        with pytest.raises(ConfigError, match="atom- and bond-level predictions come from one model in one process"):
            run_prediction(PredictionJob([_atom_checkpoint(tmp_path)], smiles=["CCO"], output=tmp_path / "a.csv", shard=(0, 2)))


def _hold_lock(path, ready, done) -> None:
    from dgl_graphtx.progressive_csv import WriterLock
    lock = WriterLock(path)
    ready.set()
    done.wait(60)
    lock.release()


def _lock_holder(path: Path):
    """Another process holding the writer's lock of ``path`` (as a run writing it does)."""
    from multiprocessing import get_context
    context = get_context("spawn")
    ready, done = context.Event(), context.Event()
    writer = context.Process(target=_hold_lock, args=(path, ready, done))
    writer.start()
    assert ready.wait(60)
    return writer, ready, done


def _atom_checkpoint(folder: Path) -> Path:
    """A tiny model with an atom-level target."""
    from conftest_models import tiny_preset
    from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
    from dgl_graphtx.datasets.level_targets import LevelTargets
    from dgl_graphtx.models import build_model
    from dgl_graphtx.models.levels import LevelOptions
    preset = tiny_preset("gradformer", num_tasks=1, levels=LevelOptions(1, 0, ()))
    meta = CheckpointMeta(preset.featurizer, preset.relation, ["logp"], {"levels": LevelTargets(("q",)).to_dict()})
    return save_checkpoint(folder / "atoms.pt", build_model(preset.model), meta)


def _predicting_in_two_processes(checkpoint, tmp_path: Path) -> Tuple[subprocess.Popen, List[str]]:
    """``predict --nproc 2`` on 6,000 SMILES (200 FreeSolv molecules, 30 times over) into ``p.csv``,
    started and returned (with its arguments) once both processes have written a part's first chunk
    of 200, so each still has at least 2,800 to predict."""
    big = tmp_path / "big.csv"
    pd.DataFrame({"smiles": list(freesolv_rows(0, 200)["smiles"]) * 30}).to_csv(big, index=False)
    argv = ["predict", "--checkpoint", str(checkpoint), "--input", str(big), "--device", "cpu", "--chunk-size", "200",
            "--output", str(tmp_path / "p.csv"), "--nproc", "2"]
    job = subprocess.Popen([sys.executable, "-m", "dgl_graphtx", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=command_env(), cwd=REPO)
    deadline = time.time() + 120
    records = [tmp_path / f"p.shard-{k}-of-2.csv.partial.json" for k in (1, 2)]
    while not all(r.exists() for r in records) and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    return job, argv


def test_an_interrupted_job_is_one_line_and_resumes_to_one_processs_table(checkpoint, tmp_path):
    """Ctrl-C printed about 150 lines (each process's traceback, the launcher's); now one line,
    exit status 130, every process stopped, and --resume finishes the parts."""
    job, argv = _predicting_in_two_processes(checkpoint, tmp_path)
    job.send_signal(signal.SIGINT)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "error: interrupted (signal 2); the processes were stopped: rerun the command with --resume to continue"]
    assert not (tmp_path / "p.csv").exists() and (tmp_path / "p.shard-1-of-2.csv.partial").exists()
    done = run_command([*argv, "--resume"])
    assert done.returncode == 0, done.stderr
    distinct = tmp_path / "distinct.csv"  # one process predicts the 200 molecules once; the job's table repeats them
    pd.read_csv(tmp_path / "big.csv").head(200).to_csv(distinct, index=False)
    one_argv = [*argv[:-2], "--output", tmp_path / "one.csv"]
    one_argv[one_argv.index("--input") + 1] = str(distinct)
    assert run_cli(one_argv)[0] == 0
    two, one = pd.read_csv(tmp_path / "p.csv"), pd.concat([pd.read_csv(tmp_path / "one.csv")] * 30, ignore_index=True)
    assert two["smiles"].tolist() == one["smiles"].tolist() and two["error"].equals(one["error"])
    np.testing.assert_allclose(two["y_pred"], one["y_pred"], rtol=0, atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.csv", "distinct.csv", "one.csv", "p.csv"]


def test_the_error_of_a_process_other_than_the_main_one_is_the_line_shown(checkpoint, inputs, tmp_path):
    """The probe: a damaged part of process 2 gave only the main process's "another process of the
    job stopped" (and rerunning as it advised gave the same line again); now the damage is the line."""
    from dgl_graphtx.inference.prediction_job import PredictionJob, run_prediction
    out = tmp_path / "p.tsv"
    for index in range(2):  # the parts an interrupted job leaves
        run_prediction(PredictionJob([checkpoint], input=inputs, id_col="id", output=out, shard=(index, 2),
                                     predictor={"device": "cpu", "chunk_size": 4}))
    part = tmp_path / "p.shard-2-of-2.tsv.partial"
    part.write_bytes(part.read_bytes()[:-5])
    done = run_command(_argv(checkpoint, inputs, out, "--nproc", "2", "--resume"))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: cannot resume from") and "p.shard-2-of-2.tsv.partial" in lines[0]


def test_the_hint_for_a_file_of_which_nothing_was_read_counts_the_whole_file(checkpoint, tmp_path):
    """Each process looked at its own shard: 3 unreadable rows gave "not one of the 2 molecules",
    and a file whose first half only was unreadable got the hint."""
    checked = {"all unreadable": ["C1CC", "xyz", "C(("], "first half unreadable": ["C1CC", "xyz", "CCO", "CCN"]}
    for name, smiles in checked.items():
        source = tmp_path / f"{name.replace(' ', '_')}.csv"
        pd.DataFrame({"smiles": smiles}).to_csv(source, index=False)
        argv = ["predict", "--checkpoint", str(checkpoint), "--input", str(source), "--device", "cpu", "--output",
                str(source.with_suffix(".out.csv")), "--nproc", "2"]
        done = run_command(argv)
        assert done.returncode == 0, done.stderr
        hints = [line.split(": ", 1)[1] for line in done.stderr.splitlines() if "could be read" in line]
        assert hints == ([f"not one of the 3 molecules of {source} could be read (each row's error says why): is 'smiles' the "
                          "column of SMILES? (--smiles-col)"] if name == "all unreadable" else []), done.stderr


def test_a_killed_process_is_one_line_and_the_job_resumes(checkpoint, tmp_path):
    """kill -9 of one process printed torchrun's report of the failed job (a dozen lines, no word of --resume)."""
    import psutil
    job, argv = _predicting_in_two_processes(checkpoint, tmp_path)
    second = [p for p in psutil.Process(job.pid).children() if p.environ().get("RANK") == "1"]
    assert len(second) == 1
    second[0].send_signal(signal.SIGKILL)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 137, err
    assert [line for line in err.splitlines() if line.strip()] == [
        "error: process 1 of the job was stopped by signal 9 (SIGKILL); the others were stopped: rerun the command with "
        "--resume to continue"]
    done = run_command([*argv, "--resume"])
    assert done.returncode == 0, done.stderr
    assert len(pd.read_csv(tmp_path / "p.csv")) == 6000
