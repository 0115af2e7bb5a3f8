"""A small training job for the distributed and resume tests: 97 FreeSolv molecules (78 train, 10 valid, 9 test), a 1-layer
vanilla model without dropout, random split, 4 epochs; optionally one process fails or is killed
at the start of an epoch. Runs in one process, or in several under torchrun:

    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/distributed_job.py OUT \\
        [--fail-rank R --fail-epoch E [--kill]] [--resume]
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Optional, Sequence

from torch.utils.data.distributed import DistributedSampler

from conftest_models import freesolv_rows, tiny_preset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.runs import ExperimentResult, train_and_evaluate
from dgl_graphtx.runs.distributed import DistributedConfig, end_process, launched_by_torchrun, process_hooks
from dgl_graphtx.training import ProcessHooks, TrainConfig

EPOCHS = 4
GLOBAL_BATCH = 16


class FailingSampler(DistributedSampler):
    """The trainer's sampler, except that epoch ``fail_epoch`` never starts: the process raises,
    or with ``kill`` is killed by SIGKILL (no clean-up at all)."""

    def __init__(self, *args, fail_epoch: int, kill: bool, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fail_epoch, self.kill = fail_epoch, kill

    def set_epoch(self, epoch: int) -> None:
        if epoch == self.fail_epoch:
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure in rank {self.rank} at the start of epoch {epoch}")
        super().set_epoch(epoch)


def inject_failure(hooks: ProcessHooks, fail_rank: int, fail_epoch: int, kill: bool) -> None:
    """Make process ``fail_rank`` fail at ``fail_epoch`` through the hooks' injected sampler."""
    if hooks.rank == fail_rank:
        hooks.train_sampler = lambda dataset, seed: FailingSampler(
            dataset, num_replicas=hooks.world_size, rank=hooks.rank, shuffle=True, seed=seed, fail_epoch=fail_epoch, kill=kill)


def run_job(out: Path, hooks: ProcessHooks, resume: bool = False) -> ExperimentResult:
    """Train and evaluate the job's model; every output goes to ``out``."""
    preset = tiny_preset("vanilla", "tiny", num_layers=1)
    with hooks.main_first():
        dataset = MoleculeDataset.from_dataframe(freesolv_rows(0, 97), target_cols=["expt"], featurizer=preset.featurizer,
                                                 relation=preset.relation, cache_dir=out / "cache", progress=False)
    config = TrainConfig(epochs=EPOCHS, batch_size=GLOBAL_BATCH, lr=3e-3, warmup_epochs=1, progress=False, device="cpu")
    return train_and_evaluate(dataset, preset, config, split="random", out_dir=out, hooks=hooks, resume=resume)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-epoch", type=int, default=0)
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    with process_hooks("cpu", DistributedConfig(timeout_s=60)) as hooks:
        inject_failure(hooks, args.fail_rank, args.fail_epoch, args.kill)
        run_job(args.out, hooks, resume=args.resume)
    return 0


if __name__ == "__main__":
    # a process of a torchrun job ends as the library's commands end theirs: without the
    # interpreter's shutdown, where a thread of the process group can abort it after its work
    code = main()
    if launched_by_torchrun():
        end_process(code)
    sys.exit(code)
