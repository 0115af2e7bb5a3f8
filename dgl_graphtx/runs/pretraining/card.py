"""The model card of a pretrained backbone (what it learnt from, how, and how well), and shipping a
backbone with its card into the package."""
from __future__ import annotations

import dataclasses
import platform
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Union

import torch

from ..._version import __version__
from ...checksums import file_sha256
from ...errors import ConfigError
from ...inference.backbones import BACKBONE_FILE, CARD_FILE, read_card
from ...inference.model_card import CardCorpus, CardTargets, ModelCard
from ...training import Trainer, TrainConfig, TrainResult, json_safe
from .corpus import DescriptorCorpus
from .scores import HeldOutScores
from .settings import PretrainConfig

PathLike = Union[str, Path]


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    return f"CPU {platform.processor() or platform.machine()}, {torch.get_num_threads()} thread(s)"


def pretraining_recipe(config: PretrainConfig, train_config: TrainConfig) -> Dict[str, Any]:
    """The settings of a pretraining run, as its checkpoints and card record them."""
    return {"pretrain": dataclasses.asdict(config), "train": dataclasses.asdict(train_config)}


def model_card(name: str, config: PretrainConfig, train_config: TrainConfig, corpus: DescriptorCorpus,
               trainer: Trainer, result: TrainResult, scores: HeldOutScores, sha256: str) -> ModelCard:
    """The model card of a pretrained backbone whose ``backbone.pt`` has SHA-256 ``sha256``:
    what it was trained on, how, and how well it predicts the held-out descriptors."""
    model_config, hooks = trainer.model.config, trainer.hooks
    fit = json_safe({"r2": scores.r2, "rmse": scores.rmse})  # undefined: null
    return ModelCard(
        name=name,
        variant=model_config.variant,
        architecture=model_config.to_dict(),
        parameters=sum(p.numel() for p in trainer.model.parameters()),
        corpus=CardCorpus(name=config.corpus_name, source=corpus.source, sha256=corpus.sha256,
                          subset=config.subset, subset_seed=train_config.seed,
                          molecules=len(corpus.dataset), train=len(corpus.split.train), heldout=len(corpus.split.valid),
                          licence=config.corpus_licence),
        targets=CardTargets(generator=config.generator, count=len(corpus.names), names=corpus.names,
                            normalisation="robust (median, IQR/1.349), clipped to +-10; NaN left out of the loss"),
        recipe=pretraining_recipe(config, train_config),
        epochs=int(result.history["epoch"].max()) if len(result.history) else 0,
        best_epoch=result.best_epoch,
        wall_time_s=round(float(result.history["seconds"].sum()), 1) if len(result.history) else 0.0,
        descriptor_time_s=round(corpus.descriptor_seconds, 1),
        hardware=hardware(trainer.device) + (f" x {hooks.world_size} processes" if hooks.world_size > 1 else ""),
        heldout_r2=fit["r2"], heldout_rmse=fit["rmse"], heldout_r2_descriptors=scores.r2_descriptors,
        heldout_element_accuracy=scores.element_accuracy,
        library_version=__version__,
        torch_version=torch.__version__,
        created_with=" ".join(sys.argv) if sys.argv and sys.argv[0].endswith("dgl-graphtx") else "dgl_graphtx.runs.pretraining.pretrain",
        notes=config.notes,
        sha256=sha256,
    )


def ship(run_dir: PathLike, folder: PathLike) -> Path:
    """Copy a pretraining run's ``backbone.pt`` and ``card.json`` to ``folder`` (e.g.
    ``dgl_graphtx/pretrained/<name>/``), checking the hash first."""
    source, target = Path(run_dir), Path(folder)
    card = read_card(source / CARD_FILE, source)
    if file_sha256(source / BACKBONE_FILE) != card.sha256:
        raise ConfigError(f"{source / BACKBONE_FILE} does not match its card")
    target.mkdir(parents=True, exist_ok=True)
    for file in (BACKBONE_FILE, CARD_FILE):
        shutil.copyfile(source / file, target / file)
    return target
