"""One prediction table made by several processes (``dgl-graphtx predict --nproc N``, or the same
command under torchrun, on one machine or several sharing the output's folder).

Each process predicts a contiguous shard of the input's rows on a device of its own (GPU
``LOCAL_RANK`` when there are GPUs) into its part beside the output; when every process is done,
the main one joins the parts into the output, rows in input order
(:mod:`~dgl_graphtx.inference.prediction_shards`). An interrupted job continues with ``--resume``:
every process takes up its own part where the record says it stopped.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import os
from pathlib import Path
from typing import Optional

import torch
import torch.distributed as dist

from ..errors import PeerFailedError
from ..inference.checkpoint_paths import resolve_checkpoints
from ..inference.prediction_job import PredictionJob, PredictionSummary, hint_if_nothing_read, run_prediction
from ..inference.prediction_shards import join_shards, shard_source
from ..inference.table_output import table_separator
from ..progressive_csv import WriterLock
from .distributed import end_with_launcher, local_device

#: Seconds a process that has finished its shard waits for the others (shards take about equally
#: long; a failed process stops the whole job through the launcher).
WAIT_S = 7 * 24 * 3600.0


def predict_in_processes(job: PredictionJob, wait_s: float = WAIT_S) -> Optional[PredictionSummary]:
    """This process's shard of ``job`` in a job started by torchrun (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``...); the main process (rank 0) then joins the parts and returns the whole
    run's summary, the others ``None``. The processes meet over a ``gloo`` group.

    Example (in a script started with ``torchrun --nproc-per-node 2 script.py``)::

        done = predict_in_processes(PredictionJob(["runs/y/best.pt"], input="screen.smi", output="screen.csv"))
        if done is not None:
            print(done.describe())
    """
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    end_with_launcher()
    device = local_device(job.predictor.get("device", "auto"), int(os.environ.get("LOCAL_RANK", "0")),
                          int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    part = dataclasses.replace(job, shard=(rank, world), predictor={**job.predictor, "device": str(device)},
                               progress=job.progress and rank == 0)
    if rank != 0:  # the main process says what every process would (the rows keep their own errors and warnings)
        logging.getLogger("dgl_graphtx").setLevel(logging.ERROR)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=wait_s))
    held: Optional[WriterLock] = None
    try:
        # the main process holds the output's writer's lock from the start: another run into it is
        # refused at once, not at the join after every row was predicted
        held = WriterLock(job.output) if rank == 0 and job.output is not None else None
        summary = run_prediction(part)
        # each process's counts in tensors that live until the group is left: gloo's threads must
        # not drop the last reference to a tensor Python made (all_gather_object's do), which on
        # torch 2.2 needs the interpreter's lock that destroy_process_group holds while it waits for
        # those threads, so the process never ended
        mine = torch.tensor([summary.rows, summary.invalid, summary.outside_domain, summary.resumed_after])
        found = [torch.zeros_like(mine) for _ in range(world)]
        try:
            dist.all_gather(found, mine)
        except RuntimeError:  # gloo: a peer went away (stopped, interrupted) before finishing its shard
            raise PeerFailedError(f"another process of the job stopped before finishing its shard; this one's rows are kept "
                                  f"in {summary.output}: rerun the command with --resume to finish") from None
        if rank != 0:
            return None
        counts = [counts_of.tolist() for counts_of in found]
        assert job.output is not None, "every process writes its part of an --output"
        whole = dataclasses.replace(job, shard=None).source(resolve_checkpoints(job.checkpoints))
        output = join_shards(job.output, [shard_source(whole, index, world) for index in range(world)],
                             [c[0] for c in counts], table_separator(job.output))
        rows, invalid, outside, resumed = (sum(column) for column in zip(*counts))
        hint_if_nothing_read(job, rows - resumed, invalid)
        return PredictionSummary(rows, invalid, outside, summary.models, resumed, Path(output))
    finally:
        if held is not None:
            held.release()
        dist.destroy_process_group()
