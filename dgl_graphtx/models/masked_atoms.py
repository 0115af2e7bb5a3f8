"""Masked-atom pretraining, the attribute masking of Hu et al. (ICLR 2020): at every training step a
share of the atoms have their embedded input replaced by a learned mask vector (an
:class:`~dgl_graphtx.models.base.AtomMask` that :meth:`~dgl_graphtx.models.MoleculeModel.encode`
takes), and a classifier reads their final node states to tell their element from the rest of
the molecule.

:class:`MaskedAtoms` holds the pretext task's parameters, trained beside the model (a ``part`` of
:class:`~dgl_graphtx.training.Trainer`: in the optimizer and in ``last.pt``, never in the backbone);
:class:`MaskedAtomNetwork` is what the training steps run through. With the ``atoms`` objective
of :mod:`~dgl_graphtx.runs.pretraining` the descriptor head still learns, from the detached node
states (a probe whose held-out R2 selects the epoch), so that the backbone learns from the masked
atoms alone.
"""
from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..featurize.elements import element_classes, element_index
from ..nn.graph_tensors import GraphLike
from .base import AtomMask, MoleculeModel


class MaskedAtoms(nn.Module):
    """The mask vector and the element classifier of masked-atom pretraining for ``model``.

    Args:
        model: the model to pretrain.
        share: the probability of each atom to be masked at a step (at least one atom of a batch is).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2))
        >>> pretext = MaskedAtoms(model, share=0.15)
        >>> g, _ = smiles_to_graphs("CCO")
        >>> embedded = model.encode_atoms(g, masked=pretext.mask(torch.tensor([False, False, True])))
        >>> torch.equal(embedded[2], pretext.mask_embedding), torch.equal(embedded[0], pretext.mask_embedding)
        (True, False)
    """

    def __init__(self, model: MoleculeModel, share: float) -> None:
        super().__init__()
        d = model.config.hidden_dim
        self.atom_features = model.config.atom_features
        self.share = share
        self.mask_embedding = nn.Parameter(torch.randn(d) * 0.02)
        self.classifier = nn.Linear(d, element_classes(self.atom_features))

    def mask(self, atoms: torch.Tensor) -> AtomMask:
        """The input of :meth:`~dgl_graphtx.models.MoleculeModel.encode` hiding ``atoms`` (bool ``[N]``)."""
        return AtomMask(atoms, self.mask_embedding)

    def draw(self, num_atoms: int, device: torch.device) -> torch.Tensor:
        """Which of ``num_atoms`` atoms to mask ``[N]`` (bool), from torch's generator (so a
        resumed run draws the same); at least one.

        Example:
            >>> from dgl_graphtx.models import ModelConfig, build_model
            >>> pretext = MaskedAtoms(build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)), share=0.0)
            >>> int(pretext.draw(5, torch.device("cpu")).sum())
            1
        """
        masked = torch.rand(num_atoms, device=device) < self.share
        if num_atoms and not masked.any():
            masked[torch.randint(num_atoms, (1,), device=device)] = True
        return masked

    def element_loss(self, graph: GraphLike, atoms: torch.Tensor, masked: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of the element classes of the ``masked`` atoms read from their node states
        ``atoms`` ``[N, d]``, and how many of them the classifier got right."""
        truth = element_index(graph.ndata["feat"], self.atom_features)[masked]
        logits = self.classifier(atoms[masked])
        return F.cross_entropy(logits, truth), (logits.argmax(dim=-1) == truth).sum()


class MaskedAtomNetwork(nn.Module):
    """What the training steps of masked-atom pretraining run through: ``model`` encodes each batch
    with freshly drawn masked atoms (``pretext``); the forward returns the descriptor head's
    outputs and keeps the element loss in :attr:`element_loss` (the masked atoms in :attr:`masked`,
    the right guesses among them in :attr:`correct`).

    Args:
        model: the model.
        pretext: its :class:`MaskedAtoms`.
        probe: the descriptor head reads detached node states (the ``atoms`` objective), so that
            only the element loss trains the backbone.

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2, num_tasks=3))
        >>> network = MaskedAtomNetwork(model, MaskedAtoms(model, share=0.5), probe=True)
        >>> g, rel = smiles_to_graphs("CCO")
        >>> network(g, rel).shape, network.element_loss.ndim
        (torch.Size([1, 3]), 0)
    """

    def __init__(self, model: MoleculeModel, pretext: MaskedAtoms, probe: bool) -> None:
        super().__init__()
        self.model = model
        self.pretext = pretext
        self.probe = probe
        self.element_loss = torch.zeros(())
        self.masked = torch.zeros(0, dtype=torch.bool)
        self.correct = torch.zeros((), dtype=torch.long)

    def forward(self, graph: GraphLike, relation_graph: GraphLike) -> torch.Tensor:
        self.masked = self.pretext.draw(graph.num_nodes(), graph.ndata["feat"].device)
        atoms, virtual, _ = self.model.encode(graph, relation_graph, masked=self.pretext.mask(self.masked))
        self.element_loss, self.correct = self.pretext.element_loss(graph, atoms, self.masked)
        if self.probe:
            atoms, virtual = atoms.detach(), (virtual.detach() if virtual is not None else None)
        return self.model.head_outputs(graph, atoms, virtual)
