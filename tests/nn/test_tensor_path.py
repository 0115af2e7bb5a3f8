"""The tensor compute path (graphs as GraphTensors, message passing in plain torch ops) against
DGL's kernels over the same DGLGraphs: every attention variant and mode, both local models, whole
models, a training run; and proof that no DGL kernel runs on the tensor path."""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import Subset

from attention_variants import ASPIRIN, EXACT, FEAT3D, SALT, SALT2, VARIANTS, attend_with, build, run_attention
from conftest_models import batch_of, dataset_for, seeded_model, tiny_preset

import dgl
import dgl.nn.functional
import dgl.ops
from dgl.nn import GINEConv
from dgl_graphtx import devices
from dgl_graphtx.checkpoint import CheckpointMeta, load_checkpoint, save_checkpoint
from dgl_graphtx.datasets import MoleculeBatch, collate_molecule_tensors
from dgl_graphtx.env_info import environment_report
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import MoleculeFeaturizer, smiles_to_graphs
from dgl_graphtx.inference import Predictor
from dgl_graphtx.insight.attention_maps import attention_maps
from dgl_graphtx.models import GPSOptions
from dgl_graphtx.models.local_models import GatedGCNLayer, GINELayer
from dgl_graphtx.nn import graph_ops
from dgl_graphtx.nn.dense_blocks import BlockLayout
from dgl_graphtx.nn.graph_tensors import GraphTensors
from dgl_graphtx.relation_graph import RelationConfig, build_relation_graph
from dgl_graphtx.testing import assert_carriers_agree, assert_same_runs, run_with_gradients
from dgl_graphtx.training import TrainConfig, Trainer

SMILES = [ASPIRIN, SALT, SALT2, "C", "CCO", "c1ccc2ccccc2c1"]
RELATIONS = ["complete+vn", "hops=2"]
AGGREGATIONS = ["message_passing", "dense_blocks"]


@pytest.fixture(scope="module")
def relation_batches():
    out = {}
    for relation in RELATIONS:
        featurize = MoleculeFeaturizer(FEAT3D, RelationConfig.parse(relation))
        out[relation] = dgl.batch([featurize(s)[1] for s in SMILES])
    return out


