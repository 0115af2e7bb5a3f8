"""The trainer of a pretraining run: descriptor targets with a random share left out of every
step's loss, and the masked atoms' element loss beside it."""
from __future__ import annotations

from typing import Any, Optional

import torch

from ...datasets import MoleculeBatch
from ...models.masked_atoms import MaskedAtomNetwork, MaskedAtoms
from ...training import Trainer, masked_loss
from .settings import PretrainConfig


class MaskedDescriptorTrainer(Trainer):
    """A :class:`Trainer` whose loss leaves out a random ``mask_share`` of the observed targets at
    every step (drawn from torch's generator, so a resumed run draws the same masks); with a
    ``pretext`` (:class:`MaskedAtoms`, objectives ``atoms`` and ``both``; ``probe`` for ``atoms``)
    it trains through a :class:`MaskedAtomNetwork` and adds its element loss."""

    def __init__(self, *args: Any, mask_share: float = PretrainConfig.mask_share, pretext: Optional[MaskedAtoms] = None,
                 probe: bool = False, **kwargs: Any) -> None:
        if pretext is not None:
            kwargs["parts"] = {"masked-atom heads": pretext}
        super().__init__(*args, **kwargs)
        self.mask_share = mask_share
        self.network = MaskedAtomNetwork(self.model, pretext, probe) if pretext is not None else None

    def training_module(self) -> torch.nn.Module:
        return self.network if self.network is not None else self.model

    def batch_loss(self, output: torch.Tensor, batch: MoleculeBatch, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        keep = torch.rand(batch.mask.shape, device=batch.mask.device) >= self.mask_share
        loss = masked_loss(self.task, output, self.model.normalize_targets(batch.labels), batch.mask & keep)
        return loss if self.network is None else loss + self.network.element_loss
