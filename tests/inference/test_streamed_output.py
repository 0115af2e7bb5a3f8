"""``predict --output``, tried as a careless user would: resuming with another input or checkpoint,
after a crash that cut a row, on a full disk, from an empty input, and writing to a symlink, a
FIFO or a character device. The reference is always an uninterrupted run into a plain file."""
from __future__ import annotations

import errno
import json
import os
import stat
import threading

import pandas as pd
import pytest

from conftest_models import freesolv_rows, tiny_checkpoint
from cli_runner import assert_one_error_line, run_cli_without_runtime_warnings as run_cli

from dgl_graphtx.inference import Predictor

NORMAL = list(freesolv_rows(0, 60)["smiles"])


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two tiny models, seeded 7 and 8."""
    return [tiny_checkpoint(tmp_path_factory.mktemp(f"model{seed}"), "vanilla", seed=seed, num_layers=1) for seed in (7, 8)]


@pytest.fixture(scope="module")
def checkpoint(checkpoints):
    return checkpoints[0]


@pytest.fixture(scope="module")
def other_checkpoint(checkpoints):
    return checkpoints[1]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("in") / "in.csv"
    pd.DataFrame({"id": [f"m{i}" for i in range(41)], "smiles": NORMAL[:40] + ["not smiles"]}).to_csv(path, index=False)
    return path


def _argv(checkpoint, inputs, *more):
    return ["predict", "--checkpoint", checkpoint, "--input", inputs, "--device", "cpu", "--chunk-size", "10", *more]


@pytest.fixture(scope="module")
def complete(checkpoint, inputs, tmp_path_factory):
    """The uninterrupted run's table, as written."""
    out = tmp_path_factory.mktemp("complete") / "complete.csv"
    assert run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", out))[0] == 0
    return out.read_text()


