"""Naive dense reference of the attention layers, written straight from SPEC sections 1-5.

Deliberately shares no code with ``dgl_graphtx.nn`` (nothing from the package is imported here):
pair classes, focus functions and masks are re-derived from the SPEC text, on explicit ``[N, N]``
matrices of one unbatched relation graph, in float64.

Conventions (SPEC section 1): a relation edge ``src = j -> dst = i`` is the pair (query ``i``, key
``j``); dense matrices are indexed ``[i, j]``; pairs absent from the relation graph are masked with
``-inf`` before the softmax over keys ``j``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np
import torch
from ogb.utils.features import get_bond_feature_dims

# ---------------------------------------------------------------------------------------------
# Constants from SPEC (and from OGB's bond feature sizes for the bond vocabulary)
# ---------------------------------------------------------------------------------------------
SPD_UNREACHABLE = -1  # SPEC 1
SPD_VIRTUAL = -2  # SPEC 1
#: mixed radix over OGB's categorical bond features: every tuple gets its own class in [0, prod)
NUM_BOND_TYPES = int(np.prod(get_bond_feature_dims()))
NO_EDGE = NUM_BOND_TYPES  # special classes after the bond classes (SPEC 1)
SELF = NUM_BOND_TYPES + 1
VIRTUAL = NUM_BOND_TYPES + 2
NUM_EDGE_CLASSES = NUM_BOND_TYPES + 3

MOIRE_UNREACHABLE_D = 1e6  # SPEC 3
MOIRE_MU_MIN = 0.5  # SPEC 3
MOIRE_SIGMA_MIN = 0.1  # SPEC 3
TRIANGLE_FLOOR = 1e-6  # SPEC 3
MOIRE_REFERENCE_SELF = 0.1  # SPEC 3 reference mode
MOIRE_REFERENCE_FLOOR = 1e-9  # SPEC 3 reference mode: f is floored at 1e-9 before its log
GRADFORMER_REFERENCE_UNREACHABLE = 510.0  # SPEC 4 reference mode

FOCUS_NAMES = ("gaussian", "laplacian", "cauchy", "triangle", "mirrored_sigmoid")


# ---------------------------------------------------------------------------------------------
# Relation graph -> dense matrices
# ---------------------------------------------------------------------------------------------
@dataclass
class DensePairs:
    """Dense view of one relation graph: ``[i, j]`` describes the pair (query i, key j)."""

    present: torch.Tensor  # bool [N, N]: the edge j -> i exists
    spd: torch.Tensor  # int64 [N, N] (0 where absent; never read there)
    bond: torch.Tensor  # int64 [N, N] (NO_EDGE where absent; never read there)
    dist: Optional[torch.Tensor]  # float64 [N, N] or None

    @property
    def n(self) -> int:
        return self.present.shape[0]


def dense_pairs(rel) -> DensePairs:
    """Scatter the relation graph's edge list and edata into dense ``[N, N]`` matrices."""
    n = rel.num_nodes()
    src, dst = (t.long() for t in rel.edges())
    present = torch.zeros(n, n, dtype=torch.bool)
    present[dst, src] = True
    assert int(present.sum()) == rel.num_edges(), "relation graph has duplicate pairs"
    spd = torch.zeros(n, n, dtype=torch.int64)
    spd[dst, src] = rel.edata["spd"].long()
    bond = torch.full((n, n), NO_EDGE, dtype=torch.int64)
    bond[dst, src] = rel.edata["bond"].long()
    dist = None
    if "dist" in rel.edata:
        dist = torch.zeros(n, n, dtype=torch.float64)
        dist[dst, src] = rel.edata["dist"].double()
    return DensePairs(present, spd, bond, dist)


def _map(matrix: torch.Tensor, fn) -> torch.Tensor:
    """Apply a scalar python function to every entry (naive on purpose)."""
    rows = [[fn(int(v)) for v in row] for row in matrix.tolist()]
    return torch.tensor(rows, dtype=torch.int64).reshape(matrix.shape)


# ---------------------------------------------------------------------------------------------
# Pair classes (SPEC 2; also used by the Graphormer baseline, SPEC 5)
# ---------------------------------------------------------------------------------------------
def spatial_class(spd: int, max_distance: int, reference: bool = False) -> int:
    """psi: 0..L hop counts, then FAR = L+1, UNREACHABLE = L+2, VIRTUAL = L+3.

    ``reference`` (GRPE authors' code): distance L already counts as FAR."""
    L = max_distance
    if spd == SPD_VIRTUAL:
        return L + 3
    if spd == SPD_UNREACHABLE:
        return L + 2
    assert spd >= 0, spd
    if spd > L or (reference and spd == L):
        return L + 1
    return spd


def num_spatial_classes(max_distance: int) -> int:
    return max_distance + 4


def edge_class(bond: int, reference: bool = False) -> int:
    """phi: the bond class; in GRPE ``reference`` mode the SELF class is unused (-> NO_EDGE)."""
    if reference and bond == SELF:
        return NO_EDGE
    return bond


