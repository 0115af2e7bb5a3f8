"""A trained model as one file that runs without DGL and without this package: ``torch.export`` of
the plain-tensor compute path (``.pt2``), or ONNX where its operators allow (``.onnx``, needs the
``onnx`` extra), with the portable featurizer written beside it
(:mod:`~dgl_graphtx.inference.portable`, as ``graphtx_portable.py``).

The exported program is the model's own forward pass on
:class:`~dgl_graphtx.nn.graph_tensors.GraphTensors` built from plain tensors (the inputs of
:data:`~dgl_graphtx.inference.portable.INPUTS`), every size symbolic, attention through the
same dense per-molecule blocks as the library's (their geometry computed in the program), then
:meth:`~dgl_graphtx.models.MoleculeModel.to_target_space`. What the portable featurizer cannot
compute, or the program cannot express, is refused with one line (:func:`unsupported`): 3-D
coordinates, dgllife's canonical atom features, a virtual node, extra features (the fingerprint
kernel's count fingerprints excepted: the portable featurizer computes them), rows of several
molecules, atom- and bond-level outputs.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import pandas as pd
import torch
from torch import nn
from torch.export import Dim

from .._version import __version__
from ..atomic_io import atomic_path, check_writable
from ..checkpoint import LoadedCheckpoint, load_checkpoint
from ..datasets import freesolv_path
from ..datasets.extra_features import FittedExtraFeatures
from ..datasets.featurized import featurize_and_pack
from ..errors import ConfigError
from ..featurize import MoleculeFeaturizer
from ..featurize.descriptors import kernel_parts
from ..featurize.molecule import KERNEL_FINGERPRINTS
from ..models import MoleculeModel
from ..nn import graph_ops as ops
from ..nn.dense_blocks import BlockGeometry
from ..nn.graph_tensors import GraphLike, GraphTensors
from ..nn.tracing import CAN_EXPORT
from . import portable
from .checkpoint_paths import single_checkpoint

PathLike = Union[str, Path]
#: Formats by the suffix of the output.
FORMATS = (".pt2", ".onnx")
#: The name the portable featurizer gets beside the exported model.
PORTABLE_FILE = "graphtx_portable.py"
#: How many FreeSolv molecules trace the program and check it after writing.
CHECK_MOLECULES = 64
#: What an ONNX export needs beyond PyTorch: the exporter's packages and the runtime that checks the file.
ONNX_PACKAGES = ("onnx", "onnxscript", "onnxruntime")


class PlainTensorModel(nn.Module):
    """``model`` reading the program's inputs (:data:`~dgl_graphtx.inference.portable.INPUTS`) and
    giving its predictions in target units (probabilities for classification) ``[B, outputs]``.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2)
        >>> settings = portable.Settings(False, p.featurizer.rwse_steps, None)
        >>> inputs = portable.batch([portable.featurize(s, settings) for s in ["CCO", "c1ccccc1"]])
        >>> PlainTensorModel(build_model(p.model).eval())(*inputs).shape
        torch.Size([2, 1])
    """

    def __init__(self, model: MoleculeModel) -> None:
        super().__init__()
        self.model = model
        if model.kernel is not None:
            model.kernel.fix_levels()

    def forward(self, atom_features: torch.Tensor, random_walk: torch.Tensor, bond_source: torch.Tensor, bond_target: torch.Tensor,
                bond_features: torch.Tensor, pair_key: torch.Tensor, pair_query: torch.Tensor, pair_hops: torch.Tensor,
                pair_bond_class: torch.Tensor, kernel_counts: torch.Tensor, atom_molecule: torch.Tensor,
                molecule_atoms: torch.Tensor, block_slots: torch.Tensor) -> torch.Tensor:
        n = atom_features.shape[0]
        nodes = {"feat": atom_features, "rwse": random_walk}
        if self.model.kernel is not None:  # each molecule's counts on its atoms, as the library's batches hold them
            nodes[KERNEL_FINGERPRINTS] = kernel_counts[atom_molecule]
        graph = GraphTensors(bond_source, bond_target, molecule_atoms, nodes, {"feat": bond_features}, n, atom_molecule, blocks_known=True)
        pairs = {"spd": pair_hops, "bond": pair_bond_class}
        relation = GraphTensors(pair_key, pair_query, molecule_atoms, {"is_virtual": torch.zeros_like(atom_molecule, dtype=torch.bool)},
                                pairs, n, atom_molecule,
                                dense_blocks(atom_molecule, molecule_atoms, pair_key, pair_query, block_slots), True)
        return self.model.to_target_space(self.model(graph, relation))


def dense_blocks(atom_molecule: torch.Tensor, molecule_atoms: torch.Tensor, pair_key: torch.Tensor, pair_query: torch.Tensor,
                 block_slots: torch.Tensor) -> BlockGeometry:
    """The dense-block geometry of a batch of the program's inputs, in tensor operations alone: its
    attention runs on ``[B, H, n, n]`` blocks (``n``, the largest molecule's atoms, is the length
    of ``block_slots``), as the library's does for molecules. Every atom has its self pair (every
    relation mode keeps it), so no row of a block is empty."""
    size = block_slots.shape[0]
    starts = torch.cumsum(molecule_atoms, 0) - molecule_atoms
    local = torch.arange(atom_molecule.shape[0], device=atom_molecule.device) - starts[atom_molecule]
    return BlockGeometry(molecule_atoms.shape[0], size, pair_key.shape[0], atom_molecule, local, atom_molecule[pair_query],
                         local[pair_query] * size + local[pair_key], torch.zeros_like(atom_molecule, dtype=torch.bool), False)


def plain_inputs(graph: GraphLike, relation_graph: GraphLike) -> Tuple[torch.Tensor, ...]:
    """The program's inputs for a batch featurized by the library (a molecular graph and its
    relation graph, without a virtual node)."""
    graph, relation = (g if isinstance(g, GraphTensors) else GraphTensors.from_graph(g) for g in (graph, relation_graph))
    walk = graph.ndata["rwse"] if "rwse" in graph.ndata else torch.zeros(graph.num_nodes(), 0)
    counts = graph.batch_num_nodes()
    kernel = (graph.ndata[KERNEL_FINGERPRINTS][ops.first_nodes(graph)].float() if KERNEL_FINGERPRINTS in graph.ndata
              else torch.zeros(len(counts), 0))
    return (graph.ndata["feat"], walk, *graph.edges(), graph.edata["feat"], *relation.edges(), relation.edata["spd"],
            relation.edata["bond"], kernel, graph.node_graph, counts, torch.arange(int(counts.max())))


def unsupported(loaded: LoadedCheckpoint) -> Optional[str]:
    """Why the model of ``loaded`` cannot be exported, or ``None``.

    Example:
        >>> from dgl_graphtx.checkpoint import CheckpointMeta
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("grpe", num_layers=1)
        >>> loaded = LoadedCheckpoint(build_model(p.model), CheckpointMeta(p.featurizer, p.relation, ["y"]), "0.1.0")
        >>> unsupported(loaded)  # doctest: +ELLIPSIS
        'it attends through a virtual node (relation complete+vn), which the exported program does not build; ...'
    """
    featurizer, relation = loaded.meta.featurizer, loaded.meta.relation
    if featurizer.atom_features != "ogb":
        return (f"it reads {featurizer.atom_features!r} atom features, which the portable featurizer does not compute; "
                "export a model trained with atom_features='ogb' (the default)")
    if featurizer.needs_coordinates or relation.needs_coordinates:
        return "it reads 3-D coordinates, which the portable featurizer does not compute; export a model of the molecular graph"
    if relation.virtual_node:
        return (f"it attends through a virtual node (relation {relation}), which the exported program does not build; "
                "export a model trained without one")
    if loaded.model.config.atom_extra_features or loaded.model.config.molecule_features:
        return ("it reads extra features (--features-cols, descriptors or atom features), which the portable featurizer does not "
                "compute; export a model trained with --features-generators none (and without --features-cols)")
    config = loaded.model.config
    if config.molecules.several:
        return (f"it reads rows of {config.molecules.count} molecules (--smiles-cols), which the exported program's one-molecule "
                "inputs do not hold; predict with the checkpoint")
    if config.levels.any:
        return ("it predicts atom- or bond-level targets (--atom-targets, --bond-targets), which the exported program does not "
                "give; predict with the checkpoint")
    return None


def output_columns(loaded: LoadedCheckpoint) -> List[str]:
    """The names of the program's output columns: the targets, or ``<target>_prob_<k>`` (multiclass)."""
    config, names = loaded.model.config, list(loaded.meta.target_names)
    if config.task != "multiclass":
        return names
    return [f"{name}_prob_{k}" for name in names for k in range(config.num_classes)]


