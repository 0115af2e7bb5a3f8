"""Models: presets, forward/backward, parameter sharing, readouts, batch independence, config
validation, classification heads and target normalisation."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from conftest_models import ALL_PRESETS, TINY, batch_of, dataset_for, freesolv_rows, seeded_model, tiny_preset

from dgl_graphtx.datasets import MoleculeDataset
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.models import (
    GPSOptions,
    GradformerOptions,
    GRPEOptions,
    ModelConfig,
    MoireOptions,
    build_model,
    get_preset,
)
from dgl_graphtx.models.gps import Gradformer
from dgl_graphtx.models.graph_transformer import GraphTransformer
from dgl_graphtx.nn.grpe import GRPEEncodings
from dgl_graphtx.relation_graph import RelationConfig


def _data(preset, stop=10, targets=("expt",)):
    return dataset_for(preset.featurizer, preset.relation, 0, stop, targets)


# --------------------------------------------------------------------------------------------
# presets as the papers describe them
# --------------------------------------------------------------------------------------------
def test_preset_defaults_follow_the_papers():
    tiny, small = get_preset("grpe", "tiny").model, get_preset("grpe", "small").model
    assert (tiny.num_layers, tiny.hidden_dim, tiny.num_heads) == (4, 64, 8)
    assert (small.num_layers, small.hidden_dim, small.num_heads) == (12, 80, 8)
    for cfg in (tiny, small):
        assert cfg.readout == "virtual" and cfg.virtual_node
    assert get_preset("grpe", "tiny").relation.virtual_node
    moire = get_preset("moire", "2d")
    assert moire.model.readout == "max" and not moire.model.virtual_node and moire.model.input_mlp
    assert moire.model.moire.distance == "spd" and moire.featurizer.coordinates == "none"
    moire3 = get_preset("moire", "3d")
    assert moire3.model.moire.distance == "dist" and moire3.featurizer.needs_coordinates
    grad = get_preset("gradformer")  # default preset
    assert grad.model.variant == "gradformer" and grad.model.readout == "mean"
    assert not grad.model.virtual_node and not grad.relation.virtual_node
    assert grad.model.rwse_steps == grad.featurizer.rwse_steps == 16
    assert grad.model.gps.norm == "batch"
    assert grad.model.feedforward_dim == 2 * grad.model.hidden_dim  # GPS FFN Linear(d, 2d)
    assert get_preset("vanilla").model.variant == "vanilla"
    assert get_preset("graphormer").model.variant == "graphormer"


def test_get_preset_rejects_unknown_names():
    with pytest.raises(ConfigError, match="unknown model"):
        get_preset("transformer-xl")
    with pytest.raises(ConfigError, match="unknown preset"):
        get_preset("grpe", "huge")


# --------------------------------------------------------------------------------------------
# every preset builds, runs and trains every parameter
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,preset", ALL_PRESETS, ids=[f"{m}-{p}" for m, p in ALL_PRESETS])
def test_every_preset_forward_shape_finite_and_gradients(model, preset):
    p = tiny_preset(model, preset, num_tasks=2)
    assert (p.model.num_layers, p.model.hidden_dim, p.model.num_heads) == (2, 16, 4)
    ds = _data(p, stop=8, targets=("expt", "calc"))
    batch = batch_of(ds)
    net = seeded_model(p)
    expected_cls = Gradformer if model == "gradformer" else GraphTransformer
    assert isinstance(net, expected_cls)
    net.train()
    out = net(batch.graph, batch.relation_graph)
    assert out.shape == (len(ds), 2)
    assert torch.isfinite(out).all()
    # a loss that depends on every output entry
    (out * torch.linspace(0.5, 1.5, out.numel()).view_as(out)).sum().backward()
    missing = [name for name, prm in net.named_parameters() if prm.grad is None]
    assert not missing, f"no gradient reached {missing}"
    dead = [name for name, prm in net.named_parameters() if not torch.isfinite(prm.grad).all() or prm.grad.abs().sum() == 0]
    assert not dead, f"zero or non-finite gradient on {dead}"


@pytest.mark.parametrize("model,preset", ALL_PRESETS, ids=[f"{m}-{p}" for m, p in ALL_PRESETS])
def test_forward_returns_attention_per_layer(model, preset):
    p = tiny_preset(model, preset)
    ds = _data(p, stop=4)
    batch = batch_of(ds)
    net = seeded_model(p).eval()
    out, attentions = net(batch.graph, batch.relation_graph, return_attention=True)
    assert len(attentions) == p.model.num_layers
    rel = batch.relation_graph
    for attn in attentions:
        assert attn.shape == (rel.num_edges(), p.model.num_heads)
        # softmax over the incoming edges of each query node: sums to one per (node, head)
        sums = torch.zeros(rel.num_nodes(), p.model.num_heads).index_add_(0, rel.edges()[1], attn)
        assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)
    assert torch.allclose(out, net(batch.graph, batch.relation_graph))


# --------------------------------------------------------------------------------------------
# GRPE tables: shared by default, per layer on request
# --------------------------------------------------------------------------------------------
def _encodings(net):
    return [block.attention.structure.encodings for block in net.blocks]


def test_grpe_tables_are_one_parameter_object_shared_by_all_layers():
    p = tiny_preset("grpe", "tiny", num_layers=3)
    net = seeded_model(p)
    encs = _encodings(net)
    assert all(isinstance(e, GRPEEncodings) for e in encs)
    assert encs[0] is encs[1] is encs[2]
    assert net.blocks[0].attention.structure.encodings.spatial_query is net.blocks[2].attention.structure.encodings.spatial_query
    # parameters() deduplicates: the six tables are counted once
    names = [n for n, _ in net.named_parameters() if "spatial_query" in n]
    assert len(names) == 1
    # the shared table is trained
    ds = _data(p, stop=6)
    batch = batch_of(ds)
    net.eval()
    net(batch.graph, batch.relation_graph).sum().backward()
    assert encs[0].spatial_value.grad is not None and encs[0].spatial_value.grad.abs().sum() > 0


def test_grpe_unshared_tables_are_separate_and_add_parameters():
    layers = 3
    shared = seeded_model(tiny_preset("grpe", "tiny", num_layers=layers))
    separate = seeded_model(tiny_preset("grpe", "tiny", num_layers=layers, grpe=GRPEOptions(share_encodings=False)))
    encs = _encodings(separate)
    assert len({id(e) for e in encs}) == layers
    assert len({id(e.edge_key) for e in encs}) == layers
    # expected size of one table set, from the SPEC: 3 spatial tables (L + 4 classes: 0..L, FAR,
    # UNREACHABLE, VIRTUAL) and 3 edge tables (one row per bond class), each row d wide
    d, L = 16, 5
    num_edge_classes = encs[0].edge_query.shape[0]
    per_set = 3 * (L + 4) * d + 3 * num_edge_classes * d
    count = lambda m: sum(x.numel() for x in m.parameters())  # noqa: E731
    assert count(separate) - count(shared) == (layers - 1) * per_set
    # and the model still runs
    ds = _data(tiny_preset("grpe", "tiny"), stop=4)
    batch = batch_of(ds)
    assert separate.eval()(batch.graph, batch.relation_graph).shape == (4, 1)


def test_grpe_small_parameter_count_matches_paper():
    net = build_model(get_preset("grpe", "small").model)
    n = sum(x.numel() for x in net.parameters())
    print(f"GRPE-Small parameters: {n:,} (paper: 489k)")
    assert 489_000 <= n <= 510_000


# --------------------------------------------------------------------------------------------
# readouts
# --------------------------------------------------------------------------------------------
def _capture_final_states(net):
    """Record the output of the last LayerNorm (all relation-graph nodes) with a forward hook."""
    store = {}
    handle = net.final_norm.register_forward_hook(lambda mod, inp, out: store.__setitem__("x", out.detach().clone()))
    return store, handle


def test_virtual_readout_reads_the_virtual_node_state():
    p = tiny_preset("grpe", "tiny")
    ds = _data(p, stop=6)
    batch = batch_of(ds)
    net = seeded_model(p).eval()
    store, handle = _capture_final_states(net)
    with torch.no_grad():
        atoms, virtual, _ = net.encode(batch.graph, batch.relation_graph)
        out = net(batch.graph, batch.relation_graph)
    handle.remove()
    is_virtual = batch.relation_graph.ndata["is_virtual"]
    # virtual nodes are the last node of each molecule's block of the batched relation graph
    ends = torch.cumsum(batch.relation_graph.batch_num_nodes(), 0) - 1
    assert torch.equal(torch.nonzero(is_virtual).squeeze(1), ends)
    assert virtual.shape == (6, 16) and atoms.shape == (batch.graph.num_nodes(), 16)
    assert torch.equal(virtual, store["x"][ends])
    assert torch.equal(atoms, store["x"][~is_virtual])
    assert torch.allclose(out, net.head(virtual), atol=1e-6)
    # and it is not a pooling of the atoms in disguise
    mean_pooled = torch.stack([a.mean(0) for a in torch.split(atoms, batch.graph.batch_num_nodes().tolist())])
    assert not torch.allclose(out, net.head(mean_pooled), atol=1e-4)


def _manual_pool(atoms, counts, op):
    pieces = torch.split(atoms, counts)
    reduce = {"mean": lambda t: t.mean(0), "sum": lambda t: t.sum(0), "max": lambda t: t.max(0).values}[op]
    return torch.stack([reduce(piece) for piece in pieces])


@pytest.mark.parametrize("readout", ["mean", "max", "sum"])
@pytest.mark.parametrize("variant", ["grpe", "vanilla", "gradformer"])
def test_pooling_readouts_match_manual_pooling(variant, readout):
    if variant == "gradformer":
        p = tiny_preset("gradformer", readout=readout)
    else:
        # virtual node present (it takes part in attention) but not read out
        p = tiny_preset(variant, "tiny", readout=readout)
        assert p.model.virtual_node
    ds = _data(p, stop=7)
    batch = batch_of(ds)
    net = seeded_model(p).eval()
    with torch.no_grad():
        atoms, virtual, _ = net.encode(batch.graph, batch.relation_graph)
        out = net(batch.graph, batch.relation_graph)
    counts = batch.graph.batch_num_nodes().tolist()
    assert atoms.shape[0] == sum(counts)
    expected = net.head(_manual_pool(atoms, counts, readout))
    assert torch.allclose(out, expected, atol=1e-5)


@pytest.mark.parametrize("variant", ["moire", "gradformer"])
def test_atomwise_readout_sums_the_head_over_atoms(variant):
    p = tiny_preset(variant, readout="atomwise")
    ds = _data(p, stop=7)
    batch = batch_of(ds)
    net = seeded_model(p).eval()
    with torch.no_grad():
        atoms, virtual, _ = net.encode(batch.graph, batch.relation_graph)
        out = net(batch.graph, batch.relation_graph)
        per_atom = net.head(atoms)
        embedded, _ = net.embed(batch.graph, batch.relation_graph)
    counts = batch.graph.batch_num_nodes().tolist()
    assert torch.allclose(out, _manual_pool(per_atom, counts, "sum"), atol=1e-5)
    assert torch.allclose(embedded, _manual_pool(atoms, counts, "sum"), atol=1e-5)  # the molecule vector: summed states
    # extensive: a molecule's output is the sum of per-atom contributions, not a function of the pooled state
    assert not torch.allclose(out, net.head(_manual_pool(atoms, counts, "sum")), atol=1e-3)


# --------------------------------------------------------------------------------------------
# batch independence (eval mode)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,preset", ALL_PRESETS[:1] + ALL_PRESETS[2:], ids=[f"{m}-{p}" for m, p in ALL_PRESETS[:1] + ALL_PRESETS[2:]])
def test_prediction_does_not_depend_on_the_rest_of_the_batch(model, preset):
    p = tiny_preset(model, preset)
    ds = _data(p, stop=9)
    net = seeded_model(p).eval()
    with torch.no_grad():
        full = net(*batch_of(ds)[:2])
        for i in (0, 4, 8):
            alone = net(*batch_of(ds, [i])[:2])
            assert torch.allclose(alone[0], full[i], atol=1e-5), (i, alone, full[i])
        order = [8, 3, 0, 5]
        shuffled = net(*batch_of(ds, order)[:2])
        assert torch.allclose(shuffled, full[order], atol=1e-5)


def test_gradformer_batchnorm_makes_train_mode_batch_dependent():
    """Sanity check that the eval-mode test above is meaningful: in train mode BatchNorm couples
    the molecules of a batch."""
    p = tiny_preset("gradformer")
    ds = _data(p, stop=6)
    net = seeded_model(p).train()
    with torch.no_grad():
        a = net(*batch_of(ds, [0, 1, 2])[:2])
        b = net(*batch_of(ds, [0, 3, 4])[:2])
    assert not torch.allclose(a[0], b[0], atol=1e-4)


# --------------------------------------------------------------------------------------------
# mismatched relation graphs and missing inputs
# --------------------------------------------------------------------------------------------
def test_model_with_virtual_node_rejects_relation_graphs_without_one():
    p = tiny_preset("grpe", "tiny")
    ds = dataset_for(p.featurizer, RelationConfig("complete", virtual_node=False), 0, 4)
    net = seeded_model(p)
    with pytest.raises(ConfigError, match="virtual"):
        net(*batch_of(ds)[:2])


def test_model_without_virtual_node_rejects_relation_graphs_with_one():
    p = tiny_preset("vanilla", "tiny", virtual_node=False, readout="mean")
    ds = dataset_for(p.featurizer, RelationConfig("complete", virtual_node=True), 0, 4)
    net = seeded_model(p)
    with pytest.raises(ConfigError, match="virtual"):
        net(*batch_of(ds)[:2])
    moire = tiny_preset("moire", "2d")
    with pytest.raises(ConfigError, match="virtual"):
        seeded_model(moire)(*batch_of(dataset_for(moire.featurizer, RelationConfig(virtual_node=True), 0, 4))[:2])


def test_gradformer_rejects_virtual_nodes():
    p = tiny_preset("gradformer")
    ds = dataset_for(p.featurizer, RelationConfig("complete", virtual_node=True), 0, 4)
    with pytest.raises(ConfigError, match="virtual node"):
        seeded_model(p).eval()(*batch_of(ds)[:2])
    with pytest.raises(ConfigError, match="virtual"):
        ModelConfig(variant="gradformer", virtual_node=True, readout="mean")
    with pytest.raises(ConfigError):
        Gradformer(ModelConfig(variant="grpe"))
    with pytest.raises(ConfigError):
        GraphTransformer(ModelConfig(variant="gradformer", virtual_node=False, readout="mean"))


def test_missing_rwse_is_a_config_error():
    p = tiny_preset("gradformer")
    assert p.model.rwse_steps == 16
    ds = dataset_for(FeaturizerConfig(), p.relation, 0, 4)  # featurized without RWSE
    assert "rwse" not in ds[0][0].ndata
    with pytest.raises(ConfigError, match="rwse"):
        seeded_model(p).eval()(*batch_of(ds)[:2])


def test_rwse_input_is_used():
    p = tiny_preset("gradformer")
    ds = _data(p, stop=3)
    batch = batch_of(ds)
    net = seeded_model(p).eval()
    with torch.no_grad():
        base = net(batch.graph, batch.relation_graph)
        batch.graph.ndata["rwse"] = batch.graph.ndata["rwse"] + 0.5
        shifted = net(batch.graph, batch.relation_graph)
    assert not torch.allclose(base, shifted)


# --------------------------------------------------------------------------------------------
# canonical atom features
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,preset", [("grpe", "tiny"), ("gradformer", "default"), ("moire", "2d")])
def test_canonical_atom_features(model, preset):
    p = tiny_preset(model, preset, atom_features="canonical")
    assert p.featurizer.atom_features == "canonical" and p.model.atom_features == "canonical"
    ds = _data(p, stop=5)
    batch = batch_of(ds)
    feat = batch.graph.ndata["feat"]
    assert feat.is_floating_point()
    assert p.model.atom_feature_dims == (feat.shape[1],)
    assert p.model.bond_feature_dims == (batch.graph.edata["feat"].shape[1],)
    net = seeded_model(p).eval()
    out = net(batch.graph, batch.relation_graph)
    assert out.shape == (5, 1) and torch.isfinite(out).all()
    # features actually matter
    with torch.no_grad():
        batch.graph.ndata["feat"] = feat.flip(0)
        assert not torch.allclose(out, net(batch.graph, batch.relation_graph))


# --------------------------------------------------------------------------------------------
# classification head and target normalisation
# --------------------------------------------------------------------------------------------
def test_multitask_classification_outputs_logits_and_predict_gives_probabilities():
    p = tiny_preset("grpe", "tiny", num_tasks=3, task="classification")
    frame = freesolv_rows(0, 8).assign(expt_copy=lambda f: f["expt"])  # each target is named once
    ds = MoleculeDataset.from_dataframe(frame, "smiles", ["expt", "calc", "expt_copy"], featurizer=p.featurizer,
                                        relation=p.relation, progress=False)
    batch = batch_of(ds)
    net = seeded_model(p)
    net.head.bias.data.fill_(3.0)  # push logits outside [0, 1]
    net.train()
    logits = net.eval()(batch.graph, batch.relation_graph)
    net.train()
    probs = net.predict(batch.graph, batch.relation_graph)
    assert net.training, "predict must restore the training mode"
    assert logits.shape == probs.shape == (8, 3)
    assert (logits > 1).any(), "forward must return raw logits"
    assert ((probs >= 0) & (probs <= 1)).all()
    assert torch.allclose(probs, 1 / (1 + torch.exp(-logits)), atol=1e-6)
    # classification targets are not standardised
    y = torch.tensor([[0.0, 1.0, 1.0]])
    assert torch.equal(net.normalize_targets(y), y)


def test_target_normalization_round_trip():
    p = tiny_preset("vanilla", "tiny", num_tasks=2)
    net = seeded_model(p).eval()
    mean, std = torch.tensor([1.5, -2.0]), torch.tensor([2.0, 0.25])
    net.set_target_normalization(mean, std)
    y = torch.tensor([[3.5, -2.0], [1.5, -1.5], [-0.5, -3.0]])
    z = net.normalize_targets(y)
    assert torch.allclose(z, torch.tensor([[1.0, 0.0], [0.0, 2.0], [-1.0, -4.0]]))
    assert torch.allclose(net.to_target_space(z), y)
    # predict applies the inverse transform to the forward output
    ds = _data(p, stop=4, targets=("expt", "calc"))
    batch = batch_of(ds)
    raw = net(batch.graph, batch.relation_graph)
    assert torch.allclose(net.predict(batch.graph, batch.relation_graph), raw * std + mean, atol=1e-6)
    # the statistics are buffers, so they travel with the state dict
    state = net.state_dict()
    assert torch.equal(state["target_mean"], mean) and torch.equal(state["target_std"], std)
    # a zero std is clamped instead of dividing by zero
    net.set_target_normalization([0.0, 0.0], [0.0, 1.0])
    assert torch.isfinite(net.normalize_targets(y)).all()


# --------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------
CONFIGS = [
    ModelConfig(),
    ModelConfig(variant="moire", readout="max", virtual_node=False, moire=MoireOptions(focus="cauchy", distance="dist")),
    ModelConfig(variant="gradformer", readout="sum", virtual_node=False, rwse_steps=8,
                gradformer=GradformerOptions(mode="decay", decay=0.6, learn_decay=True), gps=GPSOptions(norm="layer")),
    ModelConfig(variant="grpe", grpe=GRPEOptions(max_distance=3, mode="reference", share_encodings=False), num_tasks=4,
                task="classification", head_layers=2, ffn_dim=32),
    get_preset("graphormer", atom_features="canonical").model,
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.variant)
def test_model_config_round_trip(cfg):
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    # JSON turns tuples into lists; from_dict must still restore an equal config
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # and a different value is not equal (equality is not vacuous)
    assert ModelConfig.from_dict({**cfg.to_dict(), "hidden_dim": cfg.hidden_dim * 2}) != cfg


BAD_CONFIGS = [
    dict(variant="transformer"),
    dict(readout="attention"),
    dict(task="ranking"),
    dict(hidden_dim=10, num_heads=3),
    dict(num_layers=0),
    dict(num_tasks=0),
    dict(head_layers=3),
    dict(atom_features="morgan"),
    dict(readout="virtual", virtual_node=False),
    dict(variant="gradformer", virtual_node=True, readout="mean"),
    dict(readout="atomwise", virtual_node=False, molecule_features=3),
    dict(readout="atomwise", virtual_node=False, uncertainty_head="mve"),
    dict(task="classification", atom_reference=True),
]


@pytest.mark.parametrize("kwargs", BAD_CONFIGS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items())[:60])
def test_bad_model_configs_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        ModelConfig(**kwargs)


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="unknown"):
        ModelConfig.from_dict({**ModelConfig().to_dict(), "hiddn_dim": 3})


def test_zero_heads_is_a_config_error():
    with pytest.raises(ConfigError):
        ModelConfig(num_heads=0)


@pytest.mark.parametrize("make_options", [
    lambda: GRPEOptions(mode="papr"),
    lambda: GRPEOptions(max_distance=0),
    lambda: MoireOptions(focus="gauss"),
    lambda: MoireOptions(distance="euclid"),
    lambda: MoireOptions(mode="multiplicative"),
    lambda: GradformerOptions(decay=1.5),
    lambda: GradformerOptions(mode="decayed"),
    lambda: GPSOptions(norm="group"),
], ids=["grpe-mode", "grpe-L", "moire-focus", "moire-distance", "moire-mode", "gradformer-decay", "gradformer-mode", "gps-norm"])
def test_bad_nested_options_raise_config_error(make_options):
    # validated when the options are made, before any layer is built
    with pytest.raises(ConfigError):
        make_options()


def test_from_dict_rejects_unknown_nested_keys():
    data = ModelConfig().to_dict()
    data["grpe"] = {**data["grpe"], "share_tables": True}
    with pytest.raises(ConfigError):
        ModelConfig.from_dict(data)


def test_preset_overrides_apply_and_keep_feature_dims():
    p = get_preset("grpe", "tiny", num_tasks=3, task="classification", **TINY)
    assert p.model.num_tasks == 3 and p.model.task == "classification"
    assert p.model.num_layers == 2 and p.model.dropout == 0.0
    ds = _data(p, stop=3)
    # categorical features: one embedding table per column, sized by the featurizer
    assert len(p.model.atom_feature_dims) == ds[0][0].ndata["feat"].shape[1]
    assert (ds.graphs.batch(torch.arange(3)).ndata["feat"].max(0).values < torch.tensor(p.model.atom_feature_dims)).all()
    replaced = dataclasses.replace(p.model, hidden_dim=32)
    assert replaced.hidden_dim == 32 and p.model.hidden_dim == 16
