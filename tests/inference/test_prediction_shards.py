"""A prediction made in shards (what each process of ``predict --nproc N`` does, run here one after
the other in this process): the parts joined in input order give one process's table; an
interrupted shard resumes where its record says; the join refuses parts that are unfinished,
edited, or of other columns. The processes themselves: tests/runs/test_sharded_prediction.py."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from conftest_models import freesolv_rows, tiny_checkpoint

from dgl_graphtx.errors import ConfigError, OutputError
from dgl_graphtx.inference import Predictor
from dgl_graphtx.inference.checkpoint_paths import resolve_checkpoints
from dgl_graphtx.inference.prediction_job import PredictionJob, run_prediction
from dgl_graphtx.inference.prediction_shards import join_shards, shard_path, shard_rows, shard_source

NORMAL = list(freesolv_rows(0, 40)["smiles"])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("model"), "vanilla", seed=7, num_layers=1)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    path = tmp_path_factory.mktemp("in") / "in.csv"
    pd.DataFrame({"id": [f"m{i:02d}" for i in range(41)], "smiles": NORMAL[:20] + ["not smiles"] + NORMAL[20:]}).to_csv(path, index=False)
    return path


def _job(checkpoint, inputs, output, **more) -> PredictionJob:
    return PredictionJob([checkpoint], input=inputs, id_col="id", output=output, predictor=dict(device="cpu", chunk_size=7), **more)


@pytest.fixture(scope="module")
def complete(checkpoint, inputs, tmp_path_factory) -> pd.DataFrame:
    """One process's table."""
    out = tmp_path_factory.mktemp("one") / "one.csv"
    run_prediction(_job(checkpoint, inputs, out))
    return pd.read_csv(out)


def _join(job: PredictionJob, count: int):
    source = job.source(resolve_checkpoints(job.checkpoints))
    rows = [len(pd.read_csv(shard_path(job.output, i, count).with_suffix(".csv.partial"))) for i in range(count)]
    return join_shards(job.output, [shard_source(source, i, count) for i in range(count)], rows, ",")


def _sharded(job: PredictionJob, count: int):
    for index in range(count):
        run_prediction(dataclasses.replace(job, shard=(index, count)))
    return _join(job, count)


def test_shards_cover_every_row_once_in_order():
    for total in range(30):
        for count in range(1, 8):
            bounds = [shard_rows(total, i, count) for i in range(count)]
            assert [row for start, stop in bounds for row in range(start, stop)] == list(range(total))
            sizes = [stop - start for start, stop in bounds]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("count", [1, 3, 50])  # 50: more shards than rows, most of them empty
def test_joined_shards_give_one_processs_table_in_input_order(checkpoint, inputs, complete, tmp_path, count):
    output = _sharded(_job(checkpoint, inputs, tmp_path / "p.csv"), count)
    joined = pd.read_csv(output)
    assert joined.columns.tolist() == complete.columns.tolist()
    assert joined["id"].tolist() == complete["id"].tolist() and joined["error"].equals(complete["error"])
    np.testing.assert_allclose(joined["y_pred"], complete["y_pred"], rtol=0, atol=1e-5)  # other batches: float32 rounding
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]  # the parts are gone


def test_an_interrupted_shard_resumes_and_the_join_waits_for_it(checkpoint, inputs, tmp_path, monkeypatch):
    job = _job(checkpoint, inputs, tmp_path / "p.csv")
    reference = _sharded(dataclasses.replace(job, output=tmp_path / "ref.csv"), 2).read_bytes()
    run_prediction(dataclasses.replace(job, shard=(0, 2)))
    real, calls = Predictor._predict_chunk, {"n": 0}

    def interrupted(self, *args):
        calls["n"] += 1
        if calls["n"] > 1:
            raise KeyboardInterrupt
        return real(self, *args)

    with monkeypatch.context() as patch:
        patch.setattr(Predictor, "_predict_chunk", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_prediction(dataclasses.replace(job, shard=(1, 2)))
    source = job.source(resolve_checkpoints(job.checkpoints))
    with pytest.raises(OutputError, match=r"part 2 \(p.shard-2-of-2.csv.partial\) holds 7 of its 20 rows; rerun with --resume"):
        join_shards(job.output, [shard_source(source, i, 2) for i in range(2)], [21, 20], ",")
    done = run_prediction(dataclasses.replace(job, shard=(1, 2), resume=True))
    assert (done.resumed_after, done.rows) == (7, 20)
    assert _join(job, 2).read_bytes() == reference


def test_the_join_refuses_an_edited_part_and_parts_of_other_columns(checkpoint, inputs, tmp_path):
    job = _job(checkpoint, inputs, tmp_path / "p.csv")
    for index in range(2):
        run_prediction(dataclasses.replace(job, shard=(index, 2)))
    part = shard_path(job.output, 1, 2).with_suffix(".csv.partial")
    intact = part.read_text()
    part.write_text(intact.replace("m30", "m31"))  # same length, other bytes
    with pytest.raises(OutputError, match="changed after they were written"):
        _join(job, 2)
    part.write_text(intact)
    source = job.source(resolve_checkpoints(job.checkpoints))
    with pytest.raises(OutputError, match="another shard"):  # a part is checked against its own shard's record
        join_shards(job.output, [shard_source(source, 0, 2)] * 2, [21, 20], ",")
    assert not job.output.exists()


def test_shards_write_one_text_table(checkpoint, inputs, tmp_path):
    for output, more in [(tmp_path / "p.csv", {"sdf_output": tmp_path / "p.sdf"}), (None, {})]:
        with pytest.raises(ConfigError, match="several processes write their rows into one .csv/.tsv --output"):
            _job(checkpoint, inputs, output, shard=(0, 2), **more)


def test_parts_of_a_run_split_otherwise_are_refused_by_a_resume_and_cleared_by_a_new_run(checkpoint, inputs, tmp_path):
    """A resume with another --nproc than the interrupted run started again from row 0 without a
    word and left the old parts beside the output."""
    job = _job(checkpoint, inputs, tmp_path / "p.csv")
    run_prediction(dataclasses.replace(job, shard=(0, 2)))  # one part of a 2-process run, the other never written
    for shard in [(0, 3), None]:
        with pytest.raises(OutputError, match=r"an interrupted run left its rows in p.shard-1-of-2.csv.partial; resume with "
                                              r"--nproc 2, or run without --resume to start again"):
            run_prediction(dataclasses.replace(job, shard=shard, resume=True))
    assert shard_path(job.output, 0, 2).with_suffix(".csv.partial").exists()
    run_prediction(job)  # a new run in one process
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.csv"]
    run_prediction(dataclasses.replace(job, output=tmp_path / "q.csv", shard=(0, 2)))
    (tmp_path / "q.csv.partial").write_text("smiles\n")  # as if a one-process run had been interrupted
    with pytest.raises(OutputError, match="resume in one process"):
        run_prediction(dataclasses.replace(job, output=tmp_path / "q.csv", shard=(1, 2), resume=True))
