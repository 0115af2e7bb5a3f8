"""Properties every attention variant must have (SPEC sections 1-5), plus GRPE's memory behaviour.

* permutation equivariance (atoms renumbered in RDKit; relation-graph nodes and edges shuffled);
* invariance under rotations and translations of the 3-D coordinates;
* batch independence (a graph's output does not depend on what it is batched with, or where);
* attention rows sum to 1 over each query's incoming relation edges;
* no NaN with unreachable pairs / ``-inf`` logits, in float32 and float64, forward and backward;
* every learnable structural parameter gets a gradient (GRPE/Graphormer: exactly the table rows of
  the classes present in the batch);
* attention dropout only in train mode, and unbiased;
* shared GRPE encodings / Gradformer start points are the same Parameter objects;
* Moire with ``distance="dist"`` on a relation graph without coordinates is a ConfigError;
* GRPE's saved-for-backward memory grows with ``E x H``, not ``E x H x dh``.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest
import torch
from rdkit import Chem
from rdkit.Chem import AllChem

import dgl_graphtx  # noqa: F401  (sets the DGL backend)
import dgl
from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import FeaturizerConfig, MoleculeFeaturizer, smiles_to_graphs
from dgl_graphtx.nn import (
    DecayParameters,
    GradformerAttention,
    GRPEAttention,
    GRPEEncodings,
    MoireAttention,
    RelationAttention,
)
from dgl_graphtx.relation_graph import RelationConfig, build_relation_graph
from dgl_graphtx.testing import assert_permutation_equivariant, assert_rigid_motion_invariant

import dense_reference as ref
from attention_variants import ASPIRIN, D_MODEL, FEAT3D, HEADS, MAX_DIST, SALT, SALT2, VARIANTS, Variant, build



# ---------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------
STRUCTURED = [v for v in VARIANTS if v.kind != "vanilla"]
ids = lambda v: v.id  # noqa: E731


def make_layer(v: Variant, seed: int = 0, attn_dropout: float = 0.0, dtype=torch.float32):
    """A layer with parameters moved away from init; structural parameters stay inside the
    clamps so that every head can get a gradient."""
    torch.manual_seed(seed)
    layer = build(v, attn_dropout)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.add_((0.5 if name.startswith("structure.") else 0.2) * torch.randn(p.shape, generator=gen))
        if v.kind == "moire":
            layer.structure.shift.copy_(torch.tensor([0.9, 1.7, 2.6, 3.4]))
            layer.structure.width.copy_(torch.tensor([0.8, 1.2, 1.9, 2.5]))
        if v.kind == "gradformer":
            layer.structure.params.start.copy_(torch.tensor([0.4, 1.3, 2.2, 3.6]))
    return layer.to(dtype)


@lru_cache(maxsize=None)
def rel_graph(smiles: str, rc: RelationConfig = RelationConfig()):
    return smiles_to_graphs(smiles, FEAT3D, rc)[1]


def mixed_graphs():
    """Relation graphs with virtual nodes, unreachable pairs, truncation and a single atom."""
    return [
        rel_graph(ASPIRIN),
        rel_graph(SALT2, RelationConfig(virtual_node=True)),
        rel_graph("C"),
        rel_graph(ASPIRIN, RelationConfig("radius", radius=3.0)),
        rel_graph(SALT),
        rel_graph(SALT2, RelationConfig("hops", hops=2)),
    ]


def features(n: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    return torch.randn(n, D_MODEL, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def dense_attention(rel, attn: torch.Tensor) -> torch.Tensor:
    """``[E, H]`` edge weights as ``[H, N(query), N(key)]``."""
    src, dst = (t.long() for t in rel.edges())
    n = rel.num_nodes()
    out = torch.zeros(attn.shape[1], n, n, dtype=attn.dtype)
    out[:, dst, src] = attn.T
    return out


# ---------------------------------------------------------------------------------------------
# Permutation equivariance
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def mol_with_conformer(smiles: str) -> Chem.Mol:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    assert AllChem.EmbedMolecule(mol, randomSeed=7) == 0
    return Chem.RemoveHs(mol)


RENUMBER_CASES = [
    (SALT2, RelationConfig(virtual_node=True)),
    (ASPIRIN, RelationConfig("radius", radius=3.0)),
]


@pytest.mark.parametrize("smiles,rc", RENUMBER_CASES, ids=["salt-vn", "aspirin-radius3"])
@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_equivariant_under_rdkit_renumbering(v, smiles, rc):
    """Renumber the atoms with Chem.RenumberAtoms (conformer kept): with inputs attached to atoms,
    outputs and attention follow the atoms. The featurizer puts atoms in canonical order and says
    which input atom each node is (``input_atom``); the comparison goes through that map."""
    mol = mol_with_conformer(smiles)
    n = mol.GetNumAtoms()
    order = [int(i) for i in np.random.default_rng(0).permutation(n)]  # new atom a = old atom order[a]
    assert order != list(range(n))
    featurizer = MoleculeFeaturizer(FeaturizerConfig(coordinates="conformer"), rc)
    graph, rel = featurizer(mol)
    graph_p, rel_p = featurizer(Chem.RenumberAtoms(mol, order))
    extra = list(range(n, rel.num_nodes()))  # the virtual node stays last
    atom_of = torch.tensor(graph.ndata["input_atom"].tolist() + extra)  # node -> original atom
    atom_of_p = torch.tensor([order[a] for a in graph_p.ndata["input_atom"].tolist()] + extra)
    layer = make_layer(v, dtype=torch.float64).eval()
    x = features(rel.num_nodes(), 1, torch.float64)  # row a: input of original atom a
    with torch.no_grad():
        out, attn = layer(rel, x[atom_of], get_attention=True)
        out_p, attn_p = layer(rel_p, x[atom_of_p], get_attention=True)
    by_atom, by_atom_p = torch.empty_like(out), torch.empty_like(out_p)
    by_atom[atom_of], by_atom_p[atom_of_p] = out, out_p
    torch.testing.assert_close(by_atom_p, by_atom, atol=1e-9, rtol=1e-9)
    a, a_p = dense_attention(rel, attn), dense_attention(rel_p, attn_p)
    dense, dense_p = torch.empty_like(a), torch.empty_like(a_p)
    dense[:, atom_of[:, None], atom_of[None, :]] = a
    dense_p[:, atom_of_p[:, None], atom_of_p[None, :]] = a_p
    torch.testing.assert_close(dense_p, dense, atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_equivariant_under_node_and_edge_relabelling(v):
    """Shuffle all node ids (virtual node included) and the edge order of the relation graph."""
    rel = rel_graph(SALT2, RelationConfig(virtual_node=True))
    layer = make_layer(v, dtype=torch.float64).eval()
    x = features(rel.num_nodes(), 2, torch.float64)
    assert_permutation_equivariant(lambda g, x: layer(g, x, get_attention=True), rel, [x], ["node", "edge"], seed=3)


@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_invariant_under_rotation_and_translation_of_the_coordinates(v):
    """The relation graph rebuilt from moved coordinates (pairs within a radius, 3-D distances
    for MoiréGT's ``dist``) gives the same outputs and attention."""
    graph, _ = smiles_to_graphs(ASPIRIN, FEAT3D)
    layer = make_layer(v, dtype=torch.float64).eval()
    x = features(graph.num_nodes(), 3, torch.float64)

    def attend(pos: torch.Tensor):
        moved = graph.clone()
        moved.ndata["pos"] = pos
        return layer(build_relation_graph(moved, RelationConfig("radius", radius=3.0)), x, get_attention=True)

    assert_rigid_motion_invariant(attend, graph.ndata["pos"].double())


# ---------------------------------------------------------------------------------------------
# Batching, normalisation, numerics
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_batch_independence(v):
    rels = mixed_graphs()[:4]
    layer = make_layer(v).eval()
    xs = [features(r.num_nodes(), 10 + i) for i, r in enumerate(rels)]
    with torch.no_grad():
        alone = [layer(r, x, get_attention=True) for r, x in zip(rels, xs)]
        for order in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]):
            bg = dgl.batch([rels[i] for i in order])
            out, attn = layer(bg, torch.cat([xs[i] for i in order]), get_attention=True)
            outs = out.split(bg.batch_num_nodes().tolist())
            attns = attn.split(bg.batch_num_edges().tolist())
            for pos, i in enumerate(order):
                torch.testing.assert_close(outs[pos], alone[i][0], atol=1e-6, rtol=1e-5)
                torch.testing.assert_close(attns[pos], alone[i][1], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_attention_rows_sum_to_one(v):
    bg = dgl.batch(mixed_graphs())
    layer = make_layer(v).eval()
    with torch.no_grad():
        _, attn = layer(bg, features(bg.num_nodes(), 4), get_attention=True)
    _, dst = bg.edges()
    sums = torch.zeros(bg.num_nodes(), HEADS).index_add_(0, dst.long(), attn)
    assert (attn >= 0).all()
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_no_nan_with_unreachable_pairs(v, dtype):
    """Salts (unreachable pairs; [Na+] alone with only unreachable partners), virtual nodes and
    truncated graphs; Gradformer 'decay' turns unreachable pairs into -inf logits."""
    bg = dgl.batch(mixed_graphs())
    layer = make_layer(v, dtype=dtype).train()
    x = features(bg.num_nodes(), 5, dtype).requires_grad_(True)
    out, attn = layer(bg, x, get_attention=True)
    assert out.dtype == dtype and torch.isfinite(out).all() and torch.isfinite(attn).all()
    (out * features(bg.num_nodes(), 6, dtype)).sum().backward()
    assert torch.isfinite(x.grad).all()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    unreachable = bg.edata["spd"] == ref.SPD_UNREACHABLE
    assert unreachable.any()
    if v.kind == "gradformer" and v.mode == "decay":  # M = 0: no attention at all
        assert (attn[unreachable] == 0).all()


# DGL's CPU kernels take no float16, which the value sums of MoireGT's distance basis run through
HALF_MOIRE = [(v, dtype) for v in VARIANTS if v.kind == "moire" for dtype in (torch.float16, torch.bfloat16)
              if not (v.rbf and dtype == torch.float16)]


@pytest.mark.parametrize("v,dtype", HALF_MOIRE, ids=lambda p: p.id if isinstance(p, Variant) else str(p)[6:])
def test_moire_in_half_precision_follows_float64(v, dtype):
    """A model cast with .half() / .bfloat16(): unreachable pairs' 1e6 and their focus (-1e12 /
    sigma) do not fit float16, so the focus is computed in float32 and its logits cast."""
    bg = dgl.batch(mixed_graphs())
    layer = make_layer(v, dtype=torch.float64)
    x = features(bg.num_nodes(), 5, torch.float64)
    expected = layer(bg, x)
    layer.to(dtype)
    low = x.to(dtype).requires_grad_(True)
    out = layer(bg, low)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), expected, atol=0.1, rtol=0.05)
    out.double().sum().backward()
    assert torch.isfinite(low.grad).all()
    for name, p in layer.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name


