"""Screening-scale prediction: molecules/s and peak memory of a large SMILES file, streamed
through the ``Predictor`` API, per preset and device (``predict_memory`` measures the command
line's memory on FreeSolv).

A checkpoint of each preset (random weights: the speed does not depend on them) predicts
``--molecules`` MOSES SMILES read lazily from a file (``--smiles``, else the first ones of the
molsets wheel's training set written to ``.cache``), through :meth:`Predictor.predict_chunks`:
each chunk is featurized, predicted and appended to a CSV before the next is read, so memory
stays flat whatever the file's length. Reported per preset: molecules/s (featurization included),
the peak resident memory of the process (``ru_maxrss``) and the resident memory after the first
and after the last chunk (flat memory: about the same).

Run:  OMP_NUM_THREADS=1 python -m benchmarks.checks.predict_stream [--molecules 100000] [--device cuda]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.common import molecules as M  # noqa: E402

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint  # noqa: E402
from dgl_graphtx.inference import Predictor  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402

CACHE = Path(__file__).resolve().parents[2] / ".cache"


def resident_mb() -> float:
    """The process's resident memory now (Linux ``/proc/self/statm``), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def smiles_file(args: argparse.Namespace) -> Path:
    if args.smiles:
        return Path(args.smiles)
    path = CACHE / f"moses_first_{args.molecules}.smi"
    if not path.exists():
        smiles = M.moses_smiles(CACHE / "moses")[: args.molecules]
        path.write_text("\n".join(smiles) + "\n")
    return path


def lines(path: Path, count: int) -> Iterator[str]:
    """The first column of the first ``count`` lines, read one at a time."""
    with path.open() as handle:
        for number, line in enumerate(handle):
            if number >= count:
                return
            yield line.split(",")[0].strip()


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecules", type=int, default=100_000)
    parser.add_argument("--presets", nargs="+", default=["gradformer/default", "grpe/tiny"])
    parser.add_argument("--smiles", help="SMILES file (first column); default: MOSES written to .cache")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--chunk-size", type=int, default=10_000)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    path = smiles_file(args)
    print(f"{args.molecules} molecules from {path}, device {args.device}, batch {args.batch_size}, chunk {args.chunk_size}")
    print(f"{'preset':22s} {'molecules/s':>12s} {'peak RSS MB':>12s} {'RSS first chunk':>16s} {'RSS last chunk':>15s}")
    with tempfile.TemporaryDirectory() as tmp:
        for preset_name in args.presets:
            variant, name = preset_name.split("/")
            preset = get_preset(variant, name)
            torch.manual_seed(0)
            checkpoint = save_checkpoint(Path(tmp) / f"{variant}-{name}.pt", build_model(preset.model),
                                         CheckpointMeta(preset.featurizer, preset.relation, ["y"] * preset.model.num_tasks))
            predictor = Predictor(checkpoint, device=args.device, batch_size=args.batch_size, chunk_size=args.chunk_size)
            out = Path(tmp) / "predictions.csv"
            done, rss = 0, []
            start = time.perf_counter()
            for number, table in enumerate(predictor.predict_chunks(lines(path, args.molecules))):
                table.to_csv(out, mode="a" if number else "w", header=not number, index=False)
                done += len(table)
                rss.append(resident_mb())
            seconds = time.perf_counter() - start
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{preset_name:22s} {done / seconds:12.1f} {peak:12.0f} {rss[0]:16.0f} {rss[-1]:15.0f}", flush=True)


if __name__ == "__main__":
    main()
