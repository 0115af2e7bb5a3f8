"""CPU training graphs/s of this checkout against another (e.g. ``main``), same machine, same run.

Each measurement is a fresh process that imports ``dgl_graphtx`` from one of the two trees,
featurizes ``--molecules`` MolHIV-sized MOSES molecules (20-30 heavy atoms) for a preset, trains
one warm-up epoch through :class:`~dgl_graphtx.training.Trainer` (its defaults: DGL's kernels on
the CPU, the loader on the main thread) and then times ``--epochs`` epochs. Processes alternate
between the trees (``A B``, then ``B A``, ...) for ``--rounds`` rounds, one thread each
(``OMP_NUM_THREADS=1``), so load from other processes hits both alike; the table gives the median
graphs/s of each tree and their ratio.

Make the baseline checkout with ``git worktree add /work/wt-base main`` and run::

    OMP_NUM_THREADS=1 python -m benchmarks.checks.cpu_training_ab --baseline /work/wt-base [--smiles FILE]

Only public API present in both trees is used (``MoleculeDataset``, ``get_preset``,
``build_model``, ``Trainer``, ``TrainConfig.from_recipe``); the measuring processes run this file
as a script and import nothing from ``benchmarks``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]  # this checkout
PRESETS = ("gradformer/default", "grpe/tiny", "gradformer/molhiv", "moire/2d")


def worker(args: argparse.Namespace) -> None:
    """One measurement in this process: prints ``{"graphs_per_s": ...}``."""
    import torch

    from dgl_graphtx.datasets import MoleculeDataset
    from dgl_graphtx.models import build_model, get_preset
    from dgl_graphtx.training import TrainConfig, Trainer

    torch.set_num_threads(1)
    variant, name = args.preset.split("/")
    preset = get_preset(variant, name)
    smiles = [line.split(",")[0].strip() for line in Path(args.smiles).read_text().splitlines() if line.strip()][: args.molecules]
    labels = torch.randn(len(smiles), preset.model.num_tasks)
    if preset.model.task == "classification":
        labels = (labels > 0).float()
    data = MoleculeDataset(smiles, labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    torch.manual_seed(0)
    model = build_model(preset.model)

    def fit(epochs: int) -> Dict[str, float]:
        config = TrainConfig.from_recipe(preset.train, epochs=epochs, batch_size=args.batch_size, progress=False,
                                         warmup_epochs=0, device="cpu")
        wall, cpu = time.perf_counter(), time.process_time()
        Trainer(model, config).fit(data)
        graphs = epochs * len(data)
        return {"graphs_per_s": graphs / (time.perf_counter() - wall), "graphs_per_cpu_s": graphs / (time.process_time() - cpu)}

    fit(1)
    print(json.dumps(fit(args.epochs)))


def measure(tree: Path, preset: str, batch_size: int, args: argparse.Namespace) -> Dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree), OMP_NUM_THREADS="1")
    command = [sys.executable, str(HERE), "--worker", "--preset", preset, "--batch-size", str(batch_size),
               "--smiles", str(args.smiles), "--molecules", str(args.molecules), "--epochs", str(args.epochs)]
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree} {preset} batch {batch_size} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def moses_file(args: argparse.Namespace) -> Path:
    """``--smiles``, or MOSES molecules of 20-30 heavy atoms written to ``.cache`` from the molsets wheel."""
    if args.smiles:
        return Path(args.smiles)
    from benchmarks.common.molecules import heavy_atoms, moses_smiles  # the parent process only

    path = ROOT / ".cache" / f"moses_molhiv_sized_{args.molecules}.smi"
    if not path.exists():
        pool = moses_smiles(ROOT / ".cache" / "moses", 4 * args.molecules, seed=0)
        chosen = [s for s in pool if 20 <= heavy_atoms(s) <= 30][: args.molecules]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(chosen) + "\n")
    return path


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="the other checkout (e.g. of main)")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS[:2]), help=f"variant/preset, of {PRESETS}")
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[32, 128])
    parser.add_argument("--molecules", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smiles", help="SMILES file (first column); default: MOSES molecules of 20-30 heavy atoms")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--preset", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return
    if args.baseline is None:
        parser.error("--baseline PATH is required (a checkout of the code to compare with)")
    args.smiles = moses_file(args).resolve()
    trees = {"this": ROOT, "baseline": args.baseline.resolve()}
    print(f"{args.molecules} molecules from {args.smiles}, {args.epochs} timed epochs, {args.rounds} rounds, OMP_NUM_THREADS=1")
    print("graphs/s of wall time, and per second of the process's CPU time (what other processes on the machine do not change)")
    print(f"{'preset':22s} {'batch':>5s} {'baseline g/s':>12s} {'this g/s':>9s} {'ratio':>6s} "
          f"{'baseline g/cpu-s':>16s} {'this g/cpu-s':>12s} {'ratio':>6s}")
    for preset in args.presets:
        for batch_size in args.batch_sizes:
            runs: Dict[str, List[Dict[str, float]]] = {name: [] for name in trees}
            for round_index in range(args.rounds):
                for name in (list(trees) if round_index % 2 == 0 else list(reversed(trees))):
                    runs[name].append(measure(trees[name], preset, batch_size, args))
            cells = []
            for key in ("graphs_per_s", "graphs_per_cpu_s"):
                this = statistics.median(run[key] for run in runs["this"])
                base = statistics.median(run[key] for run in runs["baseline"])
                cells.append(f"{base:{16 if cells else 12}.1f} {this:{12 if cells else 9}.1f} {this / base:6.2f}")
            print(f"{preset:22s} {batch_size:5d} {' '.join(cells)}", flush=True)


if __name__ == "__main__":
    main()
