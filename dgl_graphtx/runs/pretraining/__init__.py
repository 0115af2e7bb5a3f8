"""Pretraining: a backbone learns to regress normalised RDKit 2-D descriptors, computed from the
molecule alone, with a random share of the targets left out of the loss at every step (as CheMeleon
does with Mordred descriptors), so that it cannot lean on any fixed subset; or to tell the elements
of masked atoms (:mod:`~dgl_graphtx.models.masked_atoms`); or both (:attr:`PretrainConfig.objective`).

The run (:func:`pretrain`, in :mod:`.run`) goes through :class:`~dgl_graphtx.training.Trainer`
(:mod:`.trainer`; resumable from ``last.pt``, DDP-ready through its hooks), reads its corpus and
descriptors (:mod:`.corpus`, the descriptors in resumable chunks of
:mod:`~dgl_graphtx.runs.descriptor_chunks`), scores the held-out part (:mod:`.scores`) and ends with
``backbone.pt`` and its model card ``card.json`` (:mod:`.card`), which
:func:`~dgl_graphtx.inference.get_pretrained` loads. The MOSES corpus is :mod:`.moses`.
"""
from .card import ship
from .corpus import DESCRIPTOR_CACHE, descriptor_targets, save_descriptor_cache
from .moses import MOSES_LICENCE, moses_corpus
from .run import PretrainResult, pretrain
from .scores import heldout_r2
from .settings import OBJECTIVES, PretrainConfig
from .trainer import MaskedDescriptorTrainer

__all__ = [
    "DESCRIPTOR_CACHE",
    "MOSES_LICENCE",
    "MaskedDescriptorTrainer",
    "OBJECTIVES",
    "PretrainConfig",
    "PretrainResult",
    "descriptor_targets",
    "heldout_r2",
    "moses_corpus",
    "pretrain",
    "save_descriptor_cache",
    "ship",
]
