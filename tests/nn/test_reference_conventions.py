"""The authors' conventions of each ``reference`` mode, checked on hand-computed small cases.

Each test names the convention and the official file it comes from (see docs/moire.md,
docs/gradformer.md, docs/grpe.md):

* MoireGT (RadialFocus ``src/layers.py``, ``MoireAttention``): ``F = f(D).clamp(min=1e-9)``
  before ``log F``; no clamp of the shift mu at run time (sigma still clamped at 0.1).
* Gradformer (``process_hop``): ``LeakyReLU(spd - sp, slope)`` with the slope a hyperparameter:
  0 in the official ``config.py`` (our default), 0.1 / 0.2 in their dataset scripts.
* GRPE (official ``preprocess_item``): the task token's pair with itself is spatial class 0 and
  NO_EDGE, its pairs with atoms are the TASK (virtual) classes.
"""
from __future__ import annotations

import math

import pytest
import torch

from dgl_graphtx.errors import ConfigError
from dgl_graphtx.featurize import smiles_to_graphs
from dgl_graphtx.models import ModelConfig, build_model
from dgl_graphtx.models.config import GradformerOptions
from dgl_graphtx.nn import DecayParameters, DecayTerm, GRPEEncodings, GRPETerm, MoireTerm
from dgl_graphtx.relation_graph import RelationConfig

HEXANE = "CCCCCC"  # hop distances 0..5 along the chain


def _query0(rel):
    """Edge ids of the pairs (query 0, key j) ordered by key j."""
    src, dst = rel.edges()
    ids = torch.nonzero(dst == 0).flatten()
    return ids[torch.argsort(src[ids])]


# ---------------------------------------------------------------------------------------------
# MoireGT: focus floored at 1e-9 before the log, mu not clamped
# ---------------------------------------------------------------------------------------------
def test_moire_reference_floors_focus_at_1e9_and_leaves_mu_unclamped():
    _, rel = smiles_to_graphs(HEXANE)
    term = MoireTerm(num_heads=2, focus="gaussian", distance="spd", mode="reference")
    with torch.no_grad():
        term.shift.copy_(torch.tensor([-1.0, 2.0]))  # head 0 below paper mode's 0.5 clamp
        term.width.copy_(torch.tensor([0.1, 0.05]))  # head 1 below the 0.1 clamp: sigma = 0.1
    log_f = term.log_focus(rel)[_query0(rel)]  # keys at 0..5 hops from atom 0
    floor = math.log(1e-9)  # -20.723
    # head 0: -(d + 1)^2 / 0.1 = -10, -40, -90, ... -> only d = 0 stays above the floor
    expect0 = [max(-((d + 1.0) ** 2) / 0.1, floor) for d in range(6)]
    # head 1: -(d - 2)^2 / 0.1 = -40, -10, 0, -10, -40, -90
    expect1 = [max(-((d - 2.0) ** 2) / 0.1, floor) for d in range(6)]
    assert expect0[0] == pytest.approx(-10.0) and expect0[1] == pytest.approx(floor)
    torch.testing.assert_close(log_f[:, 0], torch.tensor(expect0), atol=1e-5, rtol=0)
    torch.testing.assert_close(log_f[:, 1], torch.tensor(expect1), atol=1e-5, rtol=0)


def test_moire_paper_mode_has_no_floor_and_clamps_mu():
    _, rel = smiles_to_graphs(HEXANE)
    term = MoireTerm(num_heads=1, focus="gaussian", distance="spd", mode="paper")
    with torch.no_grad():
        term.shift.fill_(-1.0)  # clamped to 0.5
        term.width.fill_(0.1)
    log_f = term.log_focus(rel)[_query0(rel), 0]
    expect = [-((d - 0.5) ** 2) / 0.1 for d in range(6)]  # down to -202.5: far below log 1e-9
    torch.testing.assert_close(log_f, torch.tensor(expect), atol=1e-4, rtol=0)


def test_moire_reference_logits_use_the_floored_focus():
    """The logit of a far pair is ``(q.k / sqrt(dh)) * log 1e-9``, not ``* log f``."""
    _, rel = smiles_to_graphs(HEXANE)
    term = MoireTerm(num_heads=1, focus="laplacian", distance="spd", mode="reference")
    with torch.no_grad():
        term.shift.fill_(0.0)
        term.width.fill_(0.1)  # log f = -10 d: floored from d = 3 on (-30 < -20.7)
    e = _query0(rel)
    qk = torch.linspace(-1.0, 1.0, rel.num_edges())[:, None]
    logits = term.logits(rel, None, None, qk, 0.5, None)[e, 0]
    log_f = torch.tensor([max(-10.0 * d, math.log(1e-9)) for d in range(6)])
    self_bonus = torch.tensor([0.1, 0, 0, 0, 0, 0])
    torch.testing.assert_close(logits, qk[e, 0] * 0.5 * log_f + self_bonus, atol=1e-5, rtol=0)


