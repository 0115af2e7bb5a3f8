"""Every attention variant and mode against the naive dense reference of ``dense_reference.py``.

The DGL path (float64) must match the per-graph dense computation written from SPEC sections 1-5
to 1e-6, for outputs and for the per-edge attention weights, on: a molecule, the molecule with a
virtual node, disconnected salts (with and without a virtual node), a single atom (with and
without a virtual node), ``hops=2`` and ``radius=3.0`` truncated relation graphs, and a
``dgl.batch`` of several of these. Parameters are perturbed away from their initial values
(distinct per-head shifts/widths/start points; Moire heads half inside, half below the clamps).
"""
from __future__ import annotations

from functools import lru_cache
from typing import List

import numpy as np
import pytest
import torch
from rdkit import Chem

import dgl_graphtx  # noqa: F401  (sets the DGL backend)
import dgl
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.relation_graph import RelationConfig

import dense_reference as ref
from attention_variants import (ASPIRIN, D_MODEL, FEAT3D, HEADS, SALT, SALT2, VARIANTS, Variant, block_dropout_mask, build, read_params,
                                run_reference)

ATOL = RTOL = 1e-6

CASES = {
    "mol": (ASPIRIN, RelationConfig()),
    "mol_vn": (ASPIRIN, RelationConfig(virtual_node=True)),
    "salt": (SALT, RelationConfig()),
    "salt_vn": (SALT2, RelationConfig(virtual_node=True)),
    "single": ("C", RelationConfig()),
    "single_vn": ("C", RelationConfig(virtual_node=True)),
    "hops2": (ASPIRIN, RelationConfig("hops", hops=2)),
    "radius3": (ASPIRIN, RelationConfig("radius", radius=3.0)),
    "salt_radius3": (SALT2, RelationConfig("radius", radius=3.0)),
}
BATCH = ["mol", "salt_vn", "single", "hops2", "radius3", "salt", "single_vn", "salt_radius3"]


@lru_cache(maxsize=None)
def graphs(case: str):
    smiles, rc = CASES[case]
    return smiles_to_graphs(smiles, FEAT3D, rc)


def relation_graphs(case: str) -> List:
    return [graphs(c)[1] for c in BATCH] if case == "batch" else [graphs(case)[1]]


# ---------------------------------------------------------------------------------------------
# Variant catalogue
# ---------------------------------------------------------------------------------------------
MOIRE_SHIFTS = [0.8, 2.1, 0.3, -0.4]  # heads 2, 3 below mu >= 0.5
MOIRE_WIDTHS = [0.7, 1.6, 0.05, -0.2]  # heads 2, 3 below sigma >= 0.1
GRADFORMER_STARTS = [0.4, 1.3, 2.2, 3.6]


