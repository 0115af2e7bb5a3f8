"""``dgl-graphtx pretrain`` (descriptor pretraining of a backbone) and ``dgl-graphtx pretrained``
(the backbones shipped in the package)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..inference.backbones import describe, list_pretrained
from ..runs.config import apply_threads, resolve_run_config
from ..runs.distributed import launch_local
from ..runs.from_config import check_pretraining, pretrain_from_config
from ..runs.pretraining import MOSES_LICENCE, OBJECTIVES, PretrainConfig, moses_corpus
from .common import SMILES_COL, TRAIN_FLAGS, add_logging_options, add_setting_option, bounded, field_type, one_of, without_option


#: ``train`` flags that ``pretrain`` takes too (the rest concern labelled data).
SHARED_FLAGS = ("--model", "--preset", "--seed", "--epochs", "--batch-size", "--lr", "--device", "--on-nonfinite", "--threads")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``pretrain`` and ``pretrained`` sub-commands to ``sub``."""
    run = sub.add_parser(
        "pretrain", help="pretrain a backbone on unlabelled molecules (RDKit 2-D descriptors, masked atoms or both)",
        description="Train a backbone to regress normalised RDKit 2-D descriptors (a random share masked out of the loss "
                    "at every step), to tell the elements of masked atoms, or both (--objective); writes backbone.pt, "
                    "card.json (model card), log.csv and last.pt (resumable) to --out. See docs/pretraining.md.",
    )
    run.add_argument("corpus", help="SMILES file (.smi, CSV/TSV with a SMILES column, SDF), a store written by "
                                    "'dgl-graphtx featurize', or 'moses' (the MOSES training set read from the molsets "
                                    "wheel in --moses-dir)")
    run.add_argument("--out", required=True, help="output folder")
    run.add_argument("--name", help="name of the pretrained model in its card (default: the --out folder's name)")
    run.add_argument("--smiles-col", default=None, help=f"SMILES column of a table (default: {SMILES_COL}; SMILES for moses)")
    run.add_argument("--subset", type=field_type(PretrainConfig, "subset"),
                     help="pretrain on this many molecules drawn with --seed (default: all)")
    run.add_argument("--objective", type=field_type(PretrainConfig, "objective"), default=PretrainConfig.objective, **one_of(OBJECTIVES),
                     help="what the backbone learns from: descriptors, the elements of masked atoms (atoms), or both "
                          f"(default: {PretrainConfig.objective})")
    run.add_argument("--atom-mask-share", type=field_type(PretrainConfig, "atom_mask_share"), default=PretrainConfig.atom_mask_share,
                     help="share of atoms masked at each step with --objective atoms/both, in (0, 1] (default: "
                          f"{PretrainConfig.atom_mask_share})")
    run.add_argument("--mask-share", type=field_type(PretrainConfig, "mask_share"), default=PretrainConfig.mask_share,
                     help=f"share of descriptor targets left out of each step's loss, in [0, 1) (default: {PretrainConfig.mask_share})")
    run.add_argument("--valid-share", type=field_type(PretrainConfig, "valid_share"), default=PretrainConfig.valid_share,
                     help=f"held-out share for descriptor R2 and epoch selection, in (0, 1) (default: {PretrainConfig.valid_share})")
    run.add_argument("--workers", type=field_type(PretrainConfig, "workers"), default=PretrainConfig.workers,
                     help=f"processes computing descriptors (default: {PretrainConfig.workers})")
    run.add_argument("--corpus-name", help="corpus name in the card (default: the file name; MOSES for moses)")
    run.add_argument("--corpus-licence", help="licence of the corpus, recorded in the card (default: unknown; MIT for moses)")
    run.add_argument("--notes", default="", help="free text for the model card (how and why the model was made)")
    run.add_argument("--moses-dir", default=".cache/moses", help="folder with the molsets wheel (pip download --no-deps molsets -d DIR)")
    run.add_argument("--config", help="TOML or YAML file with sections preset, model, featurizer, relation, train")
    run.add_argument("--set", nargs="+", action="extend", metavar="KEY=VALUE", default=[],
                     help="override config fields, e.g. model.num_layers=2")
    for flag, key, kwargs in TRAIN_FLAGS:
        if flag in SHARED_FLAGS:
            add_setting_option(run, flag, key, kwargs)
    run.add_argument("--no-progress", action="store_true", help="no progress bar or per-epoch progress lines")
    run.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    run.add_argument("--resume", action="store_true", help="continue the run in --out from its last.pt")
    run.add_argument("--nproc", type=bounded(int, 1), default=1,
                     help="DDP processes on this machine (or start with torchrun ... -m dgl_graphtx pretrain ...)")
    add_logging_options(run)
    run.set_defaults(func=run_pretrain)

    listing = sub.add_parser("pretrained", help="list the pretrained backbones shipped in the package",
                             description="Pretrained backbones usable offline with train --from-pretrained NAME and "
                                         "embed --checkpoint NAME; their model cards are in dgl_graphtx/pretrained/NAME/card.json.")
    listing.set_defaults(func=run_list)


def run_pretrain(args: argparse.Namespace) -> int:
    """Run ``pretrain`` with parsed ``args`` (in this process, or in ``--nproc`` processes, after
    checking what can be checked before they start)."""
    flags = {key: getattr(args, flag.lstrip("-").replace("-", "_")) for flag, key, _ in TRAIN_FLAGS if flag in SHARED_FLAGS}
    flags = {k: v for k, v in flags.items() if v is not None}
    if args.no_progress or args.quiet:
        flags["train.progress"] = False
    config = apply_threads(resolve_run_config(args.config, args.set, flags))
    corpus, smiles_col, name, licence = args.corpus, args.smiles_col or SMILES_COL, args.corpus_name, args.corpus_licence
    if args.corpus == "moses":
        corpus = moses_corpus(args.moses_dir, args.moses_dir)
        smiles_col, name, licence = args.smiles_col or "SMILES", name or "MOSES", licence or MOSES_LICENCE
    settings = PretrainConfig(objective=args.objective, atom_mask_share=args.atom_mask_share, mask_share=args.mask_share,
                              valid_share=args.valid_share, workers=args.workers, subset=args.subset,
                              corpus_name=name or Path(corpus).name, corpus_licence=licence or "unknown", notes=args.notes)
    if args.nproc != 1:
        check_pretraining(config, corpus, args.out, args.overwrite, args.resume, processes=args.nproc, settings=settings)
        return launch_local(args.nproc, without_option(args.argv, "--nproc"))
    out = Path(args.out)
    result = pretrain_from_config(config, corpus, out, settings, name=args.name, smiles_col=smiles_col,
                                  overwrite=args.overwrite, resume=args.resume)
    if result is None or result.card is None:  # not the main process of a distributed job
        return 0
    print(describe(result.card))
    print(f"backbone: {out / 'backbone.pt'}; model card: {out / 'card.json'}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    """Run ``pretrained``: one line per shipped model."""
    cards = list_pretrained()
    if not cards:
        print("no pretrained models are shipped in this installation")
    for card in cards:
        print(describe(card))
    return 0
