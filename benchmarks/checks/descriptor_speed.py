"""Speed of the molecule-level feature generators: molecules/s with 1 and N worker processes.

Input: a random sample of ``--molecules`` MOSES training SMILES (ZINC-derived drug-like
molecules, MIT licence), read from the ``molsets`` wheel in ``--moses-dir`` (fetched once with
``pip download --no-deps molsets``; see ``benchmarks/common/molecules.py``). Each generator
(``rdkit2d``, ``morgan_counts``) is timed with :func:`dgl_graphtx.featurize.descriptors.compute_features`
over the same sample, wall clock, after one warm-up molecule. Prints a Markdown table.

Run:  .venv/bin/python -m benchmarks.checks.descriptor_speed [--molecules 2000] [--workers 1 2]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import List, Optional

from benchmarks.common import molecules as M  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

from dgl_graphtx.featurize.descriptors import compute_features  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=2000, help="MOSES molecules to describe (default: 2,000)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker process counts (default: 1 2)")
    parser.add_argument("--generators", nargs="+", default=["rdkit2d", "morgan_counts"])
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses", help="folder holding the molsets wheel")
    parser.add_argument("--chunk-size", type=int, default=250, help="molecules per task sent to a worker")
    args = parser.parse_args(argv)
    smiles = M.moses_smiles(args.moses_dir, args.molecules, seed=0)
    print(f"{len(smiles)} MOSES molecules (random sample, seed 0)\n")
    print("| generator | workers | seconds | molecules/s | speed-up |")
    print("|---|---:|---:|---:|---:|")
    for spec in args.generators:
        compute_features([spec], smiles[:1])
        base = None
        for workers in args.workers:
            start = time.perf_counter()
            compute_features([spec], smiles, workers=workers, chunk_size=args.chunk_size)
            seconds = time.perf_counter() - start
            rate = len(smiles) / seconds
            base = base or rate
            print(f"| {spec} | {workers} | {seconds:.2f} | {rate:,.0f} | {rate / base:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
