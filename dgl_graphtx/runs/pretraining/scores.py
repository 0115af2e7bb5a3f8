"""How well a pretrained backbone does on the corpus's held-out part: descriptor R2 and RMSE, and
the share of masked atoms whose element it tells."""
from __future__ import annotations

import logging
from typing import Iterable, NamedTuple, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import Subset

from ...models.masked_atoms import MaskedAtomNetwork
from ...nn.graph_tensors import GraphLike
from ...training import TrainResult
from .corpus import DescriptorCorpus
from .trainer import MaskedDescriptorTrainer

logger = logging.getLogger("dgl_graphtx")


class UndefinedR2Filter(logging.Filter):
    """Drops the per-descriptor "R^2 is undefined" notes (descriptors constant in a small held-out
    part); the card says over how many descriptors the held-out R2 is averaged."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "R^2 is undefined" not in record.getMessage()


def heldout_r2(y_true: np.ndarray, y_pred: np.ndarray) -> Tuple[float, int]:
    """Mean coefficient of determination over the columns where it is defined (at least two
    distinct observed values), and the number of such columns.

    Example:
        >>> heldout_r2(np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]))
        (0.5, 1)
    """
    scores = []
    for column in range(y_true.shape[1]):
        seen = np.isfinite(y_true[:, column])
        truth, guess = y_true[seen, column], y_pred[seen, column]
        if len(np.unique(truth)) < 2:
            continue
        scores.append(1.0 - float(((truth - guess) ** 2).sum()) / float(((truth - truth.mean()) ** 2).sum()))
    return (float(np.mean(scores)) if scores else float("nan")), len(scores)


class HeldOutScores(NamedTuple):
    """How well the pretrained backbone predicts the held-out part's descriptors (and the elements
    of its masked atoms, with a masked-atom objective)."""

    r2: float
    r2_descriptors: int
    rmse: float
    element_accuracy: Optional[float] = None


@torch.no_grad()
def heldout_element_accuracy(network: MaskedAtomNetwork, batches: Iterable[Tuple[GraphLike, GraphLike]]) -> float:
    """The share of masked atoms whose element ``network`` (in eval mode) tells right over
    ``batches`` of (molecular graph, relation graph) pairs (NaN: no atoms).

    Example:
        >>> from dgl_graphtx.featurize import smiles_to_graphs
        >>> from dgl_graphtx.models import ModelConfig, build_model
        >>> from dgl_graphtx.models.masked_atoms import MaskedAtoms
        >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2))
        >>> network = MaskedAtomNetwork(model, MaskedAtoms(model, share=1.0), probe=False)
        >>> g, rel = smiles_to_graphs("CCO")
        >>> 0.0 <= heldout_element_accuracy(network, [(g, rel)]) <= 1.0
        True
    """
    correct, counted = 0, 0
    with network.model.eval_mode():
        for graph, relation_graph in batches:
            network(graph, relation_graph)
            correct += int(network.correct)
            counted += int(network.masked.sum())
    return correct / counted if counted else float("nan")

def fit_and_score(trainer: MaskedDescriptorTrainer, corpus: DescriptorCorpus, resume: bool) -> Tuple[TrainResult, HeldOutScores]:
    """Train on the corpus's training part (resuming ``last.pt`` with ``resume``) and score the held-out part."""
    quiet = UndefinedR2Filter()
    logger.addFilter(quiet)
    try:
        result = trainer.fit(Subset(corpus.dataset, corpus.split.train), Subset(corpus.dataset, corpus.split.valid), resume=resume)
    finally:
        logger.removeFilter(quiet)
    valid = Subset(corpus.dataset, corpus.split.valid)
    r2, defined = heldout_r2(corpus.targets[corpus.split.valid], trainer.predict(valid))
    accuracy = None
    if trainer.network is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(trainer.config.seed)  # the same held-out masks for every backbone of a seed
            pairs = ((b.graph, b.relation_graph) for b in (batch.to(trainer.device) for batch in trainer.loader(valid)))
            accuracy = heldout_element_accuracy(trainer.network, pairs)
    return result, HeldOutScores(r2, defined, trainer.evaluate(valid)["rmse"], accuracy)