# ---------------------------------------------------------------------------------------------
# Gradients of the structural parameters
# ---------------------------------------------------------------------------------------------
def grad_batch():
    """Aspirin (hop counts up to 6: beyond every start point and L) and a salt with a virtual node
    (unreachable and virtual pairs)."""
    return dgl.batch([rel_graph(ASPIRIN), rel_graph(SALT2, RelationConfig(virtual_node=True))])


def nonzero_rows(grad: torch.Tensor) -> set:
    return set(torch.nonzero(grad.reshape(grad.shape[0], -1).abs().sum(1)).flatten().tolist())


@pytest.mark.parametrize("v", STRUCTURED, ids=ids)
def test_structural_parameters_get_gradients(v):
    bg = grad_batch()
    layer = make_layer(v, dtype=torch.float64)
    out = layer(bg, features(bg.num_nodes(), 7, torch.float64))
    (out * features(bg.num_nodes(), 8, torch.float64)).sum().backward()
    s = layer.structure
    spd, bond = bg.edata["spd"].tolist(), bg.edata["bond"].tolist()
    reference = v.mode == "reference"
    if v.kind in ("grpe", "graphormer"):
        spatial = {ref.spatial_class(d, MAX_DIST, reference and v.kind == "grpe") for d in spd}
        edge = {ref.edge_class(b, reference and v.kind == "grpe") for b in bond}
        if v.kind == "grpe":
            enc = s.encodings
            tables = [(enc.spatial_query, spatial), (enc.spatial_key, spatial), (enc.spatial_value, spatial),
                      (enc.edge_query, edge), (enc.edge_key, edge), (enc.edge_value, edge)]
        else:
            tables = [(s.spatial_bias, spatial), (s.edge_bias, edge)]
        # a row gets a gradient exactly when its class occurs in the batch
        for table, classes in tables:
            assert nonzero_rows(table.grad) == classes
        if v.kind == "grpe" and reference:  # distance L shares FAR; SELF unused
            assert MAX_DIST not in spatial and ref.SELF not in edge
    elif v.kind == "moire":
        params = [s.shift, s.width] + ([s.self_weight] if v.mode == "paper" else [])
        for p in params:
            assert (p.grad != 0).all(), p.grad  # every head
    elif v.kind == "gradformer":
        assert (s.params.start.grad != 0).all(), s.params.start.grad  # every head
        if v.learn_decay:
            assert isinstance(s.params.decay_logit, torch.nn.Parameter)
            assert s.params.decay_logit.grad is not None and s.params.decay_logit.grad != 0
        else:
            assert not isinstance(s.params.decay_logit, torch.nn.Parameter)
            assert abs(float(s.params.decay()) - 0.6) < 1e-6
    else:  # any other variant: every entry of every structural parameter
        for name, p in s.named_parameters():
            assert p.grad is not None and (p.grad != 0).all(), name


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_dropout_only_in_train_mode(v):
    rel = rel_graph(SALT2, RelationConfig(virtual_node=True))
    layer = make_layer(v, attn_dropout=0.5)
    plain = make_layer(v, attn_dropout=0.0)
    plain.load_state_dict(layer.state_dict())
    x = features(rel.num_nodes(), 9)
    with torch.no_grad():
        expected = plain.eval()(rel, x)
        layer.eval()
        torch.manual_seed(1)
        a = layer(rel, x)
        torch.manual_seed(2)
        b = layer(rel, x)
        assert torch.equal(a, b)
        torch.testing.assert_close(a, expected, atol=1e-6, rtol=1e-6)
        layer.train()
        torch.manual_seed(1)
        c = layer(rel, x)
        torch.manual_seed(2)
        d = layer(rel, x)
    assert (c - d).abs().max() > 1e-3
    assert (c - a).abs().max() > 1e-3