# ---------------------------------------------------------------------------------------------
# Gradformer: LeakyReLU slope of the reference mode
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("slope", [0.0, 0.1, 0.2])
def test_gradformer_reference_slope_below_the_start_point(slope):
    """Hops below the start point sp give ``M = lambda ** (slope * (hop - sp))`` (> 1 for slope > 0)."""
    _, rel = smiles_to_graphs(HEXANE)
    term = DecayTerm(DecayParameters(1, init_start=2.5, decay=0.5), mode="reference", slope=slope)
    mask = term.log_mask(rel)[_query0(rel), 0].exp()
    excess = [h - 2.5 for h in range(6)]
    expect = [0.5 ** (x if x > 0 else slope * x) for x in excess]
    torch.testing.assert_close(mask, torch.tensor(expect), atol=1e-6, rtol=1e-6)
    if slope == 0.0:  # the official default: exactly the paper's ReLU mask on reachable pairs
        paper = DecayTerm(DecayParameters(1, init_start=2.5, decay=0.5), mode="paper")
        torch.testing.assert_close(paper.log_mask(rel), term.log_mask(rel))


def test_gradformer_reference_unreachable_pairs_sit_at_510_hops():
    _, rel = smiles_to_graphs("CC.O")
    term = DecayTerm(DecayParameters(1, init_start=1.0, decay=0.5), mode="reference", slope=0.2)
    unreachable = rel.edata["spd"] == -1
    assert unreachable.any()
    log_m = term.log_mask(rel)[unreachable, 0]
    torch.testing.assert_close(log_m, torch.full_like(log_m, 509.0 * math.log(0.5)))


@pytest.mark.parametrize("mode", ["paper", "decay"])
def test_gradformer_slope_is_refused_outside_reference_mode(mode):
    with pytest.raises(ValueError, match="reference"):
        DecayTerm(DecayParameters(2), mode=mode, slope=0.1)
    with pytest.raises(ConfigError, match="gradformer.slope"):
        GradformerOptions(mode=mode, slope=0.1)


@pytest.mark.parametrize("slope", [-0.1, 1.0, float("nan")])
def test_gradformer_slope_range(slope):
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        GradformerOptions(mode="reference", slope=slope)


def test_gradformer_model_layers_receive_the_configured_slope():
    cfg = ModelConfig(variant="gradformer", num_layers=2, hidden_dim=16, num_heads=2, virtual_node=False,
                      readout="mean", gradformer=GradformerOptions(mode="reference", slope=0.2))
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    terms = [m for m in build_model(cfg).modules() if isinstance(m, DecayTerm)]
    assert len(terms) == 2 and all(t.slope == 0.2 and t.mode == "reference" for t in terms)


# ---------------------------------------------------------------------------------------------
# GRPE: the virtual node's self pair
# ---------------------------------------------------------------------------------------------
def _pair_classes(term: GRPETerm, rel):
    """(spatial, edge) class per edge, read back from the term's joint classes."""
    cls, spatial_rows, edge_rows = term.prepare(rel).classes
    return spatial_rows[cls], edge_rows[cls]


@pytest.mark.parametrize("smiles", ["CC(=O)O", "c1ccccc1O.[Na+].[Cl-]", "C"])
def test_grpe_reference_virtual_node_self_pair_is_spatial_0_no_edge(smiles):
    _, rel = smiles_to_graphs(smiles, relation=RelationConfig(virtual_node=True))
    enc = GRPEEncodings(16, 2, max_distance=3)
    vocab, vn = enc.vocab, rel.num_nodes() - 1
    src, dst = rel.edges()
    vn_self = (src == vn) & (dst == vn)
    vn_atom = ((src == vn) | (dst == vn)) & ~vn_self
    atom_self = (src == dst) & ~vn_self
    assert int(vn_self.sum()) == 1 and int(vn_atom.sum()) == 2 * vn

    psi, phi = _pair_classes(GRPETerm(enc, mode="reference"), rel)
    assert psi[vn_self].tolist() == [0] and phi[vn_self].tolist() == [vocab.no_edge]
    assert (psi[atom_self] == 0).all() and (phi[atom_self] == vocab.no_edge).all()
    assert (psi[vn_atom] == 3 + 3).all() and (phi[vn_atom] == vocab.virtual).all()  # VIRTUAL = L + 3

    psi, phi = _pair_classes(GRPETerm(enc, mode="paper"), rel)  # paper mode: VN pairs all VIRTUAL
    assert psi[vn_self].tolist() == [6] and phi[vn_self].tolist() == [vocab.virtual]
    assert (phi[atom_self] == vocab.self_pair).all()


def test_grpe_reference_virtual_node_self_logit_by_hand():
    """The VN's self logit reads the spatial-0 and NO_EDGE rows, with the key terms on k_i."""
    _, rel = smiles_to_graphs("CCO", relation=RelationConfig(virtual_node=True))
    torch.manual_seed(0)
    enc = GRPEEncodings(8, 2, max_distance=3)
    term = GRPETerm(enc, mode="reference")
    n = rel.num_nodes()
    q, k = torch.randn(n, 2, 4), torch.randn(n, 2, 4)
    src, dst = rel.edges()
    e = int(torch.nonzero((src == n - 1) & (dst == n - 1)))
    qk = torch.zeros(rel.num_edges(), 2)
    qk[e] = (q[n - 1] * k[n - 1]).sum(-1)
    with torch.no_grad():
        logits = term.logits(rel, q, k, qk, 0.5, term.prepare(rel))[e]
    no_edge = enc.vocab.no_edge
    qv, kv = q[n - 1], k[n - 1]
    expect = 0.5 * (
        (qv * kv).sum(-1)
        + (qv * (enc.spatial_query[0] + enc.edge_query[no_edge])).sum(-1)
        + (kv * (enc.spatial_key[0] + enc.edge_key[no_edge])).sum(-1)
    )
    torch.testing.assert_close(logits, expect.detach())