def forbid_dgl_kernels(monkeypatch) -> None:
    """Make every DGL message-passing entry point the package could reach raise."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a DGL kernel ran on the tensor path")

    for owner, name in [
        (dgl.DGLGraph, "update_all"), (dgl.DGLGraph, "apply_edges"), (dgl.DGLGraph, "multi_update_all"),
        (dgl.DGLGraph, "local_scope"), (dgl, "readout_nodes"), (dgl, "sum_nodes"), (dgl, "mean_nodes"),
        (dgl, "max_nodes"), (dgl.ops, "gspmm"), (dgl.ops, "gsddmm"), (dgl.ops, "edge_softmax"),
        (dgl.ops, "u_dot_v"), (dgl.ops, "u_mul_e_sum"), (dgl.ops, "copy_e_sum"),
        (dgl.nn.functional, "edge_softmax"), (graph_ops, "dgl_edge_softmax"), (GINEConv, "forward"),
    ]:
        monkeypatch.setattr(owner, name, forbidden)


@pytest.fixture
def no_dgl_kernels(monkeypatch):
    forbid_dgl_kernels(monkeypatch)


def _perturbed(layer: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return layer


# --------------------------------------------------------------------------------------------
# the carrier and the scatter softmax
# --------------------------------------------------------------------------------------------
def test_graph_tensors_answer_what_the_dgl_graph_answers(relation_batches):
    rel = relation_batches["complete+vn"]
    t = GraphTensors.from_graph(rel, blocks=True)
    assert all(torch.equal(a, b) for a, b in zip(t.edges(), rel.edges()))
    assert (t.num_nodes(), t.num_edges(), t.batch_size) == (rel.num_nodes(), rel.num_edges(), rel.batch_size)
    assert torch.equal(t.batch_num_nodes(), rel.batch_num_nodes())
    assert set(t.edata) == set(rel.edata) and set(t.ndata) == set(rel.ndata)
    # node_graph by hand from the per-graph counts
    expected = [b for b, n in enumerate(rel.batch_num_nodes().tolist()) for _ in range(n)]
    assert t.node_graph.tolist() == expected
    # the layout built from the carried geometry is the one built from the DGLGraph
    ref, got = BlockLayout.of(rel, 4), BlockLayout.of(t, 4)
    for name in ("node_slot", "head_rows", "edge_slot", "on_edge", "empty_rows"):
        assert torch.equal(getattr(ref, name), getattr(got, name)), name


def test_graph_tensors_move_where_a_cpu_dgl_graph_cannot():
    """``meta`` stands in for a device DGL has no kernels for: the tensors move, the graph cannot."""
    graph, rel = smiles_to_graphs("CCO")
    batch = MoleculeBatch(graph, rel, torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool))
    with pytest.raises(KeyError, match="meta"):  # DGL has no device context for it
        batch.to("meta")
    moved = batch.as_tensors().to("meta")
    assert moved.graph.device.type == "meta" and moved.relation_graph.block_geometry.node_graph.device.type == "meta"
    assert all(v.device.type == "meta" for v in [*moved.graph.ndata.values(), *moved.relation_graph.edata.values()])


def test_segment_softmax_matches_a_softmax_per_segment():
    torch.manual_seed(0)
    index = torch.randint(0, 7, (60,))
    logits = torch.randn(60, 3, dtype=torch.float64) * 20  # large values: the max shift matters
    got = graph_ops.segment_softmax(logits, index, 7)
    for s in range(7):
        rows = index == s
        if rows.any():
            assert torch.allclose(got[rows], torch.softmax(logits[rows], dim=0), atol=1e-14, rtol=0)


@pytest.mark.parametrize("op", graph_ops.READOUTS)
def test_readout_matches_dgl(relation_batches, op):
    rel = relation_batches["hops=2"]
    h = torch.randn(rel.num_nodes(), 5, dtype=torch.float64)
    expected = graph_ops.readout(rel, h, op)
    assert torch.allclose(graph_ops.readout(GraphTensors.from_graph(rel), h, op), expected, atol=1e-14, rtol=0)


# --------------------------------------------------------------------------------------------
# every variant and mode: the same layer on both carriers
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("relation", RELATIONS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_tensor_path_equals_dgl_path(relation_batches, variant, relation, aggregation):
    rel = relation_batches[relation]
    layer = _perturbed(build(variant).double())
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    params = list(layer.parameters())
    reference = assert_carriers_agree(attend_with(layer, aggregation), [rel], [x], params, **EXACT)
    if aggregation == "message_passing":  # the scatter softmax against DGL's dense-block path too
        assert_same_runs(run_attention(layer, GraphTensors.from_graph(rel), x, "dense_blocks"), reference, **EXACT)


@pytest.mark.parametrize("variant", [VARIANTS[0], VARIANTS[3]], ids=lambda v: v.id)
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_attention_dropout_draws_the_same_mask_on_both_paths(relation_batches, variant, aggregation):
    rel = relation_batches["complete+vn"]
    layer = build(variant, attn_dropout=0.3).double().train()
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    run = assert_carriers_agree(attend_with(layer, aggregation), [rel], [x], list(layer.parameters()), seed=5, **EXACT)
    out, attn = run.outputs
    assert (attn == 0).sum() == 0 and not torch.allclose(out, layer.eval()(rel, x))


def test_graphs_too_sparse_for_blocks_take_the_scatter_path(monkeypatch):
    """A 300-node chain with a 2.5-radius relation graph: blocks would hold ~100 slots per edge, so
    ``auto`` takes the scatter softmax + ``index_add_`` path, equal to DGL's message passing."""
    g = dgl.graph((torch.arange(299), torch.arange(1, 300)))
    g.ndata["pos"] = torch.arange(300.0)[:, None] * torch.tensor([[1.0, 0.0, 0.0]])
    rel = build_relation_graph(g, RelationConfig("radius", radius=2.5))
    tensors = GraphTensors.from_graph(rel, blocks=True)
    assert BlockLayout.cached(tensors, 4, 4) is None
    layer = _perturbed(build(VARIANTS[3]).double())  # GRPE reference: score and value terms
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64)
    reference = run_attention(layer, rel, x, "message_passing")
    forbid_dgl_kernels(monkeypatch)
    assert_same_runs(run_attention(layer, tensors, x, "auto"), reference, **EXACT)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_no_dgl_kernel_runs_on_the_tensor_path(relation_batches, no_dgl_kernels, variant):
    rel = GraphTensors.from_graph(relation_batches["hops=2"], blocks=True)
    layer = build(variant).double()
    x = torch.randn(rel.num_nodes(), layer.embed_dim, dtype=torch.float64, requires_grad=True)
    for aggregation in ("message_passing", "dense_blocks", "auto"):
        layer.aggregation = aggregation
        out, attn = layer(rel, x, get_attention=True)
        (out.sum() + attn.sum()).backward()
    with pytest.raises(AssertionError, match="DGL kernel"):  # the guard is armed
        layer(relation_batches["hops=2"], x.detach())


