"""Attention throughput: the DGL relation-graph layers next to dense padded PyTorch of the same equation.

For each variant (vanilla, graphormer, grpe, moire, gradformer), molecule size (FreeSolv-like,
~9 heavy atoms; ZINC-like, ~23 heavy atoms) and relation graph (complete; truncated ``hops=3``)
this times, at batch 128, d = 80, 8 heads:

* the DGL path: ``layer(relation_graph, x)`` with the batched relation graph of a
  ``MoleculeDataset`` batch and packed node features ``x [N_total, d]``, as a user runs it
  (``aggregation="auto"``: per-graph dense blocks for these molecule batches);
* the same layer forced onto DGL message passing (``aggregation="message_passing"``, the path
  before the dense blocks), timed in the same run for the before/after comparison;
* the dense path: a padded implementation of the same equation written below (``[B, H, Nmax,
  Nmax]`` logits with the variant's structural terms computed from per-graph ``[B, Nmax, Nmax]``
  spd / bond tensors, masked softmax with the padding mask and the truncation mask, value
  aggregation including GRPE's graph-encoded values), holding copies of the DGL layer's parameters.

"forward" runs under ``torch.no_grad()``; "forward+backward" computes the loss ``sum(out * w)``
(fixed random ``w``, zero on padding) and ``torch.autograd.grad`` for the input and every
parameter. Packing / padding conversions and the dense structure tensors are prepared outside the
timed region. Before timing, the dense path is checked against the DGL layer in float64 on the
benchmark batch (output and input gradient, max abs difference <= 1e-6).

Target: DGL path >= 1.0x the dense path for forward+backward at batch 128 (reported, not asserted).

Run:  .venv/bin/python benchmarks/attention_speed.py [--quick] [--csv PATH] [--profile VARIANT]
"""
from __future__ import annotations

import argparse
import copy
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _molecules as M  # noqa: E402
import _report as R  # noqa: E402
import _timing as T  # noqa: E402

import dgl  # noqa: E402
from dgl_graphtx.datasets import MoleculeDataset  # noqa: E402
from dgl_graphtx.featurize.molecule import MOLECULE_BOND_VOCAB  # noqa: E402
from dgl_graphtx.nn import (  # noqa: E402
    GradformerAttention,
    GraphormerAttention,
    GRPEAttention,
    MoireAttention,
    RelationAttention,
)
from dgl_graphtx.relation_graph import RelationConfig  # noqa: E402

TARGET_RATIO = 1.0
CHECK_ATOL = 1e-6
VARIANTS = ("vanilla", "graphormer", "grpe", "moire", "gradformer")
SIZES = ("freesolv", "zinc")
RELATIONS = ("complete", "hops=3")
SPD_UNREACHABLE, SPD_VIRTUAL = -1, -2  # SPEC section 1


# ---------------------------------------------------------------------------------------------
# DGL layers
# ---------------------------------------------------------------------------------------------
def make_layer(variant: str, d: int, heads: int) -> RelationAttention:
    if variant == "vanilla":
        return RelationAttention(d, heads)
    if variant == "graphormer":
        return GraphormerAttention(d, heads)
    if variant == "grpe":
        return GRPEAttention(d, heads, mode="paper")
    if variant == "moire":
        return MoireAttention(d, heads, focus="gaussian", distance="spd", mode="paper")
    if variant == "gradformer":
        return GradformerAttention(d, heads, mode="paper")
    raise ValueError(variant)


def uses_virtual_node(variant: str) -> bool:
    """GRPE reads out through its virtual node, so it is benchmarked on relation graphs with one."""
    return variant == "grpe"