@pytest.mark.parametrize("v", VARIANTS, ids=ids)
def test_dropout_is_unbiased(v):
    """Dropout on the attention weights (rescaled by 1/(1-p)) keeps the expected output: the mean
    of many train-mode passes approaches the eval-mode output (within 6 standard errors)."""
    rel = rel_graph(SALT)
    layer = make_layer(v, attn_dropout=0.3, dtype=torch.float64)
    x = features(rel.num_nodes(), 11, torch.float64)
    copies = 400  # one forward over a batch of copies: each copy draws its own dropout masks
    torch.manual_seed(0)
    with torch.no_grad():
        expected = layer.eval()(rel, x)
        layer.train()
        samples = layer(dgl.batch([rel] * copies), x.repeat(copies, 1)).view(copies, *x.shape)
    mean, stderr = samples.mean(0), samples.std(0) / np.sqrt(samples.shape[0])
    assert stderr.max() > 1e-4  # dropout really acted
    assert ((mean - expected).abs() <= 6 * stderr + 1e-9).all()


# ---------------------------------------------------------------------------------------------
# Sharing, configuration errors
# ---------------------------------------------------------------------------------------------
def test_grpe_shared_encodings_are_the_same_parameters():
    torch.manual_seed(0)
    enc = GRPEEncodings(D_MODEL, HEADS, max_distance=MAX_DIST)
    l1, l2 = GRPEAttention(D_MODEL, HEADS, encodings=enc), GRPEAttention(D_MODEL, HEADS, encodings=enc, mode="reference")
    names = ["spatial_query", "spatial_key", "spatial_value", "edge_query", "edge_key", "edge_value"]
    for name in names:
        p1, p2 = getattr(l1.structure.encodings, name), getattr(l2.structure.encodings, name)
        assert isinstance(p1, torch.nn.Parameter) and p1 is p2 is getattr(enc, name)
    stack = torch.nn.ModuleList([l1, l2])
    ids_ = {id(p) for p in stack.parameters()}
    assert len(ids_) == 2 * 4 + 6  # two q/k/v + out projections (weight, bias) and six shared tables
    # both layers contribute to the gradient of the shared tables
    rel = rel_graph(ASPIRIN)
    x = features(rel.num_nodes(), 12)
    l2(rel, l1(rel, x)).sum().backward()
    g_both = enc.spatial_value.grad.clone()
    enc.zero_grad()
    l2(rel, l1(rel, x).detach()).sum().backward()
    g_second = enc.spatial_value.grad.clone()
    assert (g_both != 0).any() and (g_both - g_second).abs().max() > 1e-8
    # without shared tables, each layer has its own
    l3, l4 = GRPEAttention(D_MODEL, HEADS), GRPEAttention(D_MODEL, HEADS)
    assert l3.structure.encodings.spatial_query is not l4.structure.encodings.spatial_query