# --------------------------------------------------------------------------------------------
# local models
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["gine", "gatedgcn", "gatedgcn-pe"])
def test_local_models_equal_on_both_paths(kind):
    graph, _ = smiles_to_graphs("CC(=O)Nc1ccc(O)cc1.[Na+]")  # the ion has no incoming bond
    layer = GINELayer(8) if kind == "gine" else GatedGCNLayer(8, pe_gate=kind.endswith("pe"))
    layer = _perturbed(layer).double().train()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(graph.num_nodes(), 8, dtype=torch.float64, generator=gen)
    e = torch.randn(graph.num_edges(), 8, dtype=torch.float64, generator=gen)
    pe = torch.rand(graph.num_nodes(), 5, dtype=torch.float64, generator=gen)
    run = assert_carriers_agree(lambda g, x: layer(g, x, e, pe), [graph], [x], list(layer.parameters()), **EXACT)
    assert all(grad is not None for grad in run.grads)  # the features and every parameter


def test_gine_layer_equals_dgl_gineconv():
    """GINELayer computes DGL's GINEConv (its parent) on both carriers."""
    graph, _ = smiles_to_graphs("CC(=O)Nc1ccc(O)cc1.[Na+]")
    layer = _perturbed(GINELayer(8)).double()
    x, e = torch.randn(graph.num_nodes(), 8, dtype=torch.float64), torch.randn(graph.num_edges(), 8, dtype=torch.float64)
    expected = GINEConv.forward(layer, graph, x, e)
    assert torch.allclose(layer(graph, x, e), expected, atol=1e-12, rtol=0)
    assert torch.allclose(layer(GraphTensors.from_graph(graph), x, e), expected, atol=1e-12, rtol=0)


# --------------------------------------------------------------------------------------------
# whole models
# --------------------------------------------------------------------------------------------
MODEL_CASES = {
    "vanilla": dict(model="vanilla"),
    "graphormer": dict(model="graphormer"),
    "grpe-paper": dict(model="grpe"),
    "grpe-reference": dict(model="grpe", overrides={"grpe": {"mode": "reference"}}),
    "moire-paper": dict(model="moire", preset="2d"),
    "moire-reference": dict(model="moire", preset="3d", overrides={"moire": {"mode": "reference"}}),
    "gradformer-gine": dict(model="gradformer"),
    "gradformer-decay-sum": dict(model="gradformer", overrides={"gradformer": {"mode": "decay"}, "readout": "sum"}),
    "gradformer-gatedgcn-pe": dict(model="gradformer", local="gatedgcn"),
    "grpe-max": dict(model="grpe", overrides={"readout": "max", "virtual_node": False}),
}