def kernel_settings(loaded: LoadedCheckpoint) -> Optional[List[List[Any]]]:
    """The count fingerprints of the model's fingerprint kernel, each ``[name, *options]`` in the
    order of their fields (:attr:`portable.Settings.kernel`), or ``None`` without one."""
    if loaded.model.kernel is None:
        return None
    spec = FittedExtraFeatures.from_dict(loaded.meta.extra.extra_features).spec.kernel if loaded.meta.extra.extra_features else ""
    if not spec:
        raise ConfigError("the model has a fingerprint kernel but its checkpoint names no count fingerprint for it")
    return [[part.name, *(getattr(part, f.name) for f in dataclasses.fields(part))] for part in kernel_parts(spec)]


def metadata(loaded: LoadedCheckpoint) -> Dict[str, Any]:
    """What the portable loader needs to know, stored in the exported file."""
    relation = loaded.meta.relation
    return {"format": portable.FORMAT, "library_version": __version__, "torch_version": torch.__version__,
            "columns": output_columns(loaded), "task": loaded.model.config.task,
            "featurizer": {"explicit_hydrogens": loaded.meta.featurizer.explicit_hydrogens,
                           "random_walk_steps": loaded.meta.featurizer.rwse_steps,
                           "hops": relation.hops if relation.mode == "hops" else None, "kernel": kernel_settings(loaded)},
            "inputs": list(portable.INPUTS), "outputs": ["predictions"]}


