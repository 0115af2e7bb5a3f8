"""``--calibration-bins similarity`` through the library against the offline Mondrian figures.

``calibration_transfer.py`` measured Mondrian intervals by similarity to the training part offline,
from each run's per-molecule predictions (``benchmarks/calibration_transfer/molecules/``). This
script trains the same runs (the default model, 30 epochs, an MVE head, 90% intervals, scaffold
splits, the same seeds) with ``UncertaintyConfig(calibration_bins="similarity")`` and prints, per
similarity third of the test molecules, the library's coverage and width (``metrics.json``'s
``test_by_similarity_bin``) next to the offline Mondrian and plain intervals of the stored run.
Models trained on the same CPU with one thread are the same, so the two should agree to rounding.

Run:  OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python benchmarks/calibration_bins.py --set FreeSolv --seeds 0 1 2
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration_transfer as T  # noqa: E402

from dgl_graphtx.models import get_preset  # noqa: E402
from dgl_graphtx.runs import train_and_evaluate  # noqa: E402
from dgl_graphtx.training import TrainConfig  # noqa: E402
from dgl_graphtx.uncertainty import UncertaintyConfig  # noqa: E402


def covered(test: pd.DataFrame) -> np.ndarray:
    return ((test.y >= test.lo) & (test.y <= test.hi)).to_numpy()


def compare(name: str, seed: int, epochs: int) -> List[str]:
    """One scaffold-split run with the option; its per-third rows next to the offline ones."""
    preset = get_preset("gradformer")
    config = TrainConfig.from_recipe(preset.train, epochs=epochs, seed=seed, progress=False, device="cpu")
    out = Path(tempfile.mkdtemp()) / "run"
    train_and_evaluate(T.dataset_of(name, preset), preset, config, split="scaffold", out_dir=out,
                       uncertainty=UncertaintyConfig("mve", coverage=T.COVERAGE, calibration_bins="similarity"))
    library = json.loads((out / "metrics.json").read_text())["uncertainty"]["test_by_similarity_bin"]["target"]
    molecules = pd.read_csv(T.OUT / "molecules" / f"splits_{name}_scaffold_{seed}_train.csv.gz")
    plain, mondrian = T.mondrian_intervals(molecules, bins=1), T.mondrian_intervals(molecules)
    calibration = molecules[molecules.part == "calibration"]
    third = np.digitize(plain.similarity, np.quantile(calibration.similarity, [1 / 3, 2 / 3]))
    rows = []
    for row in library:
        inside = third == row["bin"]
        rows.append(f"| {name} | {seed} | {row['bin'] + 1} | {row['molecules']} | {row['coverage']:.3f} | {row['width']:.3f} | "
                    f"{covered(mondrian)[inside].mean():.3f} | {(mondrian.hi - mondrian.lo)[inside].mean():.3f} | "
                    f"{covered(plain)[inside].mean():.3f} | {(plain.hi - plain.lo)[inside].mean():.3f} |")
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=T.SETS, default="FreeSolv")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args(argv)
    print("| set | seed | similarity third | test molecules | library coverage | width | offline Mondrian coverage | width "
          "| offline plain coverage | width |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        print("\n".join(compare(args.set, seed, args.epochs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