def _model_and_batch(case: str):
    spec = MODEL_CASES[case]
    p = tiny_preset(spec["model"], spec.get("preset"))
    model_cfg = p.model
    for key, value in spec.get("overrides", {}).items():
        if isinstance(value, dict):
            value = dataclasses.replace(getattr(model_cfg, key), **value)
        model_cfg = dataclasses.replace(model_cfg, **{key: value})
    featurizer, relation = p.featurizer, p.relation
    if spec.get("local"):
        featurizer = dataclasses.replace(featurizer, rwse_steps=4)
        model_cfg = dataclasses.replace(model_cfg, rwse_steps=4, rwse_norm=True,
                                        gps=GPSOptions(local_model=spec["local"], pe_gate=True))
    if not model_cfg.virtual_node:
        relation = dataclasses.replace(relation, virtual_node=False)
    p = dataclasses.replace(p, model=model_cfg, featurizer=featurizer, relation=relation)
    batch = batch_of(dataset_for(p.featurizer, p.relation, 0, 12))
    return seeded_model(p).double(), batch


def _double(batch: MoleculeBatch) -> MoleculeBatch:
    for g in (batch.graph, batch.relation_graph):
        for frame in (g.ndata, g.edata):
            for key in list(frame.keys()):
                if frame[key].is_floating_point():
                    frame[key] = frame[key].double()
    return batch


def _model_outputs(model):
    """A training step's outputs (predictions and attention) and the node outputs, as a function
    of the two graphs."""
    def outputs(graph, relation_graph):
        out, attentions = model(graph, relation_graph, return_attention=True)
        return out, attentions, model.node_outputs(graph, relation_graph)
    return outputs


@pytest.mark.parametrize("case", list(MODEL_CASES))
def test_whole_model_equal_on_both_paths(case):
    model, batch = _model_and_batch(case)
    batch = _double(batch)
    model.train()
    params = list(model.parameters())
    run = assert_carriers_agree(_model_outputs(model), [batch.graph, batch.relation_graph], [], params, seed=3,
                                atol=1e-10, grad_atol=1e-9)
    assert all(grad is not None for grad in run.grads)  # every parameter is compared
    # the embedding runs in eval mode, on the running statistics the two steps left equal
    assert_carriers_agree(model.embed, [batch.graph, batch.relation_graph], atol=1e-10)


@pytest.mark.parametrize("case", ["grpe-reference", "gradformer-gatedgcn-pe", "moire-paper"])
def test_whole_model_step_runs_no_dgl_kernel(case, no_dgl_kernels):
    model, batch = _model_and_batch(case)
    batch = collate_molecule_tensors(batch)  # built before the guard matters: collation may use DGL
    model.train()
    run_with_gradients(_model_outputs(model), [batch.graph, batch.relation_graph], [], list(model.parameters()))
    model.eval()
    model.predict(batch.graph, batch.relation_graph)


# --------------------------------------------------------------------------------------------
# training, prediction, attention maps, checkpoints and the compute choice
# --------------------------------------------------------------------------------------------
def _fit(compute: str, tmp_path=None):
    p = tiny_preset("gradformer", num_layers=1)
    ds = dataset_for(p.featurizer, p.relation, 0, 24)
    torch.manual_seed(0)
    model = seeded_model(p)
    cfg = TrainConfig(epochs=2, batch_size=8, lr=3e-3, warmup_epochs=1, progress=False, device="cpu", compute=compute)
    trainer = Trainer(model, cfg, out_dir=tmp_path, meta=CheckpointMeta(p.featurizer, p.relation, ["expt"]) if tmp_path else None)
    result = trainer.fit(Subset(ds, list(range(16))), Subset(ds, list(range(16, 24))))
    return trainer, result, p


