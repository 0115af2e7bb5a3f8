"""What every molecule model shares: input encoding, readout, output head, target scaling."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator, List, NamedTuple, Optional, Tuple, cast

import torch
from torch import nn

from ..errors import ConfigError
from ..featurize.molecule import EXTRA_ATOM_FEATURES, EXTRA_MOLECULE_FEATURES, KERNEL_FINGERPRINTS
from ..nn import RelationAttention
from ..nn import graph_ops as ops
from ..nn.graph_tensors import GraphLike
from .atom_reference import AtomReference
from .config import ModelConfig
from .encoders import FeatureEncoder
from ..nn import lean
from .kernel import PROBABILITY_BOUNDS, FingerprintKernel
from .levels import LevelHeads, LevelOptions, LevelOutputs
from .molecule_sets import MoleculeSetOptions, encode_rows

#: Encoded node states of a batch: (atom states ``[N, d]``, virtual-node states ``[B, d]`` or
#: ``None``, attention weights ``[E, H]`` of each layer when asked for, else ``[]``).
Encoded = Tuple[torch.Tensor, Optional[torch.Tensor], List[torch.Tensor]]


class AtomMask(NamedTuple):
    """Atoms hidden from a model (masked-atom pretraining, :mod:`~dgl_graphtx.models.masked_atoms`):
    the embedded input of every atom where ``atoms`` (bool ``[N]``) is set is replaced by
    ``embedding`` (``[d]``) before anything else is added to it.

    Example:
        >>> mask = AtomMask(torch.tensor([False, True]), torch.zeros(4))
        >>> int(mask.atoms.sum()), tuple(mask.embedding.shape)
        (1, (4,))
    """

    atoms: torch.Tensor
    embedding: torch.Tensor


class NoOutputs(nn.Module):
    """The molecule-level head of a model whose targets are all atom- or bond-level: ``[B, 0]``.

    Example:
        >>> NoOutputs()(torch.ones(3, 8)).shape
        torch.Size([3, 0])
    """

    def forward(self, readout: torch.Tensor) -> torch.Tensor:
        return readout.new_zeros(readout.shape[0], 0)


class MoleculeModel(nn.Module):
    """Base class: subclasses implement :meth:`encode`; this class embeds the input atoms, pools
    node states into one vector per molecule, applies the head, and stores the target statistics.

    ``forward`` returns outputs in the training space (standardised targets for regression,
    logits for classification); :meth:`predict` returns targets in their own units, or
    probabilities. With ``config.atom_reference`` the regression outputs include the molecule's
    per-element reference values (:attr:`atom_reference`, in units of ``target_std``), so the
    head learns the standardised rest. A model with a fitted fingerprint kernel
    (``config.kernel_references``, :mod:`~dgl_graphtx.models.kernel`) blends its point outputs with
    the kernel model's, read from the molecules' count fingerprints (``ndata["kernel_fp"]``).
    """

    target_mean: torch.Tensor  # buffers, registered in __init__
    target_std: torch.Tensor
    blocks: nn.ModuleList  # a subclass's blocks, each with an ``attention`` layer

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden_dim
        self.atom_encoder = FeatureEncoder(config.atom_feature_dims, d, categorical=config.atom_features == "ogb")
        self.rwse_encoder = lean.Linear(config.rwse_steps, d) if config.rwse_steps else None
        self.rwse_norm = lean.BatchNorm1d(config.rwse_steps) if config.rwse_norm else None
        self.input_mlp = (
            nn.Sequential(lean.Linear(d, d), nn.GELU(), lean.Linear(d, d)) if config.input_mlp else None
        )
        self.atom_extra_encoder = lean.Linear(config.atom_extra_features, d) if config.atom_extra_features else None
        self.head = self.new_head(config.output_width)
        #: The atom and bond heads of a model with atom- or bond-level targets (``config.levels``).
        self.levels = LevelHeads(config) if config.levels.any else None
        #: The backbones of a row's molecules after the first, with ``config.molecules.backbones == "separate"``.
        self.molecule_encoders = nn.ModuleList(self._molecule_encoder() for _ in range(config.molecules.count - 1)
                                               if config.molecules.backbones == "separate")
        self.atom_reference = AtomReference(config.atom_features, config.num_tasks) if config.atom_reference else None
        self.kernel = (FingerprintKernel(config.kernel_references, config.kernel_size, config.num_tasks,
                                         probabilities=config.kernel_probabilities, logit_blend=config.kernel_logit_blend,
                                         segments=config.kernel_segments)
                       if config.kernel_references else None)
        self.register_buffer("target_mean", torch.zeros(config.num_tasks))
        self.register_buffer("target_std", torch.ones(config.num_tasks))

    def _molecule_encoder(self) -> "MoleculeModel":
        """A backbone of this model's architecture for one molecule of a row (no head of its own)."""
        single = dataclasses.replace(self.config, molecules=MoleculeSetOptions(), levels=LevelOptions(), num_tasks=1,
                                     uncertainty_head="none", molecule_features=0, atom_reference=False, kernel_references=0,
                                     kernel_probabilities=False, kernel_logit_blend=False)
        encoder = type(self)(single)
        encoder.head = NoOutputs()  # the row's head reads all molecules
        return encoder

    def new_head(self, outputs: int) -> nn.Module:
        """A freshly initialised output head reading the pooled embedding (of each molecule of a row,
        combined) and the molecule-level extra features for ``outputs`` values (``config.output_width``)."""
        d = self.config.hidden_dim
        width = self.config.molecules.readout_width(d) + self.config.molecule_features
        if outputs == 0:  # atom- or bond-level targets only
            return NoOutputs()
        if self.config.head_layers == 1:
            return lean.Linear(width, outputs)
        return nn.Sequential(lean.Linear(width, d), nn.GELU(), lean.Linear(d, outputs))

    def _node_input(self, graph: GraphLike, key: str, width: int, what: str) -> torch.Tensor:
        if key not in graph.ndata:
            raise ConfigError(f"model expects {width} {what} extra features in ndata[{key!r}]: build the data "
                              "with the same extra features (see dgl_graphtx.datasets.extra_features)")
        values = graph.ndata[key]
        if values.shape[-1] != width:
            raise ConfigError(f"model expects {width} {what} extra features, the data holds {values.shape[-1]}")
        return values.to(next(self.parameters()).dtype)

    def molecule_inputs(self, graph: GraphLike) -> torch.Tensor:
        """Molecule-level extra features ``[B, F]``: the row on each molecule's first atom."""
        values = self._node_input(graph, EXTRA_MOLECULE_FEATURES, self.config.molecule_features, "molecule-level")
        return values[ops.first_nodes(graph)]

    def readout(self, graph: GraphLike, atoms: torch.Tensor, virtual: Optional[torch.Tensor]) -> torch.Tensor:
        """What the head reads ``[B, d + F]``: :meth:`pool` and the molecule-level extra features."""
        pooled = self.pool(graph, atoms, virtual)
        if not self.config.molecule_features:
            return pooled
        return torch.cat([pooled, self.molecule_inputs(graph).to(pooled.dtype)], dim=-1)

    def structural_encoding(self, graph: GraphLike) -> Optional[torch.Tensor]:
        """The random-walk encodings ``[N, k]`` of ``ndata["rwse"]`` (BatchNorm-ed with
        ``config.rwse_norm``), or ``None`` when the model uses none."""
        if self.rwse_encoder is None:
            return None
        if "rwse" not in graph.ndata:
            raise ConfigError(
                f"model expects random-walk encodings: featurize with FeaturizerConfig(rwse_steps={self.config.rwse_steps})"
            )
        rwse = graph.ndata["rwse"].to(self.rwse_encoder.weight.dtype)
        return lean.batch_norm(self.rwse_norm, rwse, ops.node_mask(graph)) if self.rwse_norm is not None else rwse

    def check_inputs(self, graph: GraphLike) -> None:
        """Raise :class:`~dgl_graphtx.errors.ConfigError` if a categorical feature of ``graph``
        lies outside the model's embeddings (damaged data, or other featurization settings). The
        forward pass does not check (a check would wait for the device): loaders run this on the
        host, before a batch goes to a GPU.

        Example:
            >>> from dgl_graphtx.featurize import smiles_to_graphs
            >>> from dgl_graphtx.models import ModelConfig, build_model
            >>> build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)).check_inputs(smiles_to_graphs("CCO")[0])
        """
        self.atom_encoder.check(graph.ndata["feat"])

    def encode_atoms(self, graph: GraphLike, rwse: Optional[torch.Tensor] = None, masked: Optional[AtomMask] = None) -> torch.Tensor:
        """Input node states ``[N, d]`` from ``ndata["feat"]`` (the ``masked`` atoms' replaced by
        the mask's embedding) plus the encoded ``rwse`` (default: :meth:`structural_encoding`)."""
        x = self.atom_encoder(graph.ndata["feat"])
        if masked is not None:
            x = torch.where(masked.atoms.unsqueeze(-1), masked.embedding.to(x.dtype), x)
        if self.atom_extra_encoder is not None:
            x = x + self.atom_extra_encoder(self._node_input(graph, EXTRA_ATOM_FEATURES, self.config.atom_extra_features, "atom-level"))
        if self.rwse_encoder is not None:
            rwse = self.structural_encoding(graph) if rwse is None else rwse
            x = x + self.rwse_encoder(rwse)
        return self.input_mlp(x) if self.input_mlp is not None else x

    def encode(self, graph: GraphLike, relation_graph: GraphLike, masked: Optional[AtomMask] = None,
               attention: bool = False) -> Encoded:
        """Node states after the model's layers, with the ``masked`` atoms' inputs hidden
        (:meth:`encode_atoms`), and each layer's attention weights when ``attention`` (an empty
        list otherwise); implemented by subclasses."""
        raise NotImplementedError

    def forward(
        self, graph: GraphLike, relation_graph: GraphLike, return_attention: bool = False,
        distribution: bool = False, levels: bool = False,
    ) -> Any:
        """Outputs ``[B, T]`` (standardised / logits); with ``return_attention`` also the per-layer
        attention weights over the relation graph's edges. With ``distribution`` the whole output
        of an uncertainty head, ``[B, k * T]`` (see :mod:`dgl_graphtx.uncertainty.heads`). With
        ``levels`` (a model with atom- or bond-level targets) the outputs of every level, a
        :class:`~dgl_graphtx.models.levels.LevelOutputs`. A batch of rows of several molecules
        (``config.molecules``) gives one output per row."""
        if self.config.molecules.several:
            rows = encode_rows(self, graph, relation_graph, attention=return_attention)
            out = self.finish_outputs(graph, self.head(rows.readout), distribution)
            return (out, rows.attentions) if return_attention else out
        atoms, virtual, attentions = self.encode(graph, relation_graph, attention=return_attention)
        molecules = self.head_outputs(graph, atoms, virtual, distribution)
        outputs = LevelOutputs(molecules, *self.levels(graph, atoms)) if levels and self.levels is not None else molecules
        return (outputs, attentions) if return_attention else outputs

    def head_outputs(self, graph: GraphLike, atoms: torch.Tensor, virtual: Optional[torch.Tensor],
                     distribution: bool = False) -> torch.Tensor:
        """What :meth:`forward` returns from the encoded node states (:meth:`encode`): the head
        over the readout (or summed over atoms, ``atomwise``), plus the atom references."""
        if self.config.readout == "atomwise":
            out = ops.readout(graph, self.head(atoms), "sum")
        else:
            out = self.head(self.readout(graph, atoms, virtual))
        return self.finish_outputs(graph, out, distribution)

    def finish_outputs(self, graph: GraphLike, out: torch.Tensor, distribution: bool = False) -> torch.Tensor:
        """The head's outputs ``out`` as :meth:`forward` returns them: the point outputs (unless
        ``distribution``), plus the atom references, blended with the fingerprint kernel."""
        out = out if distribution else out[:, : self.config.prediction_width]
        if self.atom_reference is not None:
            reference = self.atom_reference(graph).to(out.dtype) / self.target_std
            out = torch.cat([out[:, : self.config.num_tasks] + reference, out[:, self.config.num_tasks:]], dim=1)
        if self.kernel is not None:
            out = torch.cat([self.with_kernel(graph, out[:, : self.config.num_tasks]), out[:, self.config.num_tasks:]], dim=1)
        return out

    def with_kernel(self, graph: GraphLike, outputs: torch.Tensor) -> torch.Tensor:
        """The point outputs ``[B, T]`` (training space) blended with the fingerprint kernel's
        predictions, in target units (for classification in logits, or in probabilities for kernels
        fitted before log-linear pooling), and mapped back."""
        assert self.kernel is not None  # called only when the model has one
        fingerprints = self._node_input(graph, KERNEL_FINGERPRINTS, self.config.kernel_size, "fingerprint-kernel")[ops.first_nodes(graph)]
        if self.config.task == "classification":
            if self.kernel.logit_blend:
                return self.kernel.blend(outputs, fingerprints)
            return torch.logit(self.kernel.blend(torch.sigmoid(outputs), fingerprints).clamp(*PROBABILITY_BOUNDS))
        blended = self.kernel.blend(outputs * self.target_std + self.target_mean, fingerprints)
        return (blended - self.target_mean) / self.target_std

    def attach_kernel(self, kernel: FingerprintKernel) -> None:
        """Give the model a fitted fingerprint kernel (its config records the kernel's size)."""
        references, size = kernel.references.shape
        self.config = dataclasses.replace(self.config, kernel_references=references, kernel_size=size,
                                          kernel_probabilities=kernel.platt is not None, kernel_logit_blend=kernel.logit_blend,
                                          kernel_segments=kernel.segments)
        self.kernel = kernel.to(self.target_mean.device)

    def node_outputs(self, graph: GraphLike, relation_graph: GraphLike) -> torch.Tensor:
        """Per-node outputs ``[N, T]`` (training space), no readout: the head applied to every
        node's final state, for node classification or regression on any DGLGraph.

        The graph needs ``ndata["feat"]`` (``atom_features="canonical"`` projects any float
        features of width ``atom_feature_dims[0]``) and, for Gradformer, ``edata["feat"]``; the
        relation graph comes from :func:`~dgl_graphtx.relation_graph.build_relation_graph`.

        Example:
            >>> import torch, dgl
            >>> from dgl_graphtx.models import GraphTransformer, ModelConfig
            >>> from dgl_graphtx.relation_graph import RelationConfig, build_relation_graph
            >>> g = dgl.graph((torch.arange(99), torch.arange(1, 100)))  # any graph with coordinates
            >>> g.ndata["feat"], g.ndata["pos"] = torch.randn(100, 5), torch.randn(100, 3) * 4
            >>> cfg = ModelConfig(variant="moire", num_layers=2, hidden_dim=16, num_heads=4, num_tasks=3,
            ...                   atom_features="canonical", atom_feature_dims=(5,), virtual_node=False, readout="mean")
            >>> rel = build_relation_graph(g, RelationConfig("radius", radius=3.0), vocab=cfg.bond_vocab)
            >>> GraphTransformer(cfg)(g, rel).shape, GraphTransformer(cfg).node_outputs(g, rel).shape
            (torch.Size([1, 3]), torch.Size([100, 3]))
        """
        nodes, _, _ = self.encode(graph, relation_graph)
        return self.head(nodes)[:, : self.config.prediction_width]

    @torch.no_grad()
    def predict_nodes(self, graph: GraphLike, relation_graph: GraphLike) -> torch.Tensor:
        """Per-node predictions ``[N, T]`` in target units (or probabilities), in eval mode."""
        with self.eval_mode():
            return self.to_target_space(self.node_outputs(graph, relation_graph))

    def pool(self, graph: GraphLike, atoms: torch.Tensor, virtual: Optional[torch.Tensor]) -> torch.Tensor:
        """One vector per molecule ``[B, d]``: the virtual node's state, or pooled atom states
        (summed for the ``atomwise`` readout)."""
        if self.config.readout == "virtual":
            assert virtual is not None  # the encoders give the virtual node's state with this readout
            return virtual
        return ops.readout(graph, atoms, "sum" if self.config.readout == "atomwise" else self.config.readout)

    @torch.no_grad()
    def embed(self, graph: GraphLike, relation_graph: GraphLike) -> Tuple[torch.Tensor, torch.Tensor]:
        """The pooled representation, in eval mode: ``(molecules [B, d], atoms [N, d])`` (the head
        reads it together with the molecule-level extra features, if the model has any).

        Example:
            >>> from dgl_graphtx.featurize import smiles_to_graphs
            >>> from dgl_graphtx.models import ModelConfig, build_model
            >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2))
            >>> g, rel = smiles_to_graphs("CCO")
            >>> [tuple(t.shape) for t in model.embed(g, rel)]
            [(1, 16), (3, 16)]
        """
        with self.eval_mode():
            atoms, virtual, _ = self.encode(graph, relation_graph)
            return self.pool(graph, atoms, virtual), atoms

    def set_target_normalization(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        """Store per-task mean and standard deviation of the (regression) training targets."""
        self.target_mean.copy_(torch.as_tensor(mean, dtype=self.target_mean.dtype))
        self.target_std.copy_(torch.as_tensor(std, dtype=self.target_std.dtype).clamp_min(1e-8))

    def set_atom_reference(self, values: torch.Tensor) -> None:
        """Store the per-element reference values ``[C, T]`` in target units (see
        :func:`~dgl_graphtx.models.atom_reference.fit_atom_references`); the target statistics
        (:meth:`set_target_normalization`) are then those of the labels minus the references."""
        if self.atom_reference is None:
            raise ConfigError("this model has no atom reference: build it with atom_reference=True")
        self.atom_reference.values.copy_(torch.as_tensor(values, dtype=self.atom_reference.values.dtype))

    def normalize_targets(self, labels: torch.Tensor) -> torch.Tensor:
        """Targets in training space (identity for classification)."""
        if self.config.task != "regression":
            return labels
        return (labels - self.target_mean) / self.target_std

    def to_target_space(self, output: torch.Tensor) -> torch.Tensor:
        """Map :meth:`forward` outputs to target units (regression) or probabilities (multiclass:
        ``[B, T * K]``, the ``K`` class probabilities of each target side by side)."""
        if self.config.task == "classification":
            return torch.sigmoid(output)
        if self.config.task == "multiclass":
            k = self.config.num_classes
            return torch.softmax(output.unflatten(1, (-1, k)), dim=-1).flatten(1)  # no len(): sizes stay symbolic in an export
        return output * self.target_std + self.target_mean

    @torch.no_grad()
    def predict(self, graph: GraphLike, relation_graph: GraphLike) -> torch.Tensor:
        """Predictions ``[B, T]`` in target units (or probabilities), in eval mode."""
        with self.eval_mode():
            return self.to_target_space(self(graph, relation_graph))

    @contextlib.contextmanager
    def eval_mode(self) -> Iterator["MoleculeModel"]:
        """Switch to eval mode for the ``with`` block and back to the mode it was in after.

        Example:
            >>> from dgl_graphtx.models import ModelConfig, build_model
            >>> model = build_model(ModelConfig(num_layers=1, hidden_dim=16, num_heads=2)).train()
            >>> with model.eval_mode():
            ...     model.training
            False
            >>> model.training
            True
        """
        was_training = self.training
        self.eval()
        try:
            yield self
        finally:
            self.train(was_training)

    def attention_layers(self) -> List[RelationAttention]:
        """The model's attention layers, first to last: what attention maps and the learned
        structure (``dgl_graphtx.insight``) read.

        Example:
            >>> from dgl_graphtx.models import ModelConfig, build_model
            >>> model = build_model(ModelConfig(variant="moire", num_layers=2, hidden_dim=16, num_heads=2))
            >>> [type(layer.structure).__name__ for layer in model.attention_layers()]
            ['MoireTerm', 'MoireTerm']
        """
        return [cast(RelationAttention, block.attention) for block in self.blocks]