def test_gradformer_shared_start_points_are_the_same_parameters():
    torch.manual_seed(0)
    params = DecayParameters(HEADS, learn_decay=True)
    l1, l2 = (GradformerAttention(D_MODEL, HEADS, params=params, mode=m) for m in ("paper", "decay"))
    assert l1.structure.params.start is l2.structure.params.start is params.start
    assert l1.structure.params.decay_logit is l2.structure.params.decay_logit
    assert len({id(p) for p in torch.nn.ModuleList([l1, l2]).parameters()}) == 2 * 4 + 2


def test_spec_defaults():
    """Initial values and defaults named in SPEC 2-4."""
    moire = MoireAttention(D_MODEL, HEADS).structure
    assert moire.focus == "gaussian" and moire.mode == "paper"  # paper default: Gaussian
    assert torch.equal(moire.self_weight.detach(), torch.ones(HEADS))  # w_h init 1
    shifts = moire.shift.detach()
    assert (shifts[1:] > shifts[:-1]).all() and shifts.min() >= ref.MOIRE_MU_MIN  # spread shifts
    enc = GRPEAttention(D_MODEL, HEADS).structure.encodings  # L = 5 by default
    assert enc.spatial_query.shape[0] == ref.num_spatial_classes(5)
    assert enc.edge_query.shape[0] == ref.NUM_EDGE_CLASSES
    params = GradformerAttention(D_MODEL, HEADS).structure.params
    assert params.start.shape == (HEADS,) and isinstance(params.start, torch.nn.Parameter)
    assert 0.0 < float(params.decay()) < 1.0
    with pytest.raises(ValueError):
        DecayParameters(HEADS, decay=1.0)