def dynamic_shapes() -> Tuple[Dict[int, Any], ...]:
    """The sizes of the inputs that vary: atoms, bond edges (0 for one atom), pairs, molecules, the
    largest molecule's atoms."""
    atoms, bonds, pairs, molecules = Dim("atoms", min=1), Dim("bond_edges", min=0), Dim("pairs", min=1), Dim("molecules", min=1)
    slots = Dim("block_size", min=1)
    by_input = {"atom_features": atoms, "random_walk": atoms, "bond_source": bonds, "bond_target": bonds, "bond_features": bonds,
                "pair_key": pairs, "pair_query": pairs, "pair_hops": pairs, "pair_bond_class": pairs, "kernel_counts": molecules,
                "atom_molecule": atoms, "molecule_atoms": molecules, "block_slots": slots}
    return tuple({0: by_input[name]} for name in portable.INPUTS)


class ExportSummary(NamedTuple):
    """What :func:`export_model` wrote: the model file, the portable featurizer beside it, the
    file's size, and the largest difference between the file's predictions (portable featurizer)
    and the checkpoint's (library featurizer) on :data:`CHECK_MOLECULES` FreeSolv molecules."""

    path: Path
    featurizer: Path
    size: int
    max_difference: float


def export_model(checkpoint: PathLike, out: PathLike) -> ExportSummary:
    """Export the model of ``checkpoint`` (a file or a run folder) to ``out``: ``.pt2``
    (``torch.export``) or ``.onnx``; ``graphtx_portable.py`` is written beside it. The written file
    is loaded back and checked against the checkpoint before this returns.

    Example:
        >>> import tempfile
        >>> from dgl_graphtx.checkpoint import CheckpointMeta, save_checkpoint
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> p = get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2)
        >>> folder = Path(tempfile.mkdtemp())
        >>> path = save_checkpoint(folder / "best.pt", build_model(p.model), CheckpointMeta(p.featurizer, p.relation, ["logS"]))
        >>> done = export_model(path, folder / "model.pt2")
        >>> done.featurizer.name, done.max_difference < 1e-5
        ('graphtx_portable.py', True)
    """
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise ConfigError(f"the exported file must end in {' or '.join(FORMATS)} (torch.export or ONNX), got {out.name}")
    missing = [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None] if out.suffix.lower() == ".onnx" else []
    if missing:
        raise ConfigError(f'ONNX export needs the onnx extra ({", ".join(missing)} missing here): pip install "dgl_graphtx[onnx]" '
                          "(or export to .pt2)")
    check_writable(out)
    path = single_checkpoint(checkpoint, "export")
    loaded = load_checkpoint(path)
    problem = unsupported(loaded)
    if problem:
        raise ConfigError(f"cannot export {path}: {problem}")
    if not CAN_EXPORT:  # after the model's own refusals, which a newer torch does not lift
        raise ConfigError(f"dgl-graphtx export needs torch 2.6 or newer (torch.compiler.is_exporting); this is torch {torch.__version__}")
    model = loaded.model.cpu().float().eval()
    smiles = [str(s) for s in pd.read_csv(freesolv_path())["smiles"][:CHECK_MOLECULES]]
    done = featurize_and_pack(MoleculeFeaturizer(loaded.meta.featurizer, loaded.meta.relation), smiles)
    assert done.graphs is not None and done.relations is not None  # FreeSolv molecules featurize
    if loaded.meta.extra.extra_features:  # the fingerprint kernel's counts, as the library computes them
        FittedExtraFeatures.from_dict(loaded.meta.extra.extra_features).compute_and_attach(done.graphs, smiles, None, smiles)
    index = torch.arange(len(done.rows))
    graph, relation = done.graphs.batch(index), done.relations.batch(index)
    wrapped = PlainTensorModel(model).eval()
    with torch.no_grad():
        program = torch.export.export(wrapped, plain_inputs(graph, relation), dynamic_shapes=dynamic_shapes())
    meta = json.dumps(metadata(loaded))
    if out.suffix.lower() == ".onnx":
        _write_onnx(program, out, meta)
    else:
        archive = io.BytesIO()  # torch names the archive by its file name: written whole, then renamed in place
        torch.export.save(program, archive, extra_files={portable.METADATA: meta})
        with atomic_path(out) as tmp:
            tmp.write_bytes(archive.getvalue())
    beside = out.with_name(PORTABLE_FILE)
    with atomic_path(beside) as tmp:
        shutil.copyfile(portable.__file__, tmp)
    reloaded = portable.load(out)
    found = reloaded.run(portable.batch([portable.featurize(s, reloaded.settings) for s in smiles]))
    expected = model.predict(graph, relation)
    return ExportSummary(out, beside, out.stat().st_size, float((found - expected).abs().max()))


def _write_onnx(program: torch.export.ExportedProgram, out: Path, meta: str) -> None:
    """The exported program as ONNX at ``out``, with the metadata; one line when ONNX cannot
    express it or its packages are missing."""
    exporter_logs = [logging.getLogger(name) for name in ("torch.onnx", "onnx_ir", "onnxscript")]
    levels = [log.level for log in exporter_logs]
    try:
        for log in exporter_logs:  # their notes (torchvision missing, attribute types defaulted) are not the user's business
            log.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            onnx_program = torch.onnx.export(program, input_names=list(portable.INPUTS), output_names=["predictions"], dynamo=True,
                                             verbose=False)
    except Exception as err:  # the exporter raises many kinds; what matters is that ONNX cannot express this program
        reason = " ".join(str(err).split())[:300]
        raise ConfigError(f"ONNX cannot express this model ({reason}); export to .pt2 instead") from None
    finally:
        for log, level in zip(exporter_logs, levels):
            log.setLevel(level)
    assert onnx_program is not None
    onnx_program.model.metadata_props[portable.METADATA] = meta
    with atomic_path(out) as tmp:
        onnx_program.save(str(tmp))