def test_trainer_epochs_on_the_tensor_path_match_the_dgl_path(tmp_path):
    t_dgl, r_dgl, _ = _fit("dgl")
    t_tensors, r_tensors, p = _fit("tensors", tmp_path)
    assert t_tensors.compute == "tensors" and t_dgl.compute == "dgl"
    batch = next(iter(t_tensors.loader(Subset(dataset_for(p.featurizer, p.relation, 0, 24), [0, 1]))))
    assert isinstance(batch.graph, GraphTensors) and batch.relation_graph.blocks_known
    cols = ["train_loss", "valid_rmse", "valid_mae"]
    np.testing.assert_allclose(r_tensors.history[cols].to_numpy(), r_dgl.history[cols].to_numpy(), rtol=1e-4)
    assert not np.allclose(r_tensors.history["train_loss"].to_numpy(), r_tensors.history["valid_rmse"].to_numpy())
    # the checkpoint is a state dict: loaded with map_location it predicts the same on either path
    loaded = load_checkpoint(tmp_path / "best.pt", map_location="cpu")
    smiles = ["CCO", "c1ccccc1O", "CC(=O)[O-].[Na+]"]
    by_path = [Predictor(loaded, device="cpu", compute=c).predict(smiles) for c in ("dgl", "tensors")]
    pd.testing.assert_frame_equal(by_path[0], by_path[1], rtol=1e-5)
    assert by_path[0]["expt_pred"].notna().all()


def test_attention_maps_equal_on_both_paths():
    p = tiny_preset("grpe")
    model = seeded_model(p)
    featurizer = MoleculeFeaturizer(p.featurizer, p.relation)
    maps = [attention_maps(model, featurizer, ASPIRIN, compute=c).weights for c in ("dgl", "tensors")]
    assert maps[0].shape[0] == p.model.num_layers
    np.testing.assert_allclose(maps[1], maps[0], atol=1e-6)


def test_checkpoint_saved_from_the_tensor_path_is_device_independent(tmp_path):
    model, batch = _model_and_batch("grpe-paper")
    model = model.float()
    p = tiny_preset("grpe")
    path = save_checkpoint(tmp_path / "m.pt", model, CheckpointMeta(p.featurizer, p.relation, ["expt"]))
    loaded = load_checkpoint(path, map_location="cpu").model.eval()
    assert all(t.device.type == "cpu" for t in loaded.state_dict().values())
    model.eval()
    expected = model(*collate_molecule_tensors(batch)[:2])
    assert torch.allclose(loaded(batch.graph, batch.relation_graph), expected, atol=1e-6)


def test_compute_choice(monkeypatch):
    assert devices.resolve_compute("auto", "cpu") == "dgl"
    assert devices.resolve_compute("tensors", "cpu") == "tensors"
    with pytest.raises(ConfigError, match="compute must be one of"):
        devices.resolve_compute("gpu", "cpu")
    with pytest.raises(ConfigError, match="compute must be one of"):
        TrainConfig(compute="fast")
    # a CUDA torch beside a CPU-only DGL takes the tensors; a CUDA build of DGL keeps DGL
    monkeypatch.setattr(devices, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(devices, "dgl_cuda_error", lambda: "DGLError: Device API cuda is not enabled")
    assert devices.resolve_compute("auto", "auto") == "tensors"
    monkeypatch.setattr(devices, "dgl_cuda_error", lambda: None)
    assert devices.resolve_compute("auto", "auto") == "dgl"


def test_info_names_the_compute_path():
    line = environment_report()["compute path"]
    device = devices.resolve_device("auto")
    assert line.startswith(f"{devices.resolve_compute('auto', device)} with device='auto' ({device.type}:")
    if device.type == "cpu":
        assert line.startswith("dgl ") and "DGL's kernels" in line

