"""Streaming prediction: time and peak memory of ``dgl-graphtx predict`` on 10k and 100k SMILES.

Each size runs the real command line in its own process (``predict --input in.csv --output
out.csv``, GRPE-Tiny with untrained weights: the cost does not depend on the weights), and the
peak resident memory of that process is read from ``getrusage(RUSAGE_CHILDREN)``. With streaming
the peak should not grow with the input (chunks of ``--chunk-size`` molecules); the previous
all-in-memory behaviour is measured too (``--chunk-size`` = input size) on the smaller input.

The inputs are the embedded FreeSolv SMILES repeated to the wanted size. The CPU is shared with
other jobs: times are noisy (the load average is printed); memory is not.

Run:  .venv/bin/python -m benchmarks.checks.predict_memory [--sizes 10000 100000]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import pandas as pd

from benchmarks.common.report import default_csv, environment, environment_line, format_table, print_environment, publish  # noqa: E402

from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint  # noqa: E402
from dgl_graphtx.datasets import freesolv  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402

SCRIPT = Path(sys.executable).parent / "dgl-graphtx"


def run_predict(checkpoint: Path, inputs: Path, output: Path, chunk_size: int) -> Dict[str, float]:
    """One ``predict`` process: wall time and its peak RSS (MiB)."""
    code = (
        "import resource, sys\n"
        "from dgl_graphtx.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print('peak_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
        "sys.exit(code)\n"
    )
    argv = ["predict", "--checkpoint", str(checkpoint), "--input", str(inputs), "--output", str(output),
            "--device", "cpu", "--chunk-size", str(chunk_size), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OUTDATED_IGNORE": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
    seconds = time.perf_counter() - start
    peak = next(int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("peak_kib"))
    return {"seconds": seconds, "peak_mib": peak / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--chunk-size", type=int, default=4096)
    parser.add_argument("--csv", type=Path, default=default_csv("predict_memory", False))
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args()
    info = environment()
    print_environment(info, "predict_memory")
    smiles = freesolv()["smiles"].tolist()
    rows: List[Dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        preset = get_preset("grpe", "tiny")
        checkpoint = save_checkpoint(tmp / "m.pt", build_model(preset.model), CheckpointMeta(preset.featurizer, preset.relation, ["y"]))
        for size in args.sizes:
            inputs = tmp / f"in{size}.csv"
            pd.DataFrame({"smiles": (smiles * (size // len(smiles) + 1))[:size]}).to_csv(inputs, index=False)
            modes = [("streaming", args.chunk_size)] + ([("all in memory", size)] if size == min(args.sizes) else [])
            for mode, chunk in modes:
                result = run_predict(checkpoint, inputs, tmp / "out.csv", chunk)
                written = sum(1 for _ in open(tmp / "out.csv")) - 1
                assert written == size, (written, size)
                rows.append({"smiles": size, "mode": mode, "chunk": chunk, "seconds": result["seconds"],
                             "rate": size / result["seconds"], "peak_mib": result["peak_mib"],
                             "load": os.getloadavg()[0]})
                print(rows[-1], flush=True)
    columns = [("smiles", "SMILES"), ("mode", "mode"), ("chunk", "chunk size"), ("seconds", "seconds"),
               ("rate", "molecules/s"), ("peak_mib", "peak RSS (MiB)"), ("load", "load avg")]
    print(format_table(rows, columns))
    streaming = {r["smiles"]: r["peak_mib"] for r in rows if r["mode"] == "streaming"}
    ratio = streaming[max(streaming)] / streaming[min(streaming)]
    summary = (f"Peak memory of streaming prediction, {max(streaming):,} vs {min(streaming):,} SMILES: {ratio:.2f}x "
               f"for {max(streaming) // min(streaming)}x the input.")
    print(summary)
    intro = [
        "#### Streaming prediction: time and peak memory",
        "",
        f"`benchmarks/checks/predict_memory.py`: `dgl-graphtx predict --input in.csv --output out.csv` with GRPE-Tiny, FreeSolv SMILES "
        f"repeated to each size, one process per row (peak RSS of that process, from `getrusage`). Streaming featurizes and "
        f"writes {args.chunk_size} molecules at a time; 'all in memory' (chunk = input) is what `predict` did before. "
        f"{environment_line(info)} The CPU is shared: times are noisy, memory is not.",
        "",
        summary,
    ]
    publish("predict_memory", rows, columns, info, args.csv, intro, not args.no_docs)


if __name__ == "__main__":
    main()
