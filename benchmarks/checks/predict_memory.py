"""Prediction at scale: time and memory of ``dgl-graphtx predict`` streaming a large file.

Each row runs the command line (``predict --input in.csv --output out.csv``) in a process of its
own with a checkpoint of a preset (random weights: the cost does not depend on them), and reads
that process's peak resident memory (``getrusage``) and its resident memory after the first and
after the last chunk written (flat memory: about the same). Inputs: the embedded FreeSolv SMILES
repeated to each of ``--sizes``, or with ``--source moses`` the first MOSES training SMILES (the
molsets wheel). Streaming featurizes, predicts and writes ``--chunk-size`` molecules at a time, so
the peak should not grow with the input; ``--in-memory`` also runs the smallest size with the
chunk as large as the input, as ``predict`` did before streaming. The FreeSolv table rewrites its
section of docs/benchmarks.md.

Run:  python -m benchmarks.checks.predict_memory --in-memory                         (docs/benchmarks.md)
      OMP_NUM_THREADS=1 python -m benchmarks.checks.predict_memory --source moses --sizes 100000 \\
          --chunk-size 10000 --presets gradformer/default grpe/tiny --workers 1 2        (docs/scaling.md)
      ... --checkpoints runs/a/best.pt runs/b/best.pt   (trained models: their extra features are computed)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pandas as pd
import torch

from benchmarks.common import check
from benchmarks.common.measure import peak_mb, status_mb
from benchmarks.common.molecules import freesolv_smiles, moses_smiles, repeat_to
from benchmarks.common.report import REPO, environment_line

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
from dgl_graphtx.models import build_model, get_preset

COLUMNS = [("smiles", "SMILES"), ("preset", "preset"), ("mode", "mode"), ("chunk", "chunk size"), ("workers", "workers"),
           ("seconds", "seconds"),
           ("rate", "molecules/s"), ("peak_mib", "peak RSS (MiB)"), ("first_mib", "RSS after 1st chunk"),
           ("last_mib", "RSS after last chunk"), ("load", "load avg")]


def job(argv: Sequence[str]) -> None:
    """``dgl-graphtx predict ARGV`` in this process, the resident memory read after each chunk written."""
    from dgl_graphtx import progressive_csv
    from dgl_graphtx.cli import main

    after_chunks: List[float] = []
    append = progressive_csv.ProgressiveCSV.append

    def counted(self, frame: pd.DataFrame) -> None:
        append(self, frame)
        after_chunks.append(status_mb("VmRSS"))

    progressive_csv.ProgressiveCSV.append = counted
    code = main(list(argv))
    print(json.dumps({"code": code, "peak_mib": peak_mb(), "first_mib": after_chunks[0], "last_mib": after_chunks[-1]}))


def run_predict(checkpoint: Path, inputs: Path, output: Path, chunk: int, device: str, workers: int = 1) -> Dict[str, float]:
    """One ``predict`` process (featurizing in ``workers`` processes): its wall seconds and memory (of the main process)."""
    argv = ["predict", "--checkpoint", str(checkpoint), "--input", str(inputs), "--output", str(output), "--device", device,
            "--chunk-size", str(chunk), "--no-progress", *(["--workers", str(workers)] if workers > 1 else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchmarks.checks.predict_memory", "--job", *argv], capture_output=True, text=True,
                          env=env, check=True)
    return {"seconds": time.perf_counter() - start, **json.loads(done.stdout.strip().splitlines()[-1])}


def _models(args: argparse.Namespace, folder: Path) -> List[Tuple[str, Path]]:
    """``(name, checkpoint)`` of each model timed: the given checkpoints, named by their folders,
    else a checkpoint of each preset with random weights, written to ``folder``."""
    if args.checkpoints:
        return [(path.parent.name, path) for path in args.checkpoints]
    models = []
    for index, name in enumerate(args.presets):
        preset = get_preset(*name.split("/"))
        torch.manual_seed(0)
        models.append((name, save_checkpoint(folder / f"{index}.pt", build_model(preset.model),
                                             CheckpointMeta(preset.featurizer, preset.relation, ["y"] * preset.model.num_tasks))))
    return models


def main(argv: Sequence[str] = None) -> int:
    if argv is None and sys.argv[1:2] == ["--job"]:
        job(sys.argv[2:])
        return 0
    parser = check.parser(__doc__, threads=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="SMILES per input")
    parser.add_argument("--presets", nargs="+", default=["grpe/tiny"], help="variant/preset of the checkpoints")
    parser.add_argument("--source", choices=("freesolv", "moses"), default="freesolv")
    parser.add_argument("--chunk-size", type=int, default=4096, help="molecules per streamed chunk")
    parser.add_argument("--in-memory", action="store_true", help="also the smallest input in one chunk")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, nargs="+", default=[1], help="featurizing processes of predict (a row each)")
    parser.add_argument("--checkpoints", nargs="+", type=Path, default=[],
                        help="trained checkpoints to predict with instead of the presets' random weights (a default run's "
                             "best.pt: its descriptors and kernel counts are computed too); each row is named by its folder")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.chunk_size = [300, 900], 128
    env = check.start(args, "predict_memory")
    pool = freesolv_smiles()[0] if args.source == "freesolv" else moses_smiles(count=None)[: max(args.sizes)]
    rows: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        models = _models(args, Path(tmp))
        for name, checkpoint in models:
            for size in args.sizes:
                inputs, output = Path(tmp) / f"in{size}.csv", Path(tmp) / "out.csv"
                pd.DataFrame({"smiles": repeat_to(pool, size)}).to_csv(inputs, index=False)
                in_memory = [("all in memory", size, 1)] * (args.in_memory and size == min(args.sizes))
                for mode, chunk, workers in [*(("streaming", args.chunk_size, w) for w in args.workers), *in_memory]:
                    found = run_predict(checkpoint, inputs, output, chunk, args.device, workers)
                    if found["code"] != 0 or len(pd.read_csv(output)) != size:
                        raise SystemExit(f"predict of {size} SMILES failed or lost rows")
                    rows.append({"smiles": size, "preset": name, "mode": mode, "chunk": chunk, "workers": workers, **found,
                                 "rate": size / found["seconds"],
                                 "load": os.getloadavg()[0]})
                    print(rows[-1], flush=True)
    streaming = {r["smiles"]: r["peak_mib"] for r in rows if r["mode"] == "streaming" and r["preset"] == models[0][0]
                 and r["workers"] == args.workers[0]}
    summary = (f"Peak memory of streaming prediction, {max(streaming):,} vs {min(streaming):,} SMILES: "
               f"{streaming[max(streaming)] / streaming[min(streaming)]:.2f}x for {max(streaming) // min(streaming)}x the input.")
    print(summary)
    check.finish("predict_memory", args, env, rows, COLUMNS, [
        "#### Streaming prediction: time and peak memory", "",
        f"`python -m benchmarks.checks.predict_memory --in-memory`: `dgl-graphtx predict --input in.csv --output out.csv` with "
        f"{', '.join(args.presets)} (random weights), FreeSolv SMILES repeated to each size, one process per row (peak RSS of that "
        f"process, from `getrusage`). Streaming featurizes and writes {args.chunk_size} molecules at a time; 'all in memory' "
        f"(chunk = input) is what `predict` did before. {environment_line(env)} The CPU is shared: times are noisy, memory is not.",
        "", summary] if args.source == "freesolv" else [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
