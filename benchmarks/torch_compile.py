"""Does ``torch.compile`` speed up a training step on the CPU? Eager vs compiled, tensor compute path.

The default Gradformer trains on consecutive FreeSolv batches (``--batches`` x ``--batch-size``
molecules, collated into GraphTensors as the loader workers do; every batch has its own atom and
edge counts, as in real training). For eager and for ``torch.compile(model, dynamic=True)``: the
first pass over the batches (compilation included) and then the median step over ``--passes``
further passes. Prints the numbers; nothing is asserted.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/torch_compile.py [--batches 10] [--passes 3]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dgl_graphtx  # noqa: E402,F401  (before dgl)
from _molecules import freesolv_smiles  # noqa: E402
from _report import environment, print_environment  # noqa: E402
from _timing import median, time_repeats  # noqa: E402
from compute_paths import training_step  # noqa: E402

from dgl_graphtx.datasets import MoleculeBatch, MoleculeDataset, collate_molecule_tensors  # noqa: E402
from dgl_graphtx.models import Preset, build_model, get_preset  # noqa: E402


def training_steps(compiled: bool, preset: Preset, batches: List[MoleculeBatch]) -> List[Callable[[], None]]:
    """One AdamW training step per batch of a fresh model (seed 0), eager or through ``torch.compile``."""
    torch.manual_seed(0)
    model = build_model(preset.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward = torch.compile(model, dynamic=True) if compiled else model
    return [training_step(forward, batch, optimizer, sync=lambda: None) for batch in batches]


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the batches after the first")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print_environment(environment(), "torch.compile")
    smiles, targets = freesolv_smiles()
    count = args.batches * args.batch_size
    preset = get_preset("gradformer", "default")
    data = MoleculeDataset(smiles[:count], torch.tensor(targets[:count])[:, None], featurizer=preset.featurizer,
                           relation=preset.relation, progress=False)
    batches = [collate_molecule_tensors([data[i] for i in range(k, min(k + args.batch_size, len(data)))])
               for k in range(0, len(data), args.batch_size)]
    for compiled in (False, True):
        steps = training_steps(compiled, preset, batches)
        first = sum(t for step in steps for t in time_repeats(step, repeats=1, warmup=0))
        times = [t for _ in range(args.passes) for step in steps for t in time_repeats(step, repeats=1, warmup=0)]
        print(f"{'compiled' if compiled else 'eager':8s}: first pass over {len(batches)} batches {first:7.1f} s; "
              f"then median step {1000 * median(times):6.1f} ms ({args.batch_size / median(times):,.0f} graphs/s)", flush=True)


if __name__ == "__main__":
    main()