def perturb(layer: nn.Module, seed: int) -> nn.Module:
    """Move parameters off their initial values (zero biases would make the equality check trivial)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            scale = 0.3 if name.startswith("structure.") else 0.1
            p.add_(scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return layer


# ---------------------------------------------------------------------------------------------
# Dense padded implementation of the same equations (SPEC sections 2-5)
# ---------------------------------------------------------------------------------------------
@dataclass
class DensePairs:
    """Per-graph pair data of a batch, padded to ``[B, Nmax, Nmax]`` and indexed ``[query i, key j]``."""

    spd: torch.Tensor  # int64; 0 on padding
    bond: torch.Tensor  # int64; NO_EDGE on padding
    allowed: torch.Tensor  # bool: relation edge j -> i exists (or i == j, so padding rows stay finite)
    eye: torch.Tensor  # bool [Nmax, Nmax]


@dataclass
class Layout:
    """How packed node rows map to padded ``[B, Nmax]`` slots."""

    batch_size: int
    max_nodes: int
    slot: torch.Tensor  # [N_total]: b * Nmax + local index

    def pad(self, packed: torch.Tensor) -> torch.Tensor:
        out = packed.new_zeros(self.batch_size * self.max_nodes, *packed.shape[1:])
        out[self.slot] = packed
        return out.view(self.batch_size, self.max_nodes, *packed.shape[1:])

    def unpad(self, padded: torch.Tensor) -> torch.Tensor:
        return padded.reshape(self.batch_size * self.max_nodes, *padded.shape[2:])[self.slot]


def dense_layout(rel: dgl.DGLGraph, no_edge: int) -> Tuple[Layout, DensePairs]:
    """Scatter a batched relation graph's edges and ``spd`` / ``bond`` into padded dense tensors."""
    counts = rel.batch_num_nodes().long()
    b, n = int(counts.numel()), int(counts.max())
    offsets = torch.cumsum(counts, 0) - counts
    graph_of = torch.repeat_interleave(torch.arange(b), counts)
    local = torch.arange(rel.num_nodes()) - offsets[graph_of]
    layout = Layout(b, n, graph_of * n + local)
    src, dst = (t.long() for t in rel.edges())
    g = graph_of[dst]
    i, j = local[dst], local[src]
    spd = torch.zeros(b, n, n, dtype=torch.int64)
    bond = torch.full((b, n, n), no_edge, dtype=torch.int64)
    allowed = torch.zeros(b, n, n, dtype=torch.bool)
    spd[g, i, j] = rel.edata["spd"].long()
    bond[g, i, j] = rel.edata["bond"].long()
    allowed[g, i, j] = True
    if int(allowed.sum()) != rel.num_edges():
        raise ValueError("relation graph has duplicate pairs")
    eye = torch.eye(n, dtype=torch.bool)
    return layout, DensePairs(spd, bond, allowed | eye, eye)


def spatial_classes(spd: torch.Tensor, max_distance: int) -> torch.Tensor:
    """psi: hop counts 0..L, FAR = L+1, UNREACHABLE = L+2, VIRTUAL = L+3 (SPEC 2, paper mode)."""
    psi = torch.where(spd > max_distance, torch.full_like(spd, max_distance + 1), spd)
    psi = torch.where(spd == SPD_UNREACHABLE, torch.full_like(spd, max_distance + 2), psi)
    return torch.where(spd == SPD_VIRTUAL, torch.full_like(spd, max_distance + 3), psi)


