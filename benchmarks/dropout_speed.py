"""Dropout kernel time on the CPU, for comparing torch versions (run it with each interpreter).

Times ``F.dropout(x, 0.1, training=True)`` and a hand-written ``rand_like`` mask on tensors the size
of a FreeSolv batch's node features (600 x 64) and relation edges x heads (6000 x 8), one thread,
median of ``--repeats`` blocks of 200 calls. Explains the oldest-vs-newest torch gap in
docs/benchmarks.md (``benchmarks/torch_versions.py``).

Run:  .venv-oldest/bin/python benchmarks/dropout_speed.py; .venv/bin/python benchmarks/dropout_speed.py
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, List

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import median, time_repeats  # noqa: E402

CALLS_PER_BLOCK = 200


def microseconds_per_call(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, repeats: int) -> float:
    """Median over ``repeats`` blocks of 200 calls, after one warm-up block."""
    def block() -> None:
        for _ in range(CALLS_PER_BLOCK):
            fn(x)

    return 1e6 * median(time_repeats(block, repeats, warmup=1)) / CALLS_PER_BLOCK


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--p", type=float, default=0.1, help="dropout probability")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    kernels = {"F.dropout": lambda t: F.dropout(t, args.p, True),
               "rand_like mask": lambda t: t * (torch.rand_like(t) >= args.p) / (1 - args.p)}
    for shape in ((600, 64), (6000, 8)):
        x = torch.randn(*shape)
        for name, fn in kernels.items():
            print(f"torch {torch.__version__:14s} {shape[0]:>5d} x {shape[1]:<3d} {name:15s} "
                  f"{microseconds_per_call(fn, x, args.repeats):7.1f} us/call", flush=True)


if __name__ == "__main__":
    main()
