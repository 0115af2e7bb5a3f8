"""The pretraining screen of issue 28: which objective (RDKit descriptors, masked atoms, both) and
which backbone size to pretrain, chosen by fine-tuning each candidate on the suite's development
half only (``benchmarks/suite.py``, tools ``screen-<name>``).

Every candidate is pretrained the same way at a reduced scale, so that all of them fit a few
CPU-hours: the first ``--molecules`` (default 50,000) of the MOSES training SMILES after
``random.Random(0).shuffle`` (the draw whose first 500,000 made ``gradformer-moses500k``), one
featurized store shared by all, ``--epochs`` epochs each (the first half warming the learning rate
up, the second half decaying it, as the 500k run did), seed 0. Candidates (``SCREEN_CANDIDATES`` of
``benchmarks/_suite/config.py``):

- ``descriptors``: 189 RDKit 2-D descriptors, 15% of the targets masked out of each step's loss
  (the shipped backbones' objective);
- ``atoms``: the elements of 15% masked atoms (Hu et al. 2020), descriptors only as a probe;
- ``both``: the two losses summed;
- ``descriptors-wide``: the descriptor objective with hidden size 96 instead of 64 (2.2x the parameters).

Backbones go to ``.cache/suite/pretrain_screen/<name>`` (ignored; the suite's ``screen-<name>``
tools fine-tune them with the chosen recipe, ``--freeze-backbone-epochs 5``). Every step resumes:
finished backbones are skipped, an interrupted one continues from its ``last.pt``. The descriptors
are computed once and copied to every run; ``--descriptors-from`` reuses those of a larger run over
the same shuffled SMILES (its ``descriptors.npz`` and store), after checking that its molecules
begin with these.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pretrain_screen.py
      .venv/bin/python benchmarks/suite.py --half dev --tools screen-descriptors screen-atoms screen-both \\
          screen-descriptors-wide --seeds 0 1 --commit
"""
from __future__ import annotations

import argparse
import gzip
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

from dgl_graphtx.checksums import file_sha256
from dgl_graphtx.datasets import load_store
from dgl_graphtx.datasets.sharded_store import MANIFEST
from dgl_graphtx.runs.pretraining import DESCRIPTOR_CACHE, moses_corpus, save_descriptor_cache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _suite.config import REPO, SCREEN_BACKBONES, SCREEN_CANDIDATES  # noqa: E402

WORK = SCREEN_BACKBONES.parent / "pretrain_screen_data"


def _cli(*args: str) -> None:
    command = [str(Path(sys.executable).with_name("dgl-graphtx")), *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def shuffled_moses(count: int, moses_dir: Path) -> Path:
    """The first ``count`` MOSES training SMILES after ``random.Random(0).shuffle``, one per line."""
    target = WORK / f"moses{count}.smi"
    if target.is_file():
        return target
    with gzip.open(moses_corpus(moses_dir, moses_dir), "rt") as table:
        smiles = table.read().splitlines()[1:]  # one column, SMILES
    random.Random(0).shuffle(smiles)
    WORK.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(smiles[:count]) + "\n")
    return target


def seed_descriptors(store: Path, larger_run: Path, larger_store: Path, out: Path) -> None:
    """Write ``out/descriptors.npz`` for ``store`` from the cache of a larger pretraining run whose
    store holds the same molecules first (checked), keyed as the pretraining reads it."""
    mine, theirs = list(load_store(store).identifiers), list(load_store(larger_store).identifiers)
    if theirs[: len(mine)] != mine:
        raise SystemExit(f"{larger_store} does not begin with the molecules of {store}: compute the descriptors instead")
    with np.load(larger_run / DESCRIPTOR_CACHE, allow_pickle=False) as stored:
        values, names, seconds = stored["values"][: len(mine)], list(stored["names"]), float(stored["seconds"])
    out.mkdir(parents=True, exist_ok=True)
    save_descriptor_cache(out, values, names, file_sha256(store / MANIFEST), seconds * len(mine) / len(theirs))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--only", nargs="+", choices=list(SCREEN_CANDIDATES), help="pretrain these candidates only")
    parser.add_argument("--moses-dir", type=Path, default=REPO / ".cache" / "moses", help="folder with the molsets wheel")
    parser.add_argument("--descriptors-from", nargs=2, type=Path, metavar=("RUN", "STORE"),
                        help="a larger pretraining run's folder and store to take the descriptors from")
    args = parser.parse_args(argv)
    corpus = shuffled_moses(args.molecules, args.moses_dir)
    store = WORK / f"store{args.molecules}"
    if not (store / "manifest.json").is_file():
        _cli("featurize", str(corpus), "--out", str(store), "--shard-size", "5000", "--no-progress")
    shared = WORK / "descriptors"
    if args.descriptors_from and not (shared / DESCRIPTOR_CACHE).is_file():
        seed_descriptors(store, *args.descriptors_from, shared)
    for name in args.only or SCREEN_CANDIDATES:
        out = SCREEN_BACKBONES / name
        if (out / "card.json").is_file():
            print(f"{name}: done ({out})")
            continue
        out.mkdir(parents=True, exist_ok=True)
        if (shared / DESCRIPTOR_CACHE).is_file() and not (out / DESCRIPTOR_CACHE).is_file():
            shutil.copyfile(shared / DESCRIPTOR_CACHE, out / DESCRIPTOR_CACHE)
        _cli("pretrain", str(store), "--out", str(out), "--name", f"screen-{name}", "--epochs", str(args.epochs),
             "--seed", "0", "--corpus-name", "MOSES", "--no-progress", "--resume", *SCREEN_CANDIDATES[name],
             "--set", f"train.warmup_epochs={args.epochs // 2}")
        if not (shared / DESCRIPTOR_CACHE).is_file():
            shared.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(out / DESCRIPTOR_CACHE, shared / DESCRIPTOR_CACHE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
