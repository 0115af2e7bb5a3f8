"""ATen operations and host syncs of one warm training step of every preset, on the CPU.

A training step on a GPU costs what the host spends dispatching operations (docs/scaling.md,
"Operations per step"); an operation that reads a value back (``.item()``, ``nonzero``, boolean
masks) makes the host wait for the device. This script counts both for one step of each preset
(the second step on MolHIV-sized molecules: the first builds the optimizer's state), split into
forward + loss, backward and optimizer, with :class:`dgl_graphtx.testing.OperationCounter`, in
two settings:

* ``foreach``: the step as ``/work/shared/tools/step_ops.py`` counts it for the goals of issue 43
  (``torch.optim.AdamW(foreach=True)``, whose per-parameter step counters add two operations per
  parameter; syncs counted without the optimizer's);
* ``trainer``: the trainer's own step (:class:`~dgl_graphtx.training.train_step.TrainStep`: fused
  AdamW, gradient norm, finiteness decided on the device).

Counts, not times: run it anywhere. Run:

    OMP_NUM_THREADS=1 python -m benchmarks.checks.step_ops [--smiles FILE] [--batch-size 32] [--presets gradformer/molhiv ...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Sequence

import torch

import dgl_graphtx  # noqa: E402,F401  (before dgl)
from benchmarks.common import molecules as M  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset, collate_molecule_tensors  # noqa: E402
from dgl_graphtx.models import build_model, get_preset  # noqa: E402
from dgl_graphtx.models.presets import PRESETS  # noqa: E402
from dgl_graphtx.testing import OperationCounter  # noqa: E402
from dgl_graphtx.training.adamw import adamw  # noqa: E402
from dgl_graphtx.training.train_step import TrainStep  # noqa: E402
from dgl_graphtx.training.trainer import masked_loss  # noqa: E402

DEFAULT_PRESETS = ["gradformer/molhiv", "gradformer/default", "grpe/tiny", "moire/2d"]


def molhiv_sized(args: argparse.Namespace) -> List[str]:
    """``2 * batch`` molecules of 20-30 heavy atoms: ``--smiles``, else MOSES, else ZINC-like ones."""
    if args.smiles:
        return [line.split(",")[0].strip() for line in Path(args.smiles).read_text().splitlines() if line.strip()][: 2 * args.batch_size]
    try:
        pool = M.moses_smiles(Path(args.moses_dir), 20 * args.batch_size, seed=0)
    except Exception as err:  # no wheel and no network: molecules joined from FreeSolv
        print(f"no MOSES molecules ({err}); ZINC-like molecules joined from FreeSolv", file=sys.stderr)
        return M.zinc_like_smiles(2 * args.batch_size, min_atoms=20, max_atoms=30)
    return [s for s in pool if 20 <= M.heavy_atoms(s) <= 30][: 2 * args.batch_size]


def count(variant: str, name: str, smiles: Sequence[str], batch_size: int) -> Dict[str, Dict[str, int]]:
    preset = get_preset(variant, name)
    labels = torch.randn(len(smiles), preset.model.num_tasks)
    if preset.model.task != "regression":
        labels = (labels > 0).float()
    data = MoleculeDataset(list(smiles), labels, featurizer=preset.featurizer, relation=preset.relation, progress=False)
    first, second = (collate_molecule_tensors(data.__getitems__(list(range(i * batch_size, (i + 1) * batch_size)))) for i in (0, 1))
    out = {}
    for setting in ("foreach", "trainer"):
        torch.manual_seed(0)
        model = build_model(preset.model).train()

        def loss(output, batch, rows=None):
            return masked_loss(preset.model.task, output[:, : batch.labels.shape[1]], batch.labels, batch.mask)

        if setting == "trainer":
            optimizer = adamw([{"params": list(model.parameters())}], 1e-4, 0.0, "cpu")
            step = TrainStep(model, loss, list(model.parameters()), optimizer)
            step(first)
            with OperationCounter() as counter:
                step(second)
            out[setting] = {"ops": counter.operations, "syncs": sum(counter.syncs.values())}
            continue
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        phases: Dict[str, int] = {}
        syncs = 0
        for i, batch in enumerate((first, second)):
            with OperationCounter() as forward:
                value = loss(model(batch.graph, batch.relation_graph), batch)
            with OperationCounter() as backward:
                optimizer.zero_grad(set_to_none=True)
                value.backward()
            with OperationCounter() as update:
                optimizer.step()
            if i:
                phases = {"forward": forward.operations, "backward": backward.operations, "optimizer": update.operations}
                syncs = sum(forward.syncs.values()) + sum(backward.syncs.values())
        out[setting] = {"ops": sum(phases.values()), "syncs": syncs, **phases}
    return out


def main(argv: Sequence[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=DEFAULT_PRESETS, help="variant/preset (all: every preset)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--smiles", help="SMILES file (first column) of MolHIV-sized molecules")
    parser.add_argument("--moses-dir", default=str(Path(__file__).resolve().parents[2] / ".cache" / "moses"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    presets = [f"{v}/{n}" for v in sorted(PRESETS) for n in sorted(PRESETS[v])] if args.presets == ["all"] else args.presets
    smiles = molhiv_sized(args)
    print(f"batch of {args.batch_size} MolHIV-sized molecules (20-30 heavy atoms), torch {torch.__version__}, CPU")
    print(f"{'preset':22s} {'ops':>6s} {'syncs':>6s} {'forward':>8s} {'backward':>9s} {'optimizer':>10s}   "
          f"{'trainer ops':>11s} {'syncs':>6s}")
    for preset in presets:
        variant, name = preset.split("/")
        c = count(variant, name, smiles, args.batch_size)
        f, t = c["foreach"], c["trainer"]
        print(f"{preset:22s} {f['ops']:6d} {f['syncs']:6d} {f['forward']:8d} {f['backward']:9d} {f['optimizer']:10d}   "
              f"{t['ops']:11d} {t['syncs']:6d}", flush=True)


if __name__ == "__main__":
    main()
