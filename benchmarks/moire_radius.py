"""How close is MoiréGT attention on `radius=r` relation graphs to the `complete` one?

For FreeSolv molecules with seeded ETKDG coordinates, a MoiréGT layer (3-D distances) runs on the
complete relation graph and on radius-truncated ones. Reported per radius: the fraction of pairs
kept, the attention mass the complete layer puts on the dropped pairs (per query and head: mean
and worst), and the relative L2 difference of the layer outputs. The layer's shifts are spread
over [0.5, --max-shift] Angstrom as at initialisation; heads with a far shift attend beyond a
small radius, so this measures the truncation error of the default Moiré initialisation.

    python benchmarks/moire_radius.py [--molecules 256] [--radii 2 3 4 5 6 8] [--focus gaussian]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _molecules as M  # noqa: E402
import _report as R  # noqa: E402

import dgl  # noqa: E402
from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.featurize import FeaturizerConfig  # noqa: E402
from dgl_graphtx.nn import FOCUS_FUNCTIONS, MoireAttention  # noqa: E402
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402

COLUMNS = [
    ("relation", "relation"),
    ("pairs_kept", "pairs kept"),
    ("mass_dropped_mean", "dropped attention mass (mean)"),
    ("mass_dropped_max", "dropped attention mass (max)"),
    ("rel_l2", "relative L2 output difference"),
]


def batch(smiles: List[str], relation: RelationConfig) -> dgl.DGLGraph:
    ds = MoleculeDataset(smiles, featurizer=FeaturizerConfig(coordinates="etkdg"), relation=relation, progress=False)
    if ds.report.num_skipped:
        raise SystemExit(f"ETKDG failed for some molecules: {ds.report.summary()}")
    return ds.__getitems__(list(range(len(ds)))).relation_graph


def dropped_mass(complete: dgl.DGLGraph, attn: torch.Tensor, radius: float) -> torch.Tensor:
    """Per query node and head, the attention weight the complete graph gives to pairs beyond ``radius``."""
    _, dst = complete.edges()
    beyond = complete.edata["dist"] > radius  # exactly the pairs a radius graph leaves out (self pairs have 0)
    mass = torch.zeros(complete.num_nodes(), attn.shape[1], dtype=attn.dtype)
    return mass.index_add_(0, dst[beyond], attn[beyond])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=256, help="FreeSolv molecules (ETKDG ~10 ms each)")
    parser.add_argument("--radii", type=float, nargs="+", default=[2.0, 3.0, 4.0, 5.0, 6.0, 8.0])
    parser.add_argument("--focus", choices=sorted(FOCUS_FUNCTIONS), default="gaussian")
    parser.add_argument("--max-shift", type=float, default=6.0, help="largest initial shift (Angstrom; the moire-3d preset uses 6)")
    parser.add_argument("--width", type=float, default=2.0, help="initial width sigma")
    parser.add_argument("--quick", action="store_true", help="32 molecules, no docs update")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.molecules = 32
    env = R.environment()
    R.print_environment(env, "moire_radius environment")
    smiles = M.freesolv_smiles()[0][: args.molecules]
    torch.manual_seed(0)
    layer = MoireAttention(64, 8, focus=args.focus, distance="dist", max_shift=args.max_shift, init_width=args.width).double().eval()
    complete = batch(smiles, RelationConfig())
    x = torch.randn(complete.num_nodes(), 64, dtype=torch.float64)
    with torch.no_grad():
        reference, attn = layer(complete, x, get_attention=True)
    rows: List[Dict[str, object]] = []
    for radius in args.radii:
        truncated = batch(smiles, RelationConfig("radius", radius=radius))
        with torch.no_grad():
            out = layer(truncated, x)
        mass = dropped_mass(complete, attn, radius)
        rows.append({
            "relation": f"radius={radius:g}",
            "pairs_kept": truncated.num_edges() / complete.num_edges(),
            "mass_dropped_mean": float(mass.mean()),
            "mass_dropped_max": float(mass.max()),
            "rel_l2": float((out - reference).norm() / reference.norm()),
        })
        print(R.format_table(rows[-1:], COLUMNS).splitlines()[-1], flush=True)
    print()
    print(R.format_table(rows, COLUMNS))
    R.publish("moire_radius", rows, COLUMNS, env, args.csv or R.default_csv("moire_radius", args.quick), [
        "## MoiréGT: radius truncation vs. complete relation graphs",
        "",
        f"Written by `benchmarks/moire_radius.py`: {R.environment_line(env)} {len(smiles)} FreeSolv molecules with "
        f"ETKDG coordinates; one MoiréGT layer (d=64, 8 heads, {args.focus} focus, 3-D distances, shifts spread over "
        f"[0.5, {args.max_shift:g}] Angstrom, width {args.width:g}) in float64. Dropped attention mass: per query and "
        "head, the weight the complete layer gives to the pairs a radius graph leaves out.",
    ], update_docs=not (args.quick or args.no_docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
