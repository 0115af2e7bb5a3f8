"""The figures of docs/insight.md, from real FreeSolv runs (train them first, e.g.):

    dgl-graphtx train dgl_graphtx/datasets/data/freesolv.csv --targets expt --model grpe --atom-features canonical \
        --epochs 100 --batch-size 32 --patience 40 --out runs/fs-grpe
    dgl-graphtx train ... --model moire --preset 2d ... --out runs/fs-moire
    python benchmarks/freesolv.py --ensemble 3 --runs gradformer      # gradformer members under benchmarks/results
    python benchmarks/insight_figures.py --grpe runs/fs-grpe --moire runs/fs-moire \
        --gradformer benchmarks/results/freesolv/gradformer-ensemble3/seed0/replicate_0/member_0

Writes docs/img/insight_*.png and prints the five worst test molecules of the GRPE run as a
Markdown table (for docs/insight.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from dgl_graphtx.insight import (
    attention_maps,
    error_table,
    plot_attention_heatmap,
    plot_attention_on_molecule,
    plot_focus_functions,
    plot_parity_residuals,
    plot_start_points,
)
from dgl_graphtx.inference import Predictor

IMG = Path(__file__).resolve().parents[1] / "docs" / "img"
#: A FreeSolv molecule (acetylsalicylic acid): small enough to read, with a ring, an ester and an acid.
MOLECULE = "CC(=O)Oc1ccccc1C(=O)O"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grpe", type=Path, required=True, help="run folder of a GRPE model (virtual node)")
    parser.add_argument("--moire", type=Path, required=True, help="run folder of a MoireGT model")
    parser.add_argument("--gradformer", type=Path, required=True, help="run folder of a Gradformer model")
    parser.add_argument("--smiles", default=MOLECULE)
    args = parser.parse_args(argv)
    grpe = Predictor(args.grpe / "best.pt", device="cpu")
    maps = attention_maps(grpe.model, grpe.featurizer, args.smiles)
    heads = [0, 1, 2]
    plot_attention_on_molecule(maps, "virtual", IMG / "insight_attention_virtual.png", heads=heads, size=150)
    plot_attention_on_molecule(maps, 3, IMG / "insight_attention_atom3.png", layers=[0, maps.weights.shape[0] - 1],
                               heads=heads, size=150)
    plot_attention_heatmap(maps, IMG / "insight_attention_heatmap.png", layers=[0, maps.weights.shape[0] - 1], heads=heads)
    focus = plot_focus_functions(Predictor(args.moire / "best.pt", device="cpu").model)
    focus.savefig(IMG / "insight_moire_focus.png", dpi=75, bbox_inches="tight")  # 8 curves x 4 panels: keep the PNG small
    plot_start_points(Predictor(args.gradformer / "best.pt", device="cpu").model, IMG / "insight_gradformer_start.png")
    tested = pd.read_csv(args.grpe / "test_predictions.csv")
    plot_parity_residuals(tested["expt"], tested["expt_pred"], IMG / "insight_parity.png", unit="kcal/mol",
                          title="GRPE-Tiny, FreeSolv test part")
    worst = error_table(tested["smiles"], tested["expt"], tested["expt_pred"]).head(5)
    print("| " + " | ".join(worst.columns) + " |")
    print("|" + "---|" * len(worst.columns))
    for _, row in worst.iterrows():
        print("| " + " | ".join(f"`{v}`" if k == "smiles" else f"{v:.2f}" for k, v in row.items()) + " |")
    for path in sorted(IMG.glob("insight_*.png")):
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
