"""Several molecules per row (solute and solvent, drug and drug, the two sides of a reaction, the
components of a mixture): each molecule encoded alone, by one shared backbone or by one backbone
per molecule, and the pooled encodings combined for the head.

A row's molecules arrive as one graph holding them side by side, each atom (and each relation-graph
node) marked with its molecule's index in ``ndata["row_molecule"]`` (see
:func:`~dgl_graphtx.featurize.components.combine_row`); no bond and no relation edge joins two
molecules. :func:`molecule_part` takes molecule ``k`` of every row of a batch out as a batch of
its own, which the backbone encodes as it encodes single molecules; :func:`combine_readouts` joins
the pooled encodings (concatenated, or summed, weighted by ``ndata["mixture_weights"]`` when the
model reads mixture weights).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Tuple

import torch
import dgl

from ..errors import ConfigError
from ..featurize.components import MIXTURE_WEIGHTS, ROW_MOLECULE
from ..nn import graph_ops as ops
from ..nn.graph_tensors import GraphLike, GraphTensors

#: How the molecules of a row get their encodings: one backbone for all, or one each.
BACKBONES = ("shared", "separate")
#: How the pooled encodings of a row's molecules are joined: side by side, or summed.
COMBINES = ("concat", "sum")
#: The most molecules a row may hold.
MAX_MOLECULES = 64


@dataclass(frozen=True)
class MoleculeSetOptions:
    """How a model reads rows of several molecules (the ``model.molecules`` config section).

    Args:
        count: molecules per row (1: one molecule, the usual case). Set from the data
            (``data.smiles_cols``; a reaction column counts twice), never by hand.
        backbones: ``shared`` (one backbone encodes every molecule of the row) or ``separate``
            (one backbone per molecule: solute and solvent learn their own encoders).
        combine: ``concat`` (the pooled encodings side by side, ``count * hidden_dim`` wide: the
            order of the molecules matters) or ``sum`` (added, ``hidden_dim`` wide: a mixture, whose
            order does not matter; weighted by the mixture weights when ``weighted``).
        weighted: sum the encodings weighted by each row's mixture weights
            (``data.mixture_weights``, ``ndata["mixture_weights"]``). Set from the data.

    Example:
        >>> MoleculeSetOptions(count=2).readout_width(64), MoleculeSetOptions(count=3, combine="sum").readout_width(64)
        (128, 64)
        >>> MoleculeSetOptions(count=2, weighted=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: molecules.weighted (mixture weights, --mixture-weights) weigh a sum of the molecules' ...
    """

    count: int = 1
    backbones: str = "shared"
    combine: str = "concat"
    weighted: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= MAX_MOLECULES:
            raise ConfigError(f"molecules.count must be an integer in [1, {MAX_MOLECULES}], got {self.count!r}")
        if self.backbones not in BACKBONES:
            raise ConfigError(f"molecules.backbones must be one of {BACKBONES}, got {self.backbones!r}")
        if self.combine not in COMBINES:
            raise ConfigError(f"molecules.combine must be one of {COMBINES}, got {self.combine!r}")
        if self.weighted and self.combine != "sum":
            raise ConfigError("molecules.weighted (mixture weights, --mixture-weights) weigh a sum of the molecules' encodings: "
                              "set molecules.combine=sum (--combine sum)")

    @property
    def several(self) -> bool:
        """Whether a row holds more than one molecule."""
        return self.count > 1

    def readout_width(self, hidden_dim: int) -> int:
        """Width of the combined encoding the head reads (before molecule-level extra features)."""
        return hidden_dim * (self.count if self.combine == "concat" else 1)


class MoleculePart(NamedTuple):
    """Molecule ``k`` of every row of a batch as a batch of its own: its molecular graph, its
    relation graph, and which relation-graph edges of the whole batch it holds (``[E]`` bool)."""

    graph: GraphLike
    relation_graph: GraphLike
    relation_edges: torch.Tensor


def select_nodes(graph: GraphLike, keep: torch.Tensor) -> Tuple[GraphLike, torch.Tensor]:
    """The nodes ``keep`` (``[N]`` bool) of a batched graph with the edges between them, as a
    batched graph of as many graphs (the nodes of graph ``b`` kept stay graph ``b``), on the same
    carrier; and which edges were kept (``[E]`` bool). No kept node may have an edge from a node
    that is not kept (so molecules, whose edges never leave them, are taken whole).

    Example:
        >>> g = dgl.graph(([0, 1, 2], [1, 0, 2]))
        >>> g.set_batch_num_nodes(torch.tensor([2, 1])); g.set_batch_num_edges(torch.tensor([2, 1]))
        >>> g.ndata["x"] = torch.tensor([1.0, 2.0, 3.0])
        >>> part, edges = select_nodes(g, torch.tensor([True, True, False]))
        >>> part.batch_num_nodes().tolist(), part.ndata["x"].tolist(), edges.tolist()
        ([2, 0], [1.0, 2.0], [True, True, False])
    """
    if isinstance(graph, GraphTensors) and graph.slot_size:
        raise ConfigError("rows of several molecules are taken apart from unpadded batches: train them with "
                          "train.step_mode=eager (the padded step modes hold one molecule per slot)")
    rows = ops.node_graphs(graph)
    batch_size = graph.batch_size
    src, dst = (t.long() for t in graph.edges())
    edges = keep[dst]
    renumber = torch.cumsum(keep.long(), 0) - 1
    new_src, new_dst = renumber[src[edges]], renumber[dst[edges]]
    counts = torch.bincount(rows[keep], minlength=batch_size)
    num_nodes = int(keep.sum())
    ndata = {key: value[keep] for key, value in graph.ndata.items()}
    edata = {key: value[edges] for key, value in graph.edata.items()}
    if isinstance(graph, GraphTensors):
        return GraphTensors(new_src, new_dst, counts, ndata, edata, num_nodes, rows[keep]), edges
    part = dgl.graph((new_src, new_dst), num_nodes=num_nodes, idtype=graph.idtype, device=graph.device)
    part.ndata.update(ndata)
    part.edata.update(edata)
    part.set_batch_num_nodes(counts)
    part.set_batch_num_edges(torch.bincount(rows[dst[edges]], minlength=batch_size))
    return part, edges


def molecule_part(graph: GraphLike, relation_graph: GraphLike, molecule: int, count: int) -> MoleculePart:
    """Molecule ``molecule`` (0-based) of every row of a batch of rows of ``count`` molecules.

    A graph without ``ndata["row_molecule"]`` (a single molecule given to a model of several), or
    a row without that molecule, is a one-line :class:`~dgl_graphtx.errors.ConfigError`.
    """
    for g in (graph, relation_graph):
        if ROW_MOLECULE not in g.ndata:
            raise ConfigError(f"this model reads rows of {count} molecules; give each row's molecules together (a tuple, or "
                              "the columns the model was trained on: --smiles-cols), not single molecules")
    if molecule == 0 and int(graph.ndata[ROW_MOLECULE].max()) >= count:
        raise ConfigError(f"a row of the batch holds {int(graph.ndata[ROW_MOLECULE].max()) + 1} molecules; this model reads rows of "
                          f"{count}")
    atoms, _ = select_nodes(graph, graph.ndata[ROW_MOLECULE] == molecule)
    relations, edges = select_nodes(relation_graph, relation_graph.ndata[ROW_MOLECULE] == molecule)
    if bool((atoms.batch_num_nodes() == 0).any()):
        raise ConfigError(f"a row of the batch lacks molecule {molecule + 1} of the {count} this model reads; give every row "
                          f"{count} molecules")
    return MoleculePart(atoms, relations, edges)


def combine_readouts(pooled: List[torch.Tensor], options: MoleculeSetOptions, graph: GraphLike) -> torch.Tensor:
    """The pooled encodings ``[B, d]`` of a row's molecules joined as ``options`` say:
    concatenated ``[B, K * d]``, or summed ``[B, d]`` (weighted by the rows' mixture weights when
    ``options.weighted``).

    Example:
        >>> a, b = torch.ones(1, 2), torch.full((1, 2), 3.0)
        >>> combine_readouts([a, b], MoleculeSetOptions(count=2), None).tolist()
        [[1.0, 1.0, 3.0, 3.0]]
        >>> combine_readouts([a, b], MoleculeSetOptions(count=2, combine="sum"), None).tolist()
        [[4.0, 4.0]]
    """
    if options.combine == "concat":
        return torch.cat(pooled, dim=1)
    stacked = torch.stack(pooled, dim=1)  # [B, K, d]
    if not options.weighted:
        return stacked.sum(1)
    if MIXTURE_WEIGHTS not in graph.ndata:
        raise ConfigError(f"this model sums its {options.count} molecules weighted by mixture weights: give them "
                          "(--mixture-weights, the columns the model was trained with)")
    weights = graph.ndata[MIXTURE_WEIGHTS][ops.first_nodes(graph)].to(stacked.dtype)  # [B, K]: the row's, on its first atom
    return (stacked * weights.unsqueeze(-1)).sum(1)


class RowEncoding(NamedTuple):
    """What :func:`encode_rows` gives: the combined encoding of each row ``[B, width]`` and, per
    layer, the attention weights ``[E, H]`` over the whole batch's relation edges (those of each
    molecule from the backbone that encoded it)."""

    readout: torch.Tensor
    attentions: List[torch.Tensor]


def encode_rows(model: Any, graph: GraphLike, relation_graph: GraphLike, attention: bool = False) -> RowEncoding:
    """Encode every molecule of every row with its backbone (``model`` itself, or with separate
    backbones ``model.molecule_encoders[k - 1]`` for molecule ``k > 0``), pool each (the backbone's
    :meth:`~dgl_graphtx.models.MoleculeModel.pool`) and combine the pooled encodings
    (:func:`combine_readouts`); the attention weights only when ``attention`` (else ``[]``)."""
    options = model.config.molecules
    pooled: List[torch.Tensor] = []
    attentions: Optional[List[torch.Tensor]] = None
    for k in range(options.count):
        part = molecule_part(graph, relation_graph, k, options.count)
        encoder = model if k == 0 or options.backbones == "shared" else model.molecule_encoders[k - 1]
        atoms, virtual, layers = encoder.encode(part.graph, part.relation_graph, attention=attention)
        pooled.append(encoder.pool(part.graph, atoms, virtual))
        if attentions is None:
            attentions = [a.new_zeros(part.relation_edges.shape[0], *a.shape[1:]) for a in layers]
        for whole, layer in zip(attentions, layers):
            whole[part.relation_edges] = layer
    return RowEncoding(combine_readouts(pooled, options, graph), attentions or [])
