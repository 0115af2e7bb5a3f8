"""CPU training throughput on the oldest and the newest tested torch: the same job, interleaved.

Each job is one process of a given interpreter (``--old`` and ``--new``: the ``python`` of a virtual
environment with the package installed, e.g. ``.venv-oldest/bin/python`` and ``.venv/bin/python``,
as ``make test-oldest`` / ``make test`` create them). It featurizes the embedded FreeSolv set
(642 molecules, not timed), trains each model of ``--models`` (its preset, default recipe,
batch 64) for ``--epochs`` epochs with one intra-op thread and reports the median epoch time after
the first (warm-up), graphs/s and CPU ms per graph. Jobs alternate old, new, new, old, ... for
``--repeats`` rounds, so that load from other processes hits both ends alike; the ratio new/old
is taken round by round and its median reported.

Run:  .venv/bin/python benchmarks/torch_versions.py --old .venv-oldest/bin/python --new .venv/bin/python
      (add --quick for a ~1 minute smoke run that does not update the docs)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(__file__).resolve().parents[1]
COLUMNS = [
    ("model", "model"), ("old_graphs_s", "graphs/s, oldest torch"), ("new_graphs_s", "graphs/s, newest torch"),
    ("ratio", "newest / oldest (median of rounds)"), ("old_cpu_ms", "CPU ms/graph, oldest"), ("new_cpu_ms", "CPU ms/graph, newest"),
]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(args: argparse.Namespace) -> int:
    """One job: train every model on FreeSolv in this interpreter, write the timings as JSON."""
    import logging

    import torch

    import dgl_graphtx
    from dgl_graphtx.datasets import freesolv
    from dgl_graphtx.models import build_model, get_preset
    from dgl_graphtx.training import TrainConfig, Trainer, seed_everything

    torch.set_num_threads(1)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    results: Dict[str, Dict[str, object]] = {}
    for spec in args.models.split(","):
        name, _, preset_name = spec.partition(":")
        preset = get_preset(name, preset_name or None)
        dataset = freesolv(as_dataset=True, featurizer=preset.featurizer, relation=preset.relation)
        seed_everything(0)
        config = TrainConfig(epochs=args.epochs, batch_size=64, progress=False, device="cpu")
        trainer = Trainer(build_model(preset.model), config)
        cpu0 = _cpu_s()
        history = trainer.fit(dataset).history
        seconds = [float(s) for s in history["seconds"]]
        results[spec] = {"seconds": seconds, "molecules": len(dataset), "cpu_s": _cpu_s() - cpu0}
    versions = {"torch": torch.__version__, "dgl_graphtx": dgl_graphtx.__version__, "python": sys.version.split()[0]}
    Path(args.result).write_text(json.dumps({"versions": versions, "models": results}))
    return 0


def run_job(python: str, args: argparse.Namespace, result: Path) -> Dict[str, object]:
    command = [python, str(Path(__file__).resolve()), "--worker", "--result", str(result), "--models", args.models, "--epochs", str(args.epochs)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    subprocess.run(command, check=True, env=env, timeout=args.timeout, stdout=subprocess.DEVNULL)
    return json.loads(result.read_text())


def summarise(job: Dict[str, object], spec: str) -> Dict[str, float]:
    data = job["models"][spec]
    epoch_s = statistics.median(data["seconds"][1:] or data["seconds"])
    epochs = len(data["seconds"])
    return {"graphs_s": data["molecules"] / epoch_s, "cpu_ms": 1000 * data["cpu_s"] / (data["molecules"] * epochs)}


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--old", default=str(REPO / ".venv-oldest" / "bin" / "python"), help="python of the oldest set")
    parser.add_argument("--new", default=str(REPO / ".venv" / "bin" / "python"), help="python of the newest set")
    parser.add_argument("--models", default="grpe:tiny,gradformer,moire", help="model[:preset] list (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per model and job; the first is warm-up (default: 4)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of (old, new) jobs (default: 3)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per job before giving up")
    parser.add_argument("--quick", action="store_true", help="one model, 2 epochs, 1 round; does not update the docs")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.epochs, args.repeats, args.no_docs = args.models.split(",")[0], 2, 1, True
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    import _report as R

    env = R.environment()
    R.print_environment(env, "torch_versions environment")
    jobs: Dict[str, List[Dict[str, object]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="torch_versions-") as tmp:
        for rnd in range(args.repeats):
            for end in ("old", "new") if rnd % 2 == 0 else ("new", "old"):
                job = run_job(getattr(args, end), args, Path(tmp) / f"{end}{rnd}.json")
                jobs[end].append(job)
                print(f"  round {rnd + 1}, {end}: torch {job['versions']['torch']}", flush=True)
    rows = []
    for spec in args.models.split(","):
        per_end = {end: [summarise(job, spec) for job in jobs[end]] for end in jobs}
        ratios = [n["graphs_s"] / o["graphs_s"] for o, n in zip(per_end["old"], per_end["new"])]
        rows.append({
            "model": spec,
            **{f"{end}_graphs_s": round(statistics.median(r["graphs_s"] for r in per_end[end]), 1) for end in jobs},
            "ratio": round(statistics.median(ratios), 2),
            **{f"{end}_cpu_ms": round(statistics.median(r["cpu_ms"] for r in per_end[end]), 2) for end in jobs},
        })
    print(R.format_table(rows, COLUMNS))
    print(R.load_note())
    old_v, new_v = jobs["old"][0]["versions"], jobs["new"][0]["versions"]
    if not args.no_docs:
        R.update_section("torch_versions", "\n".join([
            "## CPU training throughput: oldest vs newest tested torch",
            "",
            f"`benchmarks/torch_versions.py`: FreeSolv (642 molecules), batch 64, 1 intra-op thread, median epoch after "
            f"a warm-up epoch, {args.epochs} epochs per job, {args.repeats} interleaved rounds; torch {old_v['torch']} "
            f"(Python {old_v['python']}) vs {new_v['torch']} (Python {new_v['python']}). {R.environment_line(env)} {R.load_note()}.",
            "",
            R.markdown_table(rows, COLUMNS),
        ]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