def perturb(layer, v: Variant, seed: int = 0):
    """Move every parameter away from its initial value (the tests must not pass trivially)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            scale = 0.5 if name.startswith("structure.") else 0.2
            p.add_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
        s = layer.structure
        if v.kind == "moire":
            s.shift.copy_(torch.tensor(MOIRE_SHIFTS))
            s.width.copy_(torch.tensor(MOIRE_WIDTHS))
        if v.kind == "gradformer":
            s.params.start.copy_(torch.tensor(GRADFORMER_STARTS))
    return layer


def _params():
    out = []
    for v in VARIANTS:
        for case in list(CASES) + ["batch"]:
            out.append(pytest.param(v, case, id=f"{v.id}-{case}"))
    return out


def edge_slices(bg):
    """Per graph of a batch: (node slice, edge slice)."""
    n_off = np.concatenate([[0], np.cumsum(bg.batch_num_nodes().numpy())])
    e_off = np.concatenate([[0], np.cumsum(bg.batch_num_edges().numpy())])
    return [(slice(n_off[g], n_off[g + 1]), slice(e_off[g], e_off[g + 1])) for g in range(bg.batch_size)]


@pytest.mark.parametrize("v,case", _params())
def test_matches_dense_reference(v: Variant, case: str):
    torch.manual_seed(0)
    layer = perturb(build(v), v, seed=1).double().eval()
    rels = relation_graphs(case)
    bg = dgl.batch(rels) if len(rels) > 1 else rels[0]
    x = torch.randn(bg.num_nodes(), D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        out, attn = layer(bg, x, get_attention=True)
    assert out.shape == x.shape and attn.shape == (bg.num_edges(), HEADS)
    P = read_params(layer, v)

    if len(rels) == 1:
        slices = [(slice(0, bg.num_nodes()), slice(0, bg.num_edges()))]
    else:
        assert bg.batch_size == len(rels)
        slices = edge_slices(bg)
    src_b, dst_b = (t.long() for t in bg.edges())
    for rel, (ns, es) in zip(rels, slices):
        ref_out, ref_attn = run_reference(v, P, x[ns], rel)
        torch.testing.assert_close(out[ns], ref_out, atol=ATOL, rtol=RTOL)
        src, dst = src_b[es] - ns.start, dst_b[es] - ns.start
        torch.testing.assert_close(attn[es], ref_attn[:, dst, src].T, atol=ATOL, rtol=RTOL)


# ---------------------------------------------------------------------------------------------
# The reference's inputs and non-triviality of the comparison
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_dense_inputs_agree_with_rdkit(case):
    """The dense matrices the reference reads are what SPEC 1 says, checked against RDKit directly."""
    smiles, rc = CASES[case]
    g, rel = graphs(case)
    pairs = ref.dense_pairs(rel)
    # nodes are atoms in canonical order: renumber the input the same way (input_atom map)
    mol = Chem.RenumberAtoms(Chem.MolFromSmiles(smiles), g.ndata["input_atom"].tolist())
    n = mol.GetNumAtoms()
    topo = torch.from_numpy(Chem.GetDistanceMatrix(mol))
    reach = topo < 1e6
    expect_spd = torch.where(reach, topo.long(), torch.full_like(topo.long(), ref.SPD_UNREACHABLE))
    pos = g.ndata["pos"].double()
    geo = torch.cdist(pos, pos)
    if rc.mode == "complete":
        expect_present = torch.ones(n, n, dtype=torch.bool)
    elif rc.mode == "hops":
        expect_present = reach & (topo <= rc.hops)
    else:
        expect_present = geo <= rc.radius + 1e-6
    expect_present |= torch.eye(n, dtype=torch.bool)
    a = slice(0, n)
    assert torch.equal(pairs.present[a, a], expect_present)
    assert torch.equal(pairs.spd[a, a][expect_present], expect_spd[expect_present])
    bonded = (topo == 1) & expect_present
    bond = pairs.bond[a, a]
    assert (bond[bonded] < ref.NUM_BOND_TYPES).all() and (bond[bonded] >= 0).all()
    assert (bond[expect_present & ~bonded & ~torch.eye(n, dtype=torch.bool)] == ref.NO_EDGE).all()
    assert (bond.diagonal() == ref.SELF).all()
    torch.testing.assert_close(pairs.dist[a, a][expect_present], geo[expect_present], atol=1e-5, rtol=0)
    if rc.virtual_node:
        assert pairs.n == n + 1 and pairs.present[n].all() and pairs.present[:, n].all()
        assert (pairs.spd[n] == ref.SPD_VIRTUAL).all() and (pairs.spd[:, n] == ref.SPD_VIRTUAL).all()
        assert (pairs.bond[n] == ref.VIRTUAL).all() and (pairs.bond[:, n] == ref.VIRTUAL).all()
    else:
        assert pairs.n == n


def test_truncated_graphs_really_drop_pairs():
    """The truncated cases must leave pairs out, and the salts must contain unreachable pairs."""
    for case in ("hops2", "radius3", "salt_radius3"):
        assert not ref.dense_pairs(graphs(case)[1]).present.all(), case
    for case in ("salt", "salt_vn", "salt_radius3"):
        assert (graphs(case)[1].edata["spd"] == ref.SPD_UNREACHABLE).any(), case


@pytest.mark.parametrize("case", ["mol_vn", "salt_vn"])
def test_structure_terms_and_modes_change_the_reference(case):
    """Guards against a trivially passing comparison: each variant's structural term moves the
    output away from plain attention with the same projections, and the modes differ."""
    rel = graphs(case)[1]
    x = torch.randn(rel.num_nodes(), D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    outs = {}
    for v in VARIANTS:
        layer = perturb(build(v), v, seed=1)  # the q/k/v/out projections are perturbed identically
        outs[v] = run_reference(v, read_params(layer, v), x, rel)[0]
    vanilla = outs[Variant("vanilla")]
    for v, out in outs.items():
        if v.kind != "vanilla":
            assert (out - vanilla).abs().max() > 1e-3, v.id
    pairs = [(Variant("grpe", "paper"), Variant("grpe", "reference"))]
    pairs += [(Variant("moire", "paper", f, d), Variant("moire", "reference", f, d))
              for f in ref.FOCUS_NAMES for d in ("dist", "spd")]
    pairs += [(Variant("moire", "paper", f, "dist"), Variant("moire", "paper", f, "spd")) for f in ref.FOCUS_NAMES]
    pairs += [(Variant("moire", m, "gaussian", d), Variant("moire", m, "gaussian", d, rbf=6))
              for m in ("paper", "reference") for d in ("dist", "spd")]
    pairs += [(Variant("gradformer", a), Variant("gradformer", b))
              for a, b in [("paper", "decay"), ("paper", "reference"), ("decay", "reference")]]
    for a, b in pairs:
        assert (outs[a] - outs[b]).abs().max() > 1e-3, (a.id, b.id)


@pytest.mark.parametrize("focus", ref.FOCUS_NAMES)
def test_moire_clamps(focus):
    """mu' = max(mu, 0.5), sigma' = max(sigma, 0.1): moving a parameter below its clamp changes
    nothing, moving one above it changes the output."""
    v = Variant("moire", "paper", focus, "dist")
    rel = graphs("mol")[1]
    x = torch.randn(rel.num_nodes(), D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    layer = perturb(build(v), v, seed=1).double().eval()
    with torch.no_grad():
        base = layer(rel, x)
        s = layer.structure
        s.shift[2] = -3.0  # was 0.3, still below 0.5
        s.width[3] = 0.01  # was -0.2, still below 0.1
        torch.testing.assert_close(layer(rel, x), base, atol=1e-12, rtol=0)
        s.shift[2] = 1.4  # above the clamp now
        assert (layer(rel, x) - base).abs().max() > 1e-6
        s.shift[2] = 0.3
        s.width[3] = 0.6
        assert (layer(rel, x) - base).abs().max() > 1e-6


@pytest.mark.parametrize("aggregation", ["message_passing", "dense_blocks"])
@pytest.mark.parametrize("v", [Variant("vanilla"), Variant("grpe", "paper"), Variant("grpe", "reference")], ids=lambda v: v.id)
def test_dropped_weights_feed_every_value_term(v, aggregation):
    """SPEC 2: z_i = sum_j a_ij (v_j + P^V + E^V) with a taken after attention dropout, so the
    graph-encoded value terms see the same dropped weights as v_j. The layer's own dropout
    (p=0.5: weights zeroed or doubled) runs from a known seed; its per-edge mask is drawn again from
    that seed (the forward pass draws no other random numbers): per edge on the message-passing
    path, per slot of the softmax blocks on the dense-block path."""
    rel = graphs("salt_vn")[1]
    x = torch.randn(rel.num_nodes(), D_MODEL, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    layer = perturb(build(v, attn_dropout=0.5), v, seed=1).double().train()
    layer.aggregation = aggregation
    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(6)
        out = layer(rel, x)
        torch.manual_seed(6)
        mask = torch.nn.functional.dropout(torch.ones(rel.num_edges(), HEADS, dtype=torch.float64), 0.5, True)
    if aggregation == "dense_blocks":
        mask = block_dropout_mask(rel, HEADS, 0.5, seed=6)
    assert set(mask.unique().tolist()) == {0.0, 2.0}
    src, dst = (t.long() for t in rel.edges())
    n = rel.num_nodes()
    dense_mask = torch.zeros(HEADS, n, n, dtype=torch.float64)
    dense_mask[:, dst, src] = mask.T
    ref_out, _ = run_reference(v, read_params(layer, v), x, rel, attn_multiplier=dense_mask)
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=RTOL)
    plain, _ = run_reference(v, read_params(layer, v), x, rel)
    assert (plain - ref_out).abs().max() > 1e-3
