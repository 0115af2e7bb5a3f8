"""``dgl-graphtx featurize``: featurize a CSV / SDF / .smi file (optionally gzipped) into a
sharded, resumable, memory-mapped store with several worker processes."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..datasets import featurize_file
from ..datasets.sharded_store import MANIFEST, SHARD_SIZE, featurize_to_store
from ..featurize import FeaturizerConfig, SizeLimits
from ..featurize.config import ATOM_FEATURES
from ..models import get_preset
from ..runs.config import default_preset_name
from ..runs.store_recipe import write_store_recipe
from ..saved_files import read_json
from .common import DEFAULT_MODEL, MODELS, SMILES_COL, add_input_options, bounded, library_default, split_targets


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``featurize`` sub-command to ``sub``."""
    featurize = sub.add_parser(
        "featurize", help="featurize molecules into an on-disk store (parallel, resumable)",
        description="Featurize molecules for a model into DIR, shard by shard in --workers processes. "
                    "A killed run resumes from its finished shards when started again with the same arguments; "
                    "'dgl-graphtx train DIR' trains on the store.")
    featurize.add_argument("input", help="CSV, SDF, .smi or .xyz file, optionally gzipped (.csv.gz, .sdf.gz, .smi.gz, .xyz.gz)")
    featurize.add_argument("--out", required=True, help="folder of the store")
    featurize.add_argument("--targets", default="", help="comma-separated target columns / SD properties (none for .smi)")
    add_input_options(featurize)
    featurize.add_argument("--model", choices=MODELS, default=DEFAULT_MODEL,
                           help=f"model whose featurization to use (default: {DEFAULT_MODEL})")
    featurize.add_argument("--preset", default=None, help="preset of the model (as for train)")
    featurize.add_argument("--atom-features", choices=ATOM_FEATURES, default=FeaturizerConfig.atom_features,
                           help=f"atom/bond featurizer (default: {FeaturizerConfig.atom_features})")
    workers = library_default(featurize_to_store, "workers")
    featurize.add_argument("--workers", type=bounded(int, 1), default=workers,
                           help=f"featurizing processes (default: {workers}; use the number of cores)")
    featurize.add_argument("--shard-size", type=bounded(int, 1), default=SHARD_SIZE,
                           help=f"molecules per shard, the unit of resumption (default: {SHARD_SIZE})")
    featurize.add_argument("--max-atoms", type=bounded(int, 1), default=SizeLimits.max_atoms,
                           help=f"molecules with more atoms are left out and reported (default: {SizeLimits.max_atoms}, "
                                "as for train and predict)")
    featurize.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    featurize.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``featurize`` with parsed ``args``."""
    targets = split_targets(args.targets)
    preset = get_preset(args.model, args.preset, num_tasks=max(len(targets), 1), atom_features=args.atom_features)
    store = featurize_file(args.input, args.out, args.smiles_col or SMILES_COL, targets, featurizer=preset.featurizer,
                           delimiter=args.delimiter,
                           relation=preset.relation, limits=SizeLimits(max_atoms=args.max_atoms), workers=args.workers,
                           shard_size=args.shard_size,
                           progress=not args.no_progress)
    write_store_recipe(store, args.model, args.preset or default_preset_name(args.model), args.atom_features)
    manifest = read_json(Path(store) / MANIFEST, "run 'dgl-graphtx featurize' again")
    print(f"store {store}: {manifest['molecules']} molecules; {manifest['summary']}")
    print(f"invalid rows: {Path(store) / 'input_report.csv'}")
    return 0
