"""A pretraining run end to end: its folder, corpus, model and trainer, the held-out scores, and
``backbone.pt`` with its model card."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from pathlib import Path
from typing import NamedTuple, Optional, Union

import torch

from ...atomic_io import atomic_write_text
from ...checkpoint import CheckpointExtras, CheckpointMeta, save_checkpoint
from ...checksums import file_sha256
from ...inference.backbones import BACKBONE_FILE, CARD_FILE
from ...inference.model_card import ModelCard
from ...models import Preset, build_model
from ...models.masked_atoms import MaskedAtoms
from ...training import ProcessHooks, TrainConfig, seed_everything
from ..folder import RunFolder
from .card import model_card, pretraining_recipe
from .corpus import descriptor_corpus
from .scores import fit_and_score
from .settings import PretrainConfig
from .trainer import MaskedDescriptorTrainer

logger = logging.getLogger("dgl_graphtx")

PathLike = Union[str, Path]


class PretrainResult(NamedTuple):
    """The card written next to ``backbone.pt`` (``None`` on the other processes than the main one
    of a distributed run, which write nothing), and the trained model."""

    card: Optional[ModelCard]
    model: torch.nn.Module
    out_dir: Path


def open_run_folder(opened: contextlib.ExitStack, out: Path, overwrite: bool, resume: bool,
                    hooks: ProcessHooks) -> Optional[RunFolder]:
    """The run folder, opened (and kept open by ``opened``) in the main process; ``None`` in the others."""
    with hooks.main_first():  # a refused folder stops every process of a job at once
        if not hooks.is_main:
            return None
        run = opened.enter_context(RunFolder(out, overwrite, resume=resume))
        if not resume:  # RunFolder refused a folder holding a run unless overwrite: these are stale
            for stale in (BACKBONE_FILE, CARD_FILE):
                (out / stale).unlink(missing_ok=True)
        return run


def pretrain(
    corpus: PathLike,
    out_dir: PathLike,
    preset: Preset,
    train_config: TrainConfig,
    config: PretrainConfig = PretrainConfig(),
    name: Optional[str] = None,
    smiles_col: str = "smiles",
    overwrite: bool = False,
    resume: bool = False,
    hooks: Optional[ProcessHooks] = None,
) -> PretrainResult:
    """Pretrain ``preset``'s architecture on ``corpus`` (a SMILES/CSV/SDF file or a store written by
    ``dgl-graphtx featurize``) with ``config.objective`` (descriptors, masked atoms or both) and
    write ``backbone.pt``, ``card.json``, ``log.csv``, ``last.pt`` (resumable: ``resume=True``
    continues it) to ``out_dir``. With the ``hooks`` of a distributed run
    (:func:`~dgl_graphtx.runs.distributed.process_hooks`) every process trains on its share of each
    batch; the main process computes the descriptors and writes the outputs.

    Example:
        >>> import tempfile, pathlib
        >>> from dgl_graphtx.models import get_preset
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> _ = (folder / "c.smi").write_text("\\n".join(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O", "CCCl", "OCCN", "c1ccncc1"]))
        >>> p = get_preset("vanilla", num_layers=1, hidden_dim=16, num_heads=2)
        >>> r = pretrain(folder / "c.smi", folder / "run", p, TrainConfig(epochs=1, batch_size=8, progress=False),
        ...              PretrainConfig(valid_share=0.25))
        >>> r.card.epochs, r.card.corpus.molecules, (folder / "run" / "backbone.pt").is_file()
        (1, 8, True)
    """
    out = Path(out_dir)
    hooks = hooks if hooks is not None else ProcessHooks()
    with contextlib.ExitStack() as opened:
        run = open_run_folder(opened, out, overwrite, resume, hooks)
        data = descriptor_corpus(corpus, out, preset, smiles_col, config, train_config, hooks)
        seed_everything(train_config.seed)
        model_config = dataclasses.replace(preset.model, num_tasks=len(data.names), task="regression", molecule_features=0,
                                           atom_extra_features=0)
        recipe = pretraining_recipe(config, train_config)
        meta = CheckpointMeta(preset.featurizer, preset.relation, data.names,
                              CheckpointExtras(pretraining={"targets": config.generator, "scaler": data.scaler.to_dict(),
                                                            "recipe": recipe, "corpus": data.record()}))
        model = build_model(model_config)
        pretext = MaskedAtoms(model, config.atom_mask_share) if config.objective != "descriptors" else None
        trainer = MaskedDescriptorTrainer(model, train_config, out_dir=out, meta=meta, hooks=hooks, mask_share=config.mask_share,
                                          pretext=pretext, probe=config.objective == "atoms")
        result, scores = fit_and_score(trainer, data, resume)
        if not hooks.is_main:
            return PretrainResult(None, trainer.model, out)
        assert run is not None, "the main process opened the run folder"
        backbone = out / BACKBONE_FILE
        save_checkpoint(backbone, trainer.model, meta)
        card = model_card(name or out.name, config, train_config, data, trainer, result, scores, file_sha256(backbone))
        atomic_write_text(json.dumps(card.to_dict(), indent=2, allow_nan=False), out / CARD_FILE)
        run.finish()
    logger.info("pretrained %s: held-out descriptor R2 %s after %d epochs; %s", card.name, card.heldout_r2,
                card.epochs, backbone)
    return PretrainResult(card, trainer.model, out)