class DenseAttention(nn.Module):
    """Padded multi-head attention with the structural term of one variant.

    Holds copies of a DGL layer's parameters (``qkv``, ``out_proj`` and the structural ones), so
    both paths compute the same function; the structural terms are recomputed from ``spd`` / ``bond``
    on every call, as the DGL layers do from ``edata``.
    """

    def __init__(self, variant: str, layer: RelationAttention) -> None:
        super().__init__()
        self.variant = variant
        self.h, self.dh, self.d = layer.num_heads, layer.head_dim, layer.embed_dim
        self.scale = layer.scale
        self.qkv = copy.deepcopy(layer.qkv)
        self.out_proj = copy.deepcopy(layer.out_proj)
        term = layer.structure
        clone = lambda p: nn.Parameter(p.detach().clone())  # noqa: E731
        if variant == "graphormer":
            self.max_distance = term.spatial.max_distance
            self.spatial_bias, self.edge_bias = clone(term.spatial_bias), clone(term.edge_bias)  # [C, H]
        elif variant == "grpe":
            enc = term.encodings
            if term.mode != "paper":
                raise ValueError("dense GRPE implements paper mode only")
            self.max_distance = enc.max_distance
            self.pq, self.pk, self.pv = (clone(t) for t in (enc.spatial_query, enc.spatial_key, enc.spatial_value))
            self.eq, self.ek, self.ev = (clone(t) for t in (enc.edge_query, enc.edge_key, enc.edge_value))
        elif variant == "moire":
            if term.focus != "gaussian" or term.distance != "spd" or term.mode != "paper":
                raise ValueError("dense Moire implements the gaussian focus on spd, paper mode only")
            self.shift, self.width, self.self_weight = clone(term.shift), clone(term.width), clone(term.self_weight)
        elif variant == "gradformer":
            if term.mode != "paper":
                raise ValueError("dense Gradformer implements paper mode only")
            self.start = clone(term.params.start)
            self.register_buffer("decay_logit", term.params.decay_logit.detach().clone())
        elif variant != "vanilla":
            raise ValueError(variant)

    def forward(self, x: torch.Tensor, pairs: DensePairs) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)  # each [B, H, N, dh]
        qk = q @ k.transpose(-1, -2)  # [B, H, i, j]
        extra = None
        spd = pairs.spd
        if self.variant == "vanilla":
            s = qk * self.scale
        elif self.variant == "graphormer":
            psi = spatial_classes(spd, self.max_distance)
            bias = self.spatial_bias[psi] + self.edge_bias[pairs.bond]  # [B, i, j, H]
            s = qk * self.scale + bias.permute(0, 3, 1, 2)
        elif self.variant == "grpe":
            psi = spatial_classes(spd, self.max_distance)
            phi = pairs.bond
            c_s, c_e = self.pq.shape[0], self.eq.shape[0]
            # per (node, class) products, gathered per pair by class (GRPE paper 4.4, dense form)
            q_tab = torch.einsum("bhnd,chd->bhnc", q, torch.cat([self.pq, self.eq]))  # [B, H, N, Cs+Ce]
            k_tab = torch.einsum("bhnd,chd->bhnc", k, torch.cat([self.pk, self.ek]))
            shape = (b, self.h, n, n)
            psi_q, phi_q = psi[:, None].expand(shape), (phi + c_s)[:, None].expand(shape)  # [b, h, i, j]
            psi_k = psi.transpose(1, 2)[:, None].expand(shape)  # [b, h, j, i]
            phi_k = (phi + c_s).transpose(1, 2)[:, None].expand(shape)
            bias = q_tab.gather(-1, psi_q) + q_tab.gather(-1, phi_q)  # q_i . table[class_ij]
            bias = bias + (k_tab.gather(-1, psi_k) + k_tab.gather(-1, phi_k)).transpose(-1, -2)  # k_j . table[class_ij]
            s = (qk + bias) * self.scale
            extra = (psi_q, phi[:, None].expand(shape), c_s, c_e)
        elif self.variant == "moire":
            dist = torch.where(spd == SPD_UNREACHABLE, torch.full_like(spd, 10**6), spd).to(qk.dtype)
            mu = torch.clamp(self.shift, min=0.5)[None, :, None, None]
            sigma = torch.clamp(self.width, min=0.1)[None, :, None, None]
            log_f = -((dist[:, None] - mu) ** 2) / sigma  # gaussian focus, log space
            log_f = torch.where((spd == SPD_VIRTUAL)[:, None], torch.zeros_like(log_f), log_f)
            s = qk * self.scale + log_f + self.self_weight[None, :, None, None] * pairs.eye.to(qk.dtype)
        elif self.variant == "gradformer":
            hops = spd.to(qk.dtype)[:, None]  # [B, 1, i, j]
            log_decay = torch.log(torch.sigmoid(self.decay_logit)).to(qk.dtype)
            log_m = F.relu(hops - self.start[None, :, None, None]) * log_decay
            log_m = torch.where((spd == SPD_UNREACHABLE)[:, None], torch.full_like(log_m, -math.inf), log_m)
            log_m = torch.where((spd == SPD_VIRTUAL)[:, None], torch.zeros_like(log_m), log_m)
            s = qk * self.scale * torch.exp(log_m)
        s = s.masked_fill(~pairs.allowed[:, None], -math.inf)
        attn = torch.softmax(s, dim=-1)
        z = attn @ v  # [B, H, N, dh]
        if extra is not None:  # GRPE graph-encoded values: attention mass per class times the table
            psi_idx, phi_idx, c_s, c_e = extra
            mass_s = attn.new_zeros(b, self.h, n, c_s).scatter_add_(-1, psi_idx, attn)
            mass_e = attn.new_zeros(b, self.h, n, c_e).scatter_add_(-1, phi_idx, attn)
            z = z + torch.einsum("bhnc,chd->bhnd", mass_s, self.pv) + torch.einsum("bhnc,chd->bhnd", mass_e, self.ev)
        return self.out_proj(z.transpose(1, 2).reshape(b, n, self.d))


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------
class Inputs:
    """Molecules per size, and batched relation graphs built (once) from MoleculeDatasets."""

    def __init__(self, batch_size: int, seed: int) -> None:
        self.batch_size, self.seed = batch_size, seed
        self._smiles: Dict[str, List[str]] = {}
        self._graphs: Dict[Tuple[str, str], dgl.DGLGraph] = {}

    def smiles(self, size: str) -> List[str]:
        if size not in self._smiles:
            if size == "freesolv":
                pool = M.freesolv_smiles()[0]
                self._smiles[size] = random.Random(self.seed).sample(pool, min(self.batch_size, len(pool)))
            else:
                self._smiles[size] = M.zinc_like_smiles(self.batch_size, seed=self.seed)
        return self._smiles[size]

    def relation_graph(self, size: str, relation: RelationConfig) -> dgl.DGLGraph:
        key = (size, str(relation))
        if key not in self._graphs:
            smiles = self.smiles(size)
            ds = MoleculeDataset(smiles, relation=relation, progress=False, strict=True)
            self._graphs[key] = ds.__getitems__(list(range(len(ds)))).relation_graph
        return self._graphs[key]