def test_moire_dist_without_coordinates_is_a_config_error():
    _, rel = smiles_to_graphs("CCO.[Na+]")  # no coordinates: no edata["dist"]
    assert "dist" not in rel.edata
    torch.manual_seed(0)
    x = torch.randn(rel.num_nodes(), D_MODEL)
    for mode in ("paper", "reference"):
        with pytest.raises(ConfigError):
            MoireAttention(D_MODEL, HEADS, distance="dist", mode=mode)(rel, x)
    assert MoireAttention(D_MODEL, HEADS, distance="spd")(rel, x).shape == x.shape


@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.id)
def test_graph_without_nodes_gives_no_rows_and_leaves_a_batch_unchanged(v):
    empty = dgl.graph(([], []), num_nodes=0, idtype=torch.int64)
    empty.ndata["pos"] = torch.zeros(0, 3)
    empty_rel = build_relation_graph(empty)
    _, rel = smiles_to_graphs("CCO", FEAT3D)
    layer = build(v)
    x = torch.randn(rel.num_nodes(), D_MODEL, dtype=torch.float64)
    layer.double()
    for aggregation in ("auto", "message_passing"):
        layer.aggregation = aggregation
        assert layer(empty_rel, x[:0]).shape == (0, D_MODEL)
        batched = layer(dgl.batch([empty_rel, rel, empty_rel]), x)
        torch.testing.assert_close(batched, layer(rel, x), atol=1e-12, rtol=0)


def test_features_that_do_not_fit_the_layer_are_named():
    _, rel = smiles_to_graphs("CCO")
    layer = GRPEAttention(D_MODEL, HEADS)
    with pytest.raises(ValueError, match=r"feat has 2 rows but the relation graph has 3 nodes"):
        layer(rel, torch.randn(2, D_MODEL))
    for shape in ((3, 8), (3, 1, D_MODEL)):
        with pytest.raises(ValueError, match=re.escape(f"feat has shape {shape} but the layer takes [N, embed_dim={D_MODEL}]")):
            layer(rel, torch.randn(*shape))


@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.id)
def test_molecular_graph_for_the_relation_graph_is_a_config_error(v):
    # the careless call: the bond graph (edata feat, bond_class) where the relation graph belongs
    graph, rel = smiles_to_graphs("CCO", FEAT3D)
    layer = build(v)
    x = torch.randn(graph.num_nodes(), D_MODEL)
    if v.kind == "vanilla":  # plain attention reads no edge data: over the bonds, it is just that
        assert layer(graph, x).shape == x.shape
        return
    needed = ["spd", "bond"] if v.kind in ("grpe", "graphormer") else ["spd"]
    message = f"needs a relation graph with edata {needed}, got a graph whose edata is ['bond_class', 'feat']; pass the relation graph"
    with pytest.raises(ConfigError, match=re.escape(message)):
        layer(graph, x)
    assert layer(rel, x).shape == x.shape


