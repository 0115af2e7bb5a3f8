"""Batches padded to fixed shapes: every batch of a size bucket has the same tensor shapes, so a
training step compiled or captured (a CUDA graph) once serves all of them.

A padded batch (:func:`pad_batch`, on the host, as loader workers run it) holds
:attr:`PaddedShape.molecules` molecule slots of :attr:`PaddedShape.atoms` nodes each, the real
atoms first, as :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` marked with their
``node_mask`` (the real nodes) and ``slot_size``:

* the molecular graph keeps each molecule's bonds and fills its slot up to
  :attr:`PaddedShape.bonds` directed bonds with self-loops on a padding node (each slot keeps
  one: a slot has more nodes than its molecule), so messages over bonds never reach a real atom;
* the relation graph holds every (query, key) slot of its ``[B, n, n]`` dense blocks as an
  edge, the real pairs marked in its block geometry's ``edge_mask`` (the attention masks the others
  out); a virtual node sits after its molecule's atoms, the relation slot one node longer;
* empty molecule slots (a bucket's last, short batch) have no atoms and no observed labels.

What reads many nodes at once counts the real ones only: readouts, and BatchNorm
(:class:`~dgl_graphtx.nn.lean.BatchNorm1d` with the mask), so a padded batch gives the real
molecules the outputs, losses, gradients and running statistics of the unpadded batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

import torch
import dgl

from ..errors import ConfigError
from ..nn.dense_blocks import BlockGeometry
from ..nn.graph_tensors import GraphTensors
from ..nn.pair_classes import PairCodes
from .collate import MoleculeBatch

#: Rows of the pair codes of a padded relation graph unless a shape says otherwise.
PAIR_CODES = 64


class PaddingOverflow(ConfigError):
    """A batch does not fit a :class:`PaddedShape` (a molecule too large, too many bonds or pair
    codes): the caller runs it unpadded."""


@dataclass(frozen=True)
class PaddedShape:
    """The sizes every batch of a bucket is padded to.

    Args:
        molecules: molecule slots per batch.
        atoms: node slots per molecule, more than its largest molecule has (one padding node
            at least holds the bond padding).
        bonds: directed bond slots per molecule.
        pair_codes: rows of the relation graph's (distance, bond, self) combinations.

    Example:
        >>> PaddedShape(molecules=32, atoms=27, bonds=64)
        PaddedShape(molecules=32, atoms=27, bonds=64, pair_codes=64)
    """

    molecules: int
    atoms: int
    bonds: int
    pair_codes: int = PAIR_CODES


def _slots(counts: torch.Tensor, slot: int) -> torch.Tensor:
    """New row ``b * slot + i`` of item ``i`` of group ``b``, for groups of ``counts`` items laid end to end."""
    group = torch.repeat_interleave(torch.arange(len(counts)), counts)
    local = torch.arange(int(counts.sum())) - (torch.cumsum(counts, 0) - counts)[group]
    return group * slot + local


def _placed(values: torch.Tensor, rows: torch.Tensor, total: int, fill: float = 0) -> torch.Tensor:
    out = torch.full((total, *values.shape[1:]), fill, dtype=values.dtype)
    return out.index_copy_(0, rows, values)


def _pad_molecular(graph: dgl.DGLGraph, shape: PaddedShape) -> GraphTensors:
    b, n, e = shape.molecules, shape.atoms, shape.bonds
    counts, bonds = graph.batch_num_nodes().long(), graph.batch_num_edges().long()
    rows = _slots(counts, n)
    src, dst = (rows[t.long()] for t in graph.edges())
    edge_rows = _slots(bonds, e)
    real = torch.zeros(b, dtype=torch.int64)
    real[: len(counts)] = counts
    padding_node = torch.repeat_interleave(torch.arange(b) * n + real, e)  # each slot's first padding node
    src, dst = padding_node.clone().index_copy_(0, edge_rows, src), padding_node.clone().index_copy_(0, edge_rows, dst)
    ndata = {k: _placed(v, rows, b * n) for k, v in graph.ndata.items()}
    edata = {k: _placed(v, edge_rows, b * e) for k, v in graph.edata.items()}
    node_mask = _placed(torch.ones(len(rows), dtype=torch.bool), rows, b * n)
    return GraphTensors(src, dst, real, ndata, edata, b * n, torch.arange(b).repeat_interleave(n),
                        node_mask=node_mask, slot_size=n)


def _pad_relation(graph: dgl.DGLGraph, shape: PaddedShape, extra: int) -> GraphTensors:
    b, n = shape.molecules, shape.atoms + extra
    counts = graph.batch_num_nodes().long()
    rows = _slots(counts, n)
    src, dst = (rows[t.long()] for t in graph.edges())
    slot = dst * n + src % n  # the edge j -> i in block b: (b n + i) n + j
    pairs = b * n * n
    # off the real pairs: hop 0, bond class 0, distance 0, which every structure term scores finite
    # (the attention masks them out; a padding node's row, which has no real pair, stays finite)
    edata: Dict[str, torch.Tensor] = {k: _placed(v, slot, pairs) for k, v in graph.edata.items()}
    edge_mask = _placed(torch.ones(len(slot), dtype=torch.bool), slot, pairs)
    every = torch.arange(pairs)
    all_dst, all_src = every // n, (every // (n * n)) * n + every % n
    real = torch.zeros(b, dtype=torch.int64)
    real[: len(counts)] = counts
    node_graph, local = torch.arange(b).repeat_interleave(n), torch.arange(n).repeat(b)
    empty_rows = torch.bincount(dst, minlength=b * n) == 0
    geometry = BlockGeometry(b, n, pairs, node_graph, local, every // (n * n), every % (n * n), empty_rows, True, edge_mask)
    out = GraphTensors(all_src, all_dst, real, {k: _placed(v, rows, b * n) for k, v in graph.ndata.items()}, edata,
                       b * n, node_graph, geometry, True, node_mask=_placed(torch.ones(len(rows), dtype=torch.bool), rows, b * n),
                       slot_size=n)
    if "spd" in edata and "bond" in edata:
        out.pair_codes = _padded_codes(PairCodes.of(out), shape.pair_codes)
    return out


def _padded_codes(codes: PairCodes, rows: int) -> PairCodes:
    have = codes.spd.shape[0]
    if have > rows:
        raise PaddingOverflow(f"the batch's relation pairs have {have} (distance, bond, self) combinations, "
                              f"more than the {rows} its padded shape holds")
    fill = rows - have
    return PairCodes(codes.edge_code, torch.cat([codes.spd, codes.spd.new_zeros(fill)]),
                     torch.cat([codes.bond, codes.bond.new_zeros(fill)]), torch.cat([codes.is_self, codes.is_self.new_zeros(fill)]))


def pad_batch(batch: MoleculeBatch, shape: PaddedShape) -> MoleculeBatch:
    """``batch`` (of DGLGraphs, on the host) padded to ``shape`` (module docstring), as
    :class:`~dgl_graphtx.nn.graph_tensors.GraphTensors`; :class:`PaddingOverflow` if it does not fit.

    Example:
        >>> from dgl_graphtx.datasets import MoleculeDataset
        >>> ds = MoleculeDataset(["CCO", "c1ccccc1"], [[1.0], [2.0]], progress=False)
        >>> padded = pad_batch(ds.__getitems__([0, 1]), PaddedShape(molecules=4, atoms=8, bonds=16))
        >>> padded.graph.num_nodes(), padded.relation_graph.num_edges(), padded.mask.flatten().tolist()
        (32, 256, [True, True, False, False])
    """
    graph, relation = batch.graph, batch.relation_graph
    if isinstance(graph, GraphTensors) or isinstance(relation, GraphTensors):
        raise TypeError("pad_batch pads a batch of DGLGraphs (as a dataset's __getitems__ gives it)")
    counts, bonds = graph.batch_num_nodes(), graph.batch_num_edges()
    extra_nodes = relation.batch_num_nodes() - counts
    if len(counts) > shape.molecules or int(counts.max()) >= shape.atoms or int(bonds.max()) > shape.bonds:
        raise PaddingOverflow(f"a batch of {len(counts)} molecules of up to {int(counts.max())} atoms and {int(bonds.max())} "
                              f"bonds does not fit {shape}")
    if int(extra_nodes.min()) != int(extra_nodes.max()) or int(extra_nodes.max()) > 1:
        raise ValueError("a padded batch needs relation graphs with the same number of virtual nodes (0 or 1) per molecule")
    labels = torch.zeros(shape.molecules, *batch.labels.shape[1:], dtype=batch.labels.dtype)
    mask = torch.zeros(shape.molecules, *batch.mask.shape[1:], dtype=torch.bool)
    labels[: len(counts)], mask[: len(counts)] = batch.labels, batch.mask
    return MoleculeBatch(_pad_molecular(graph, shape), _pad_relation(relation, shape, int(extra_nodes.max())), labels, mask)


def real_molecules(batch: MoleculeBatch) -> int:
    """Molecules in ``batch`` that are not padding (read on the host, before the batch moves)."""
    graph = batch.graph
    if isinstance(graph, GraphTensors) and graph.slot_size:
        return int((graph.batch_num_nodes() > 0).sum())
    return batch.batch_size