# ---------------------------------------------------------------------------------------------
# Moire focus functions, log space (SPEC 3); formulated independently of the library
# ---------------------------------------------------------------------------------------------
def log_focus(name: str, d: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    diff = d - mu
    if name == "gaussian":
        return -(diff * diff) / sigma
    if name == "laplacian":
        return -diff.abs() / sigma
    if name == "cauchy":
        return -torch.log1p((diff / sigma) ** 2)
    if name == "triangle":
        inside = 1.0 - diff.abs() / sigma
        return torch.log(torch.maximum(inside, torch.full_like(inside, TRIANGLE_FLOOR)))
    if name == "mirrored_sigmoid":
        t = diff / sigma
        return -torch.logaddexp(torch.zeros_like(t), t)  # -log(1 + e^t)
    raise ValueError(name)


# ---------------------------------------------------------------------------------------------
# The reference layer
# ---------------------------------------------------------------------------------------------
def _project(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    out = x @ weight.T
    return out if bias is None else out + bias


def _grpe_terms(ref: bool, L: int, params: Dict[str, torch.Tensor], q: torch.Tensor, k: torch.Tensor, pairs: DensePairs):
    """GRPE's query/key biases ``[H, i, j]`` and per-pair value terms ``[H, i, j, dh]`` (``ref``: the
    authors' code; else the paper), from the per-head queries and keys ``[N, H, dh]``."""
    n, H, dh = q.shape
    psi = _map(pairs.spd, lambda s_: spatial_class(s_, L, ref))
    phi = _map(pairs.bond, lambda b_: edge_class(b_, ref))
    if ref:
        # SPEC 2, authors' preprocessing: the diagonal is first set to SELF, then every entry
        # whose distance is not 1 becomes NO_EDGE; the task token's distance to itself is 0.
        # So every self pair, the virtual node's included, is (spatial 0, NO_EDGE).
        eye = torch.eye(n, dtype=torch.bool)
        psi[eye] = spatial_class(0, L, ref)
        phi[eye] = NO_EDGE

    def per_pair(table):  # [C, d] -> [N, N, H, dh], row c split per head
        return table.reshape(table.shape[0], H, dh)

    PQ, PK, PV = (per_pair(params[t])[psi] for t in ("PQ", "PK", "PV"))
    EQ, EK, EV = (per_pair(params[t])[phi] for t in ("EQ", "EK", "EV"))
    q_i = q[:, None, :, :].expand(n, n, H, dh)  # [i, j, h, c] = q_i
    key_of_pair = k[:, None] if ref else k[None, :]  # reference: k_i, paper: k_j
    k_pair = key_of_pair.expand(n, n, H, dh)
    bias = (
        (q_i * PQ).sum(-1)
        + (k_pair * PK).sum(-1)
        + (q_i * EQ).sum(-1)
        + (k_pair * EK).sum(-1)
    ).permute(2, 0, 1)  # [H, i, j]
    return bias, (PV + EV).permute(2, 0, 1, 3)  # [H, i, j, dh]


def reference_attention(
    kind: str,
    mode: str,
    opts: Dict,
    params: Dict[str, torch.Tensor],
    x: torch.Tensor,
    pairs: DensePairs,
    attn_multiplier: Optional[torch.Tensor] = None,
):
    """Dense forward of one attention layer on one graph.

    Args:
        kind: ``vanilla`` | ``graphormer`` | ``grpe`` | ``moire`` | ``gradformer``.
        mode: the variant's mode (``paper`` / ``reference`` / ``decay``); ignored for baselines.
        opts: ``max_distance`` (grpe, graphormer), ``focus`` and ``distance`` (moire), ``slope``
            (gradformer reference mode: the LeakyReLU's negative slope).
        params: float64 tensors: ``qkv_w [3d, d]``, ``qkv_b``, ``out_w [d, d]``, ``out_b``, ``heads``
            (int) and the variant's structural parameters (see the test module).
        x: node features ``[N, d]``.
        pairs: dense relation-graph data.
        attn_multiplier: optional ``[H, N, N]`` factors applied to the attention weights before
            they weight the values (a known stand-in for attention dropout).

    Returns:
        ``(out [N, d], attn [H, N, N])`` where ``attn[h, i, j]`` is the weight of key j for query i.
    """
    x = x.double()
    n, d = x.shape
    H = int(params["heads"])
    dh = d // H
    scale = 1.0 / math.sqrt(dh)

    qkv = _project(x, params["qkv_w"], params["qkv_b"])  # [N, 3d]: q | k | v, each split per head
    q = qkv[:, :d].reshape(n, H, dh)
    k = qkv[:, d : 2 * d].reshape(n, H, dh)
    v = qkv[:, 2 * d :].reshape(n, H, dh)

    qk = torch.einsum("ihc,jhc->hij", q, k)  # [H, N(query), N(key)]
    spd = pairs.spd
    eye = torch.eye(n, dtype=torch.bool)
    unreachable = spd == SPD_UNREACHABLE
    virtual = spd == SPD_VIRTUAL
    value_extra = None  # [H, N, N, dh] added to v_j for pair (i, j) (GRPE, MoireGT's rbf values)

    if kind == "vanilla":
        s = qk * scale
    elif kind == "graphormer":
        L = opts["max_distance"]
        psi = _map(spd, lambda s_: spatial_class(s_, L))
        phi = _map(pairs.bond, edge_class)
        b = params["spatial_bias"]  # [C_s, H]
        c = params["edge_bias"]  # [C_e, H]
        s = qk * scale + b[psi].permute(2, 0, 1) + c[phi].permute(2, 0, 1)
    elif kind == "grpe":
        bias, value_extra = _grpe_terms(mode == "reference", opts["max_distance"], params, q, k, pairs)
        s = (qk + bias) * scale
    elif kind == "moire":
        if opts["distance"] == "dist":
            assert pairs.dist is not None
            D = pairs.dist.clone()
        else:
            D = spd.double()
        D = torch.where(unreachable, torch.full_like(D, MOIRE_UNREACHABLE_D), D)
        sigma = torch.clamp(params["width"], min=MOIRE_SIGMA_MIN)
        if mode == "paper":
            mu = torch.clamp(params["shift"], min=MOIRE_MU_MIN)  # mu' = max(mu, 0.5)
            logf = torch.stack([log_focus(opts["focus"], D, mu[h], sigma[h]) for h in range(H)])
        else:
            # authors' code: no clamp of mu; f formed, floored at 1e-9, then its log taken
            mu = params["shift"]
            f = torch.stack([torch.exp(log_focus(opts["focus"], D, mu[h], sigma[h])) for h in range(H)])
            logf = torch.log(torch.clamp(f, min=MOIRE_REFERENCE_FLOOR))
        # pairs touching the virtual node get no focus term (library docstring; MoireGT has no VN)
        logf = torch.where(virtual[None], torch.zeros_like(logf), logf)
        if mode == "paper":
            s = qk * scale + logf + params["self_weight"][:, None, None] * eye[None].double()
        else:
            s = (qk * scale) * logf + MOIRE_REFERENCE_SELF * eye[None].double()
        if opts.get("rbf"):
            # K Gaussians exp(-((D - c_k) / delta)^2), c_k = k * delta, delta = cutoff / (K - 1), none
            # on virtual-node pairs; a linear map to one logit bias per head, and a table [K, H, dh]
            # to one value vector per pair and head, added to v_j
            delta = opts["rbf_cutoff"] / (opts["rbf"] - 1)
            basis = torch.stack([torch.exp(-(((D - c * delta) / delta) ** 2)) for c in range(opts["rbf"])], dim=-1)
            basis = torch.where(virtual[..., None], torch.zeros_like(basis), basis)  # [i, j, K]
            s = s + (basis @ params["rbf_w"].T).permute(2, 0, 1)  # [H, i, j]
            value_extra = torch.einsum("ijk,khc->hijc", basis, params["rbf_v"])
    elif kind == "gradformer":
        lam = torch.sigmoid(params["decay_logit"])
        sp = params["start"]  # [H]
        hops = spd.double()[None].expand(H, n, n)
        if mode == "reference":
            hops = torch.where(unreachable[None], torch.full_like(hops, GRADFORMER_REFERENCE_UNREACHABLE), hops)
            excess = hops - sp[:, None, None]
            excess = torch.where(excess > 0, excess, opts["slope"] * excess)  # LeakyReLU
        else:
            excess = torch.clamp(hops - sp[:, None, None], min=0.0)  # ReLU
        if mode == "decay":
            log_mask = excess * torch.log(lam)
            log_mask = torch.where(unreachable[None], torch.full_like(log_mask, -math.inf), log_mask)
            log_mask = torch.where(virtual[None], torch.zeros_like(log_mask), log_mask)
            s = qk * scale + log_mask
        else:
            M = lam ** excess
            if mode == "paper":
                M = torch.where(unreachable[None], torch.zeros_like(M), M)  # spd = infinity
            M = torch.where(virtual[None], torch.ones_like(M), M)  # virtual-node pairs: M = 1
            s = (qk * scale) * M
    else:
        raise ValueError(kind)

    s = torch.where(pairs.present[None], s, torch.full_like(s, -math.inf))
    row_max = s.max(dim=-1, keepdim=True).values
    e = torch.exp(s - row_max)
    attn = e / e.sum(dim=-1, keepdim=True)  # softmax over keys j, per (head, query)

    weights = attn if attn_multiplier is None else attn * attn_multiplier
    z = torch.einsum("hij,jhc->ihc", weights, v)
    if value_extra is not None:
        z = z + torch.einsum("hij,hijc->ihc", weights, value_extra)
    out = _project(z.reshape(n, d), params["out_w"], params["out_b"])
    return out, attn