# ---------------------------------------------------------------------------------------------
# Memory: GRPE's extra memory grows with E x H, not E x H x dh
# ---------------------------------------------------------------------------------------------
MEMORY_SMILES = [
    "CC(C)Cc1ccc(cc1)C(C)C(=O)OCCCCCCCCCC",
    "CCCCCCCCCCCCCCCCCCCCCCCCC",
    "c1ccc2cc3ccccc3cc2c1CCCCCCCCCCC",
    "CC(=O)Oc1ccccc1C(=O)OCCOCCOCCOCC",
]


def saved_for_backward(layer, graph, x):
    """Tensors autograd saves during one forward: list of (shape, numel, storage ptr, storage
    bytes), parameters (and views of them) excluded since they exist anyway."""
    param_storages = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    records = []

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in param_storages:
            records.append((tuple(t.shape), t.numel(), ptr, t.untyped_storage().nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(graph, x)
    total = sum({ptr: nbytes for _, _, ptr, nbytes in records}.values())  # each storage once
    return records, total


def test_grpe_saved_memory_grows_with_edges_times_heads_not_head_size():
    rels = [smiles_to_graphs(s)[1] for s in MEMORY_SMILES]  # complete relation graphs, ~25 atoms
    bg = dgl.batch(rels * 2)
    N, E, H = bg.num_nodes(), bg.num_edges(), 4
    assert E >= 20 * N
    dims = (32, 128)
    itemsize = 8  # float64
    saved, vanilla_saved = {}, {}
    for d in dims:
        torch.manual_seed(0)
        x = torch.randn(N, d, dtype=torch.float64)
        grpe = GRPEAttention(d, H).double()
        records, saved[d] = saved_for_backward(grpe, bg, x)
        _, vanilla_saved[d] = saved_for_backward(RelationAttention(d, H).double(), bg, x)
        dh = d // H
        biggest = max(numel for _, numel, _, _ in records)
        print(f"d={d} dh={dh}: N={N} E={E} H={H}; {len(records)} saved tensors, largest {biggest} elements "
              f"(E*H*dh = {E * H * dh}); saved bytes GRPE {saved[d]}, vanilla {vanilla_saved[d]}")
        for shape, numel, _, _ in records:
            assert numel < E * H * dh, f"saved tensor {shape} is as large as an [E, H, dh] table"
        enc = grpe.structure.encodings
        n_classes = enc.spatial_query.shape[0] + enc.edge_query.shape[0]
        assert biggest <= max(E * H, N * n_classes * H, 3 * N * d, n_classes * d)

    d1, d2 = dims
    delta_d = d2 - d1
    enc = GRPEEncodings(d2, H)
    table_rows = sum(t.shape[0] for t in enc.parameters())  # rows of all six tables
    growth = saved[d2] - saved[d1]
    # node level: what plain attention saves (the input, q|k|v and their padded blocks, z);
    # table level: the q/k/v table rows of the present classes, at most all rows twice over
    bound = (vanilla_saved[d2] - vanilla_saved[d1]) + itemsize * 2 * table_rows * delta_d
    per_edge_table = E * H * (d2 // H - d1 // H) * itemsize  # what one [E, H, dh] tensor would add
    extra_growth = (saved[d2] - vanilla_saved[d2]) - (saved[d1] - vanilla_saved[d1])
    print(f"growth {growth} B <= bound {bound} B (node+table terms) vs one [E,H,dh] table: "
          f"{per_edge_table} B; GRPE-over-vanilla growth {extra_growth} B "
          f"(table-level bound {itemsize * 2 * table_rows * delta_d} B)")
    assert growth <= bound
    assert bound <= per_edge_table / 2  # the bound really excludes per-edge head vectors
    # GRPE's own extra memory (over plain attention) grows only with its tables
    assert extra_growth <= itemsize * 2 * table_rows * delta_d
    # and at the larger width it is below the size of a single [E, H, dh] tensor
    extra = saved[d2] - vanilla_saved[d2]
    assert extra < E * d2 * itemsize
