"""Attention of a trained model on one molecule, as dense ``[layer, head, query, key]`` matrices."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple, Union

import dgl
import numpy as np
import torch
from rdkit import Chem

from ..devices import resolve_compute
from ..errors import ConfigError, InvalidMoleculeError
from ..featurize import MoleculeFeaturizer
from ..featurize.molecule import MoleculeLike
from ..models import MoleculeModel
from ..nn.graph_tensors import on_device

#: Name accepted for the virtual node wherever a query node is chosen.
VIRTUAL = "virtual"


@dataclass
class AttentionMaps:
    """Attention weights of every layer and head over one molecule's relation graph.

    Attributes:
        weights: ``[L, H, N, N]``; ``weights[l, h, i, j]`` is how much query node ``i`` attends
            to key node ``j`` (rows sum to 1; pairs absent from the relation graph are 0).
        node_atoms: for each graph node, the index of its atom in the input molecule
            (``graph.ndata["input_atom"]`` when the featurizer records it, else the node index; a
            hydrogen the featurizer adds: a hydrogen of ``mol`` on the same atom); ``-1`` for the
            virtual node, which is the last node when present.
        mol: the RDKit molecule the atom indices refer to.
        smiles: the input as text.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("grpe", num_layers=2, hidden_dim=16, num_heads=2)
        >>> maps = attention_maps(build_model(p.model), MoleculeFeaturizer(p.featurizer, p.relation), "CCO")
        >>> maps.weights.shape, maps.node_atoms.tolist()
        ((2, 2, 4, 4), [0, 1, 2, -1])
    """

    weights: np.ndarray
    node_atoms: np.ndarray
    mol: Chem.Mol
    smiles: str

    @property
    def virtual_index(self) -> Optional[int]:
        """Node index of the virtual node, or ``None``."""
        hits = np.flatnonzero(self.node_atoms < 0)
        return int(hits[0]) if len(hits) else None

    def query_node(self, query: Union[int, str]) -> int:
        """Graph node of ``query``: an input atom index, or ``"virtual"``."""
        if query == VIRTUAL:
            if self.virtual_index is None:
                raise ConfigError(f"this model has no virtual node; choose an atom index as the query "
                                  f"(--query 0 .. {self.mol.GetNumAtoms() - 1} for {self.smiles})")
            return self.virtual_index
        atom = int(query)
        nodes = np.flatnonzero(self.node_atoms == atom)
        if not len(nodes):
            raise ConfigError(f"atom {atom} is not in {self.smiles} (atoms 0..{self.mol.GetNumAtoms() - 1})")
        return int(nodes[0])

    def atom_weights(self, query: Union[int, str], layer: int, head: Optional[int] = None) -> np.ndarray:
        """Weights the query puts on each input atom (in the molecule's atom order) in ``layer``,
        for ``head`` or averaged over heads (``None``)."""
        row = self.weights[layer, :, self.query_node(query), :]
        row = row.mean(0) if head is None else row[head]
        out = np.zeros(self.mol.GetNumAtoms())
        atoms = self.node_atoms >= 0
        out[self.node_atoms[atoms]] = row[atoms]
        return out


def attention_maps(
    model: MoleculeModel, featurizer: MoleculeFeaturizer, molecule: MoleculeLike, compute: str = "auto",
    graphs: Optional[Tuple[dgl.DGLGraph, dgl.DGLGraph]] = None,
) -> AttentionMaps:
    """Run ``model`` (in eval mode, on its device, along the ``compute`` path of
    :func:`~dgl_graphtx.devices.resolve_compute`) on one molecule and collect its attention as
    dense matrices. ``graphs``: the molecule's graph and relation graph already featurized, with
    the extra features the model reads (``Predictor.attention_maps`` computes them as ``predict``
    does); without them ``featurizer`` builds both, so a model that reads extra features is refused."""
    if graphs is None:
        config = model.config
        if config.molecule_features or config.atom_extra_features or config.kernel_references:
            raise ConfigError("this model reads extra features (descriptors, feature columns or kernel fingerprints), which "
                              "the featurizer alone does not compute: use Predictor(checkpoint).attention_maps(molecule)")
        try:
            graphs = featurizer(molecule)
        except InvalidMoleculeError as err:
            raise InvalidMoleculeError(f"cannot explain {molecule!r}: {err}") from None
    graph, relation = graphs
    device = next(model.parameters()).device
    compute = resolve_compute(compute, device)
    with model.eval_mode(), torch.no_grad():
        _, attentions = model(on_device(graph, device, compute), on_device(relation, device, compute, blocks=True),
                              return_attention=True)
    n = relation.num_nodes()
    src, dst = (t.cpu().numpy() for t in relation.edges())
    weights = np.zeros((len(attentions), attentions[0].shape[1], n, n))
    for layer, attn in enumerate(attentions):
        weights[layer][:, dst, src] = attn.detach().cpu().double().numpy().T
    atoms = graph.ndata["input_atom"].cpu().numpy() if "input_atom" in graph.ndata else np.arange(graph.num_nodes())
    mol = molecule if isinstance(molecule, Chem.Mol) else Chem.MolFromSmiles(molecule)
    if featurizer.config.explicit_hydrogens:
        mol = Chem.AddHs(mol)
        atoms = _added_hydrogens_mapped(graph, atoms, mol)
    node_atoms = np.concatenate([atoms, -np.ones(n - graph.num_nodes(), dtype=np.int64)]).astype(np.int64)
    return AttentionMaps(weights, node_atoms, mol, molecule if isinstance(molecule, str) else Chem.MolToSmiles(molecule))


def _added_hydrogens_mapped(graph: dgl.DGLGraph, atoms: np.ndarray, mol: Chem.Mol) -> np.ndarray:
    """``atoms`` with each hydrogen the featurizer added (``-1``) given a hydrogen of ``mol``
    (``Chem.AddHs`` of the input) bonded to the same input atom, so that only the virtual node is
    ``-1``. Hydrogens of one atom are interchangeable in the graph, so they are taken in order."""
    atoms = atoms.astype(np.int64).copy()
    src, dst = (t.cpu().numpy() for t in graph.edges())
    free = {a.GetIdx(): [h.GetIdx() for h in a.GetNeighbors() if h.GetAtomicNum() == 1 and h.GetIdx() not in atoms]
            for a in mol.GetAtoms()}
    for node in np.flatnonzero(atoms < 0):
        heavy = atoms[dst[src == node]]
        atoms[node] = free[int(heavy[heavy >= 0][0])].pop(0)
    return atoms