def _interrupted(checkpoint, inputs, output, monkeypatch, after_chunks=2):
    """Run ``predict`` into ``output`` and stop it (KeyboardInterrupt) after ``after_chunks`` chunks."""
    real = Predictor._predict_chunk
    calls = {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] > after_chunks:
            raise KeyboardInterrupt
        return real(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(Predictor, "_predict_chunk", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", output))
    return output.with_name(output.name + ".partial")


def _data_rows(path) -> int:
    return len(pd.read_csv(path))


# --------------------------------------------------------------------------------------------
# 3: a resume continues only what the .partial was made from
# --------------------------------------------------------------------------------------------
def test_resume_refuses_another_input_of_the_same_length(checkpoint, inputs, tmp_path, monkeypatch):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    other = tmp_path / "other.csv"
    pd.DataFrame({"id": [f"m{i}" for i in range(41)], "smiles": NORMAL[19:60]}).to_csv(other, index=False)
    before = partial.read_bytes()
    assert_one_error_line(run_cli(_argv(checkpoint, other, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume")),
                          str(partial), "another input")
    assert partial.read_bytes() == before and not (tmp_path / "out.csv").exists()


def test_resume_refuses_another_checkpoint(checkpoint, other_checkpoint, inputs, tmp_path, monkeypatch):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    assert_one_error_line(run_cli(_argv(other_checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume")),
                          str(partial), "another checkpoint")


def test_resume_refuses_other_columns(checkpoint, inputs, tmp_path, monkeypatch):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--output", tmp_path / "out.csv", "--resume")),
                          str(partial), "id_col")


def test_resume_refuses_a_partial_that_records_nothing(checkpoint, inputs, tmp_path):
    """A .partial without its record (an older version's, or a file of the same name) is not continued."""
    pd.DataFrame({"smiles": NORMAL[:5], "y_pred": 0.0, "error": ""}).to_csv(tmp_path / "o.csv.partial", index=False)
    assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--output", tmp_path / "o.csv", "--resume")),
                          "o.csv.partial", "delete it")


def test_resume_continues_the_same_run_exactly(checkpoint, inputs, complete, tmp_path, monkeypatch):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    assert _data_rows(partial) == 20
    code, stdout, err = run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume"))
    assert code == 0, err
    assert "resumed after 20 rows" in stdout and "wrote 41 predictions" in stdout
    assert (tmp_path / "out.csv").read_text() == complete
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_resume_refuses_an_edited_value_or_row_count(checkpoint, inputs, tmp_path, monkeypatch):
    """The record's SHA-256 covers the rows' bytes with their count: an edited prediction, or a
    row count raised in the record (the output then held fewer rows than the message said), is
    refused, and both files are left as they were."""
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    record = partial.with_name(partial.name + ".json")
    intact_rows, intact_record = partial.read_text(), record.read_text()
    lines = intact_rows.splitlines(keepends=True)
    fields = lines[3].split(",")
    fields[3] = fields[3][:-1] + ("1" if fields[3][-1] != "1" else "2")  # the last digit of one prediction: same length
    edits = {"value": ("".join(lines[:3] + [",".join(fields)] + lines[4:]), intact_record),
             "row count": (intact_rows, intact_record.replace('"rows": 20', '"rows": 40'))}
    argv = _argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume")
    for rows, recorded in edits.values():
        partial.write_text(rows)
        record.write_text(recorded)
        assert_one_error_line(run_cli(argv), str(partial), "changed after they were written")
        assert partial.read_text() == rows and record.read_text() == recorded and not (tmp_path / "out.csv").exists()


def test_a_record_without_a_digest_is_continued_with_a_warning(checkpoint, inputs, complete, tmp_path, monkeypatch, caplog):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    record = partial.with_name(partial.name + ".json")
    old = json.loads(record.read_text())
    del old["sha256"]  # as the previous version wrote it
    record.write_text(json.dumps(old))
    code, _, err = run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume"))
    assert code == 0, err
    assert (tmp_path / "out.csv").read_text() == complete
    assert any("no digest of its rows" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------------------------
# 4: only whole, flushed rows count
# --------------------------------------------------------------------------------------------
def test_resume_after_a_crash_that_cut_a_row(checkpoint, inputs, complete, tmp_path, monkeypatch):
    partial = _interrupted(checkpoint, inputs, tmp_path / "out.csv", monkeypatch)
    whole = partial.read_text()
    with open(partial, "a") as handle:  # the next chunk was being written when the process died
        handle.write("m20,CCCO,CCCO,-1.2\nm21,CC")
    code, stdout, err = run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume"))
    assert code == 0, err
    assert "resumed after 20 rows" in stdout
    assert (tmp_path / "out.csv").read_text() == complete
    assert complete.startswith(whole)


def test_full_disk_keeps_the_rows_it_counts(checkpoint, inputs, complete, tmp_path, monkeypatch):
    """The disk fills while the third chunk is flushed: the message counts the rows in the file,
    and a resume after space was freed gives the uninterrupted result."""
    partial = tmp_path / "out.csv.partial"
    real_fsync = os.fsync

    def fsync(fd):
        if partial.exists() and os.path.samefile(f"/proc/self/fd/{fd}", partial) and _data_rows(partial) > 20:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", fsync)
        line = assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv")),
                                     "No space left on device", str(partial))
    kept = int(line.split(" rows written before")[0].split()[-1])
    assert kept == _data_rows(partial) == 20
    code, stdout, err = run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", tmp_path / "out.csv", "--resume"))
    assert code == 0, err
    assert (tmp_path / "out.csv").read_text() == complete


# --------------------------------------------------------------------------------------------
# 15: an input without molecules
# --------------------------------------------------------------------------------------------
def test_header_only_input_gives_a_table_with_only_its_header(checkpoint, complete, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("id,smiles\n")
    code, stdout, err = run_cli(_argv(checkpoint, empty, "--id-col", "id", "--output", tmp_path / "x.csv"))
    assert code == 0, err
    assert "wrote 0 predictions" in stdout and "partial" not in stdout + err
    assert (tmp_path / "x.csv").read_text() == complete.splitlines(keepends=True)[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.csv", "x.csv"]


# --------------------------------------------------------------------------------------------
# 5: symlinks, FIFOs and character devices are written through, never replaced
# --------------------------------------------------------------------------------------------
def test_symlink_output_writes_its_target_and_stays_a_link(checkpoint, inputs, complete, tmp_path):
    target = tmp_path / "real" / "preds.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", link))[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == complete
    assert sorted(p.name for p in target.parent.iterdir()) == ["preds.csv"]


def test_dangling_symlink_output_is_refused(checkpoint, inputs, tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "missing" / "preds.csv")
    assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--output", link)), str(link), "symbolic link")
    assert link.is_symlink() and not (tmp_path / "missing").exists()


def test_fifo_output_is_written_through(checkpoint, inputs, complete, tmp_path):
    fifo = tmp_path / "preds.csv"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()), daemon=True)
    reader.start()
    code, stdout, err = run_cli(_argv(checkpoint, inputs, "--id-col", "id", "--output", fifo))
    reader.join(timeout=60)
    assert code == 0, err
    assert received == [complete]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preds.csv"]


def test_resume_into_a_fifo_is_refused(checkpoint, inputs, tmp_path):
    fifo = tmp_path / "preds.csv"
    os.mkfifo(fifo)
    assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--output", fifo, "--resume")), str(fifo), "FIFO")


def test_character_device_output_is_written_through(checkpoint, inputs, tmp_path):
    """``x.csv`` naming /dev/null (a link to it, or a copy of the device where mknod is allowed)."""
    link = tmp_path / "x.csv"
    link.symlink_to("/dev/null")
    code, stdout, err = run_cli(_argv(checkpoint, inputs, "--output", link))
    assert code == 0, err
    assert link.is_symlink() and stat.S_ISCHR(os.stat(link).st_mode)
    copy = tmp_path / "copy.csv"
    try:
        os.mknod(copy, 0o666 | stat.S_IFCHR, os.stat("/dev/null").st_rdev)
    except OSError:
        return  # no right to make device files here
    assert run_cli(_argv(checkpoint, inputs, "--output", copy))[0] == 0
    assert stat.S_ISCHR(os.lstat(copy).st_mode)


def test_parquet_and_evaluate_outputs_write_through_a_symlink(checkpoint, inputs, tmp_path):
    """Every table output goes through the same writer: ``evaluate --output`` keeps a link too."""
    target = tmp_path / "metrics.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    labelled = tmp_path / "labelled.csv"
    pd.DataFrame({"smiles": NORMAL[:10], "y": range(10)}).to_csv(labelled, index=False)
    code, _, err = run_cli(["evaluate", "--checkpoint", checkpoint, labelled, "--device", "cpu",
                            "--output", link])
    assert code == 0, err
    assert link.is_symlink() and len(pd.read_csv(target)) == 10


# --------------------------------------------------------------------------------------------
# ensembles stream and resume like one model
# --------------------------------------------------------------------------------------------
def test_ensemble_prediction_resumes_exactly(checkpoint, other_checkpoint, inputs, tmp_path, monkeypatch):
    both = ["--checkpoint", other_checkpoint]
    whole = tmp_path / "whole.csv"
    assert run_cli(_argv(checkpoint, inputs, *both, "--output", whole))[0] == 0
    table = pd.read_csv(whole)
    members = [Predictor(c, device="cpu").predict(pd.read_csv(inputs)["smiles"].tolist())["y_pred"] for c in (checkpoint, other_checkpoint)]
    pd.testing.assert_series_equal(table["y_pred"], (members[0] + members[1]) / 2, check_names=False, atol=1e-6, rtol=0)
    real = Predictor._predict_chunk
    calls = {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] > 5:  # two members: the third chunk of the second member
            raise KeyboardInterrupt
        return real(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(Predictor, "_predict_chunk", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_cli(_argv(checkpoint, inputs, *both, "--output", tmp_path / "out.csv"))
    assert _data_rows(tmp_path / "out.csv.partial") == 20
    code, stdout, err = run_cli(_argv(checkpoint, inputs, *both, "--output", tmp_path / "out.csv", "--resume"))
    assert code == 0, err
    assert "resumed after 20 rows" in stdout
    assert (tmp_path / "out.csv").read_text() == whole.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "whole.csv"]  # the record went with the .partial


def test_a_file_of_which_no_molecule_is_read_hints_at_the_smiles_column(checkpoint, tmp_path, caplog):
    names = tmp_path / "names.csv"
    pd.DataFrame({"smiles": NORMAL[:4], "iupac": ["ethanol", "water", "methane", "benzene"]}).to_csv(names, index=False)
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        code, stdout, err = run_cli(_argv(checkpoint, names, "--smiles-col", "iupac", "--output", tmp_path / "p.csv"))
    assert code == 0 and "wrote 4 predictions (4 invalid" in stdout
    assert "not one of the 4 molecules" in caplog.text and "is 'iupac' the column of SMILES? (--smiles-col)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="dgl_graphtx"):
        assert run_cli(_argv(checkpoint, names, "--output", tmp_path / "q.csv"))[0] == 0
    assert "column of SMILES" not in caplog.text


def test_a_second_run_writing_the_same_output_is_refused_while_the_first_writes(checkpoint, inputs, tmp_path):
    """Two runs into one --output each deleted and appended to the same .partial and both said
    they succeeded (a 3,000-row output came out as 400 lines without a header): the writer holds
    a lock, so the second is one line; the first finishes intact; a killed writer leaves no lock."""
    import subprocess
    import sys
    from pathlib import Path
    from dgl_graphtx.progressive_csv import ProgressiveCSV
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
    hold = ("import sys, time, pandas as pd; from dgl_graphtx.progressive_csv import ProgressiveCSV; "
            "w = ProgressiveCSV(sys.argv[1]); w.append(pd.DataFrame({'a': [1]})); print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(tmp_path / "out.csv")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert_one_error_line(run_cli(_argv(checkpoint, inputs, "--output", tmp_path / "out.csv")),
                              "out.csv is being written by another run", "write to another file")
        assert (tmp_path / "out.csv.partial").read_text() == "a\n1\n"  # the first run's rows are untouched
    finally:
        holder.kill()
        holder.wait()
    writer = ProgressiveCSV(tmp_path / "out.csv", resume=True, source={})  # the killed holder's lock is gone with it
    assert writer.rows_done == 1
    writer.finish()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