def relation_config(name: str, virtual_node: bool) -> RelationConfig:
    if name == "complete":
        return RelationConfig("complete", virtual_node=virtual_node)
    if name.startswith("hops="):
        return RelationConfig("hops", hops=int(name.split("=", 1)[1]), virtual_node=virtual_node)
    raise ValueError(name)


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------
def grads_of(loss: torch.Tensor, inputs: List[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
    return torch.autograd.grad(loss, inputs)


def check_equal(variant: str, layer: RelationAttention, rel: dgl.DGLGraph, x: torch.Tensor, w: torch.Tensor,
                layout: Layout, pairs: DensePairs) -> Tuple[float, float]:
    """Max abs differences (output, d loss / d x) of DGL vs dense, in float64."""
    layer64 = copy.deepcopy(layer).double()
    dense64 = DenseAttention(variant, layer64).double()
    x64 = x.detach().double().requires_grad_(True)
    out_dgl = layer64(rel, x64)
    (gx_dgl,) = grads_of((out_dgl * w.double()).sum(), [x64])
    xp = layout.pad(x.detach().double()).requires_grad_(True)
    out_dense = dense64(xp, pairs)
    (gx_dense,) = grads_of((out_dense * layout.pad(w.double())).sum(), [xp])
    d_out = (out_dgl - layout.unpad(out_dense)).abs().max().item()
    d_grad = (gx_dgl - layout.unpad(gx_dense)).abs().max().item()
    return d_out, d_grad


def measure(variant: str, size: str, relation_name: str, inputs: Inputs, args) -> Dict[str, object]:
    vn = uses_virtual_node(variant)
    rel = inputs.relation_graph(size, relation_config(relation_name, vn))
    b = rel.batch_size
    torch.manual_seed(args.seed)
    layer = perturb(make_layer(variant, args.dim, args.heads), args.seed)
    layout, pairs = dense_layout(rel, MOLECULE_BOND_VOCAB.no_edge)
    dense = DenseAttention(variant, layer)
    gen = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(rel.num_nodes(), args.dim, generator=gen)
    w = torch.randn(rel.num_nodes(), args.dim, generator=gen)
    x_pad, w_pad = layout.pad(x), layout.pad(w)

    d_out, d_grad = check_equal(variant, layer, rel, x, w, layout, pairs)
    ok = d_out <= CHECK_ATOL and d_grad <= CHECK_ATOL

    layer_params, dense_params = list(layer.parameters()), list(dense.parameters())
    x_req, x_pad_req = x.clone().requires_grad_(True), x_pad.clone().requires_grad_(True)

    def dgl_fwd():
        with torch.no_grad():
            layer(rel, x)

    def dense_fwd():
        with torch.no_grad():
            dense(x_pad, pairs)

    def dgl_fwd_bwd():
        grads_of((layer(rel, x_req) * w).sum(), [x_req, *layer_params])

    def dense_fwd_bwd():
        grads_of((dense(x_pad_req, pairs) * w_pad).sum(), [x_pad_req, *dense_params])

    mp_layer = copy.deepcopy(layer)
    mp_layer.aggregation = "message_passing"
    mp_params = list(mp_layer.parameters())

    def mp_fwd_bwd():
        grads_of((mp_layer(rel, x_req) * w).sum(), [x_req, *mp_params])

    # DGL and dense calls alternate, so both see the same load from other processes
    times = T.time_interleaved({"dgl_fwd": dgl_fwd, "dense_fwd": dense_fwd}, args.repeats, args.warmup)
    times.update(T.time_interleaved({"dgl_fb": dgl_fwd_bwd, "mp_fb": mp_fwd_bwd, "dense_fb": dense_fwd_bwd},
                                    args.repeats, args.warmup))
    counts = rel.batch_num_nodes().double()
    row: Dict[str, object] = {
        "variant": variant,
        "size": size,
        "relation": relation_name + ("+vn" if vn else ""),
        "batch": b,
        "mean_nodes": float(counts.mean()),
        "max_nodes": layout.max_nodes,
        "mean_rel_edges": float(rel.batch_num_edges().double().mean()),
        "check_max_abs_out": d_out,
        "check_max_abs_grad": d_grad,
        "check": "ok" if ok else "FAIL",
    }
    for name, t in times.items():
        row[f"{name}_ms"] = 1e3 * T.median(t)
        row[f"{name}_graphs_s"] = b / T.median(t)
        row[f"{name}_spread"] = T.spread(t)
    row["ratio_fwd"] = row["dgl_fwd_graphs_s"] / row["dense_fwd_graphs_s"]
    row["ratio_fb"] = row["dgl_fb_graphs_s"] / row["dense_fb_graphs_s"]
    row["ratio_mp_fb"] = row["mp_fb_graphs_s"] / row["dense_fb_graphs_s"]
    row["meets_target"] = "yes" if row["ratio_fb"] >= TARGET_RATIO else "no"
    return row


COLUMNS = [
    ("variant", "variant"),
    ("size", "size"),
    ("relation", "relation"),
    ("mean_nodes", "nodes"),
    ("mean_rel_edges", "rel edges"),
    ("dgl_fwd_graphs_s", "DGL fwd g/s"),
    ("dense_fwd_graphs_s", "dense fwd g/s"),
    ("dgl_fb_graphs_s", "DGL f+b g/s"),
    ("dense_fb_graphs_s", "dense f+b g/s"),
    ("ratio_fb", "DGL/dense f+b"),
    ("mp_fb_graphs_s", "message passing f+b g/s"),
    ("ratio_mp_fb", "message passing/dense f+b"),
    ("meets_target", ">=1.0x?"),
    ("check_max_abs_out", "max abs diff"),
]


# ---------------------------------------------------------------------------------------------
# Profile
# ---------------------------------------------------------------------------------------------
def run_profile(args) -> None:
    """torch.profiler (CPU) of the DGL path, forward + backward, ZINC-like size."""
    from torch.profiler import ProfilerActivity, profile, record_function

    variant = args.profile
    vn = uses_virtual_node(variant)
    inputs = Inputs(args.batch_size, args.seed)
    rel = inputs.relation_graph("zinc", relation_config(args.profile_relation, vn))
    layer = perturb(make_layer(variant, args.dim, args.heads), args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(rel.num_nodes(), args.dim, generator=gen).requires_grad_(True)
    w = torch.randn(rel.num_nodes(), args.dim, generator=gen)
    params = list(layer.parameters())

    def step():
        with record_function("forward"):
            out = layer(rel, x)
            loss = (out * w).sum()
        with record_function("backward"):
            grads_of(loss, [x, *params])

    for _ in range(args.warmup):
        step()
    iters = max(args.repeats, 1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(iters):
            step()
        elapsed = time.perf_counter() - start
    print(
        f"== profile: {variant}, ZINC-like, relation {args.profile_relation}{'+vn' if vn else ''}, batch {rel.batch_size}, "
        f"{rel.num_nodes():,} nodes, {rel.num_edges():,} relation edges, d={args.dim}, {args.heads} heads"
    )
    print(f"   {iters} profiled fwd+bwd iterations, {1e3 * elapsed / iters:.1f} ms each (profiler overhead included)\n")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    print(
        "DGL's kernels appear under their own names: GSDDMM (u_dot_v for q.k, and in backward the\n"
        "gradient of the attention weights), GSpMM (u_mul_e + sum aggregation of values, and in\n"
        "backward the gradients through it), EdgeSoftmax / EdgeSoftmaxBackward. 'forward' / 'backward'\n"
        "are this script's labels around the two halves of a step (their CPU total = that half's time)."
    )


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Attention throughput of the DGL relation-graph layers versus a dense padded "
        "PyTorch implementation of the same equations (checked equal in float64 before timing).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 warm-up, 2 repeats, batch 32, 1 torch thread unless --threads is given")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS), help="attention variants")
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES),
                        help="freesolv: FreeSolv molecules (~9 heavy atoms); zinc: joined FreeSolv molecules (~23)")
    parser.add_argument("--relations", nargs="+", choices=RELATIONS, default=list(RELATIONS),
                        help="relation graphs (GRPE gets the virtual-node version of each)")
    parser.add_argument("--batch-size", type=int, default=128, help="graphs per batch")
    parser.add_argument("--dim", type=int, default=80, help="model width d")
    parser.add_argument("--heads", type=int, default=8, help="attention heads H")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls before each measurement")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per measurement (median reported)")
    parser.add_argument("--seed", type=int, default=0, help="seed of molecules, parameters and inputs")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads; None: torch's choice (all cores)")
    parser.add_argument("--profile", choices=VARIANTS, default=None,
                        help="instead of the benchmark: profile the DGL path fwd+bwd of this variant (ZINC-like) "
                        "and print the top 15 ops by self CPU time")
    parser.add_argument("--profile-relation", choices=RELATIONS, default="complete", help="relation graph for --profile")
    parser.add_argument("--csv", type=Path, default=None, help="CSV output; None: benchmarks/results/attention_speed.csv (-quick.csv with --quick)")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md (never updated with --quick)")
    args = parser.parse_args(argv)
    if args.quick:
        args.warmup, args.repeats = min(args.warmup, 1), min(args.repeats, 2)
        args.batch_size = min(args.batch_size, 32)
        args.threads = args.threads or 1  # fast and steady on a busy machine; it is a smoke test
    if args.csv is None:
        args.csv = R.default_csv("attention_speed", args.quick)
    if args.repeats < 1 or args.warmup < 0 or args.batch_size < 1:
        parser.error("need repeats >= 1, warmup >= 0, batch size >= 1")
    if args.dim % args.heads:
        parser.error("--dim must be divisible by --heads")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    env = R.environment()
    R.print_environment(env, "attention_speed environment")
    if args.profile:
        run_profile(args)
        return 0

    print(
        f"batch {args.batch_size}, d={args.dim}, {args.heads} heads, warm-up {args.warmup}, median of {args.repeats}; "
        "fwd under no_grad, f+b = forward + autograd.grad for input and parameters\n"
    )
    inputs = Inputs(args.batch_size, args.seed)
    rows = []
    for size in args.sizes:
        for relation_name in args.relations:
            for variant in args.variants:
                start = time.perf_counter()
                row = measure(variant, size, relation_name, inputs, args)
                rows.append(row)
                print(
                    f"  {variant:<10} {size:<8} {row['relation']:<12} check {row['check']} "
                    f"(max |diff| out {row['check_max_abs_out']:.1e}, grad {row['check_max_abs_grad']:.1e})  "
                    f"f+b DGL {row['dgl_fb_graphs_s']:,.0f} vs dense {row['dense_fb_graphs_s']:,.0f} graphs/s  "
                    f"({time.perf_counter() - start:.1f} s)",
                    flush=True,
                )
    print()
    print(R.format_table(rows, COLUMNS))
    print()
    print("g/s = graphs per second (median); nodes / rel edges = per graph (GRPE rows include the virtual node);")
    print("max abs diff = largest |DGL - dense| output difference in float64 on the benchmark batch.")
    print()
    print(f"TARGET: DGL path >= {TARGET_RATIO:.1f}x the dense path for forward+backward at batch {args.batch_size} "
          f"(torch threads: {torch.get_num_threads()})")
    met = sum(r["meets_target"] == "yes" for r in rows)
    print(f"  met in {met} of {len(rows)} rows")
    R.publish("attention_speed", rows, COLUMNS, env, args.csv, [
        "## Attention speed: DGL relation-graph path vs. dense padded PyTorch",
        "",
        f"Written by `benchmarks/attention_speed.py`: {R.environment_line(env)} Batch {args.batch_size}, d={args.dim}, "
        f"{args.heads} heads; graphs/s (median of {args.repeats}); the dense implementation of each variant is "
        "checked equal to the DGL layer (float64) before timing. DGL = the layer as users run it (`aggregation='auto'`: "
        "per-graph dense blocks for these batches); message passing = the same layer forced onto DGL's `u_dot_v` / "
        "`edge_softmax` / `u_mul_e` kernels (the path before dense blocks), timed interleaved in the same run. "
        "Target: DGL >= 1.0x dense for forward+backward.",
    ], update_docs=not (args.quick or args.no_docs))
    failed = [r for r in rows if r["check"] != "ok"]
    if failed:
        print(f"\nERROR: dense and DGL paths differ by more than {CHECK_ATOL} in {len(failed)} rows: "
              + ", ".join(f"{r['variant']}/{r['size']}/{r['relation']}" for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
