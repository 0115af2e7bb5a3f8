"""Large relation graphs: sparse construction and attention forward + backward on 10^3-10^5 nodes.

Systems: 3-D random-walk chains (1.5 Angstrom steps, bonded along the chain; the "chain point
cloud" of issue 8) of 2,000 to 100,000 nodes, and real structures from the MDAnalysisTests package
(adenylate kinase, 3,341 atoms; the same protein solvated, 47,681 atoms; a lipid membrane, 43,480
atoms; see ``proteins.py`` for provenance and how to fetch the archive). Relation graphs:
``radius=5.0`` (the default ``spd_cap``), so the average neighbourhood stays fixed and the kept
edges grow linearly with the nodes.

Each system runs in its own subprocess so peak memory is measured cleanly (Linux ``VmHWM``, reset
between measurements through ``/proc/self/clear_refs``; reported as the growth over the resident
size before the step):

* build: ``build_relation_graph`` time and peak memory; "dense" columns: the dense builder that
  the library used before (kept as ``tests/relation_reference.py``), run up to
  ``--dense-max-nodes`` nodes;
* one attention layer per variant (d=64, 8 heads, message-passing path): forward + backward time
  (``autograd.grad`` for the input and all parameters; the second call) and peak memory (the first).

Also printed: the node count at which one dense ``[H, N, N]`` float32 tensor passes 24 GB.

Run:  python -m benchmarks.checks.large_graphs [--quick] [--sizes 2000 10000 ...] [--no-docs]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from benchmarks.checks import proteins as P
from benchmarks.common import check
from benchmarks.common.measure import PeakMemory
from benchmarks.common.report import REPO, environment_line, markdown_table, update_section

import dgl
from dgl_graphtx.nn import GradformerAttention, GraphormerAttention, GRPEAttention, MoireAttention, RelationAttention
from dgl_graphtx.relation_graph import SPD_BEYOND_CAP, RelationConfig, build_relation_graph

RADIUS = 5.0
DIM, HEADS = 64, 8
SIZES = (2_000, 5_000, 10_000, 20_000, 50_000, 100_000)
QUICK_SIZES = (2_000, 10_000)
DENSE_MAX_NODES = 5_000
MEMORY_LIMIT_GB = 24.0
LAYERS = {
    "vanilla": lambda: RelationAttention(DIM, HEADS, aggregation="message_passing"),
    "graphormer": lambda: GraphormerAttention(DIM, HEADS),
    "grpe": lambda: GRPEAttention(DIM, HEADS),
    "moire": lambda: MoireAttention(DIM, HEADS, distance="dist"),
    "gradformer": lambda: GradformerAttention(DIM, HEADS),
}
BUILD_COLUMNS = [
    ("system", "system"), ("nodes", "nodes"), ("edges", "kept edges"), ("edges_per_node", "edges/node"),
    ("beyond_cap", "pairs beyond spd cap"), ("build_s", "build s"), ("build_gb", "build GB"),
    ("dense_build_s", "dense builder s"), ("dense_build_gb", "dense builder GB"),
]
LAYER_COLUMNS = [
    ("system", "system"), ("nodes", "nodes"), ("edges", "kept edges"), ("variant", "variant"),
    ("fb_s", "fwd+bwd s"), ("peak_gb", "peak GB"), ("ns_per_edge", "ns per edge"),
]


def layer_pivot(layer_rows: List[Dict[str, object]]) -> Tuple[List[Dict[str, object]], List[Tuple[str, str]]]:
    """The layer rows as one row per system, a ``fwd+bwd s (peak GB)`` cell per variant (the docs table).

    Example:
        >>> rows, columns = layer_pivot([{"system": "a", "nodes": 2, "edges": 3, "variant": "grpe", "fb_s": 0.5, "peak_gb": 0.1}])
        >>> rows, [title for _, title in columns]
        ([{'system': 'a', 'nodes': 2, 'edges': 3, 'grpe': '0.50 (0.10)'}], ['system', 'nodes', 'kept edges', 'grpe'])
    """
    pivot: Dict[object, Dict[str, object]] = {}
    variants: List[str] = []
    for row in layer_rows:
        entry = pivot.setdefault(row["system"], {k: row[k] for k in ("system", "nodes", "edges")})
        entry[str(row["variant"])] = f"{row['fb_s']:.2f} ({row['peak_gb']:.2f})"
        variants += [] if row["variant"] in variants else [str(row["variant"])]
    return list(pivot.values()), LAYER_COLUMNS[:3] + [(v, v) for v in variants]


def random_walk(n: int, seed: int = 0) -> dgl.DGLGraph:
    """A 3-D random-walk chain: ``n`` points 1.5 A apart, bonded along the chain."""
    steps = np.random.default_rng(seed).normal(size=(n, 3))
    pos = np.cumsum(1.5 * steps / np.linalg.norm(steps, axis=1, keepdims=True), axis=0)
    src, dst = torch.arange(n - 1), torch.arange(1, n)
    g = dgl.graph((torch.cat([src, dst]), torch.cat([dst, src])), num_nodes=n)
    g.ndata["pos"] = torch.from_numpy(pos).float()
    return g


def system_graph(system: str) -> dgl.DGLGraph:
    if system.startswith("chain-"):
        return random_walk(int(system.split("-", 1)[1]))
    loaded = P.load_structure(system)
    if loaded is None:
        raise FileNotFoundError(f"MDAnalysisTests archive not found in {P.DATA_DIR}; fetch it with: {P.FETCH_HINT}")
    return loaded[0]


def dense_build(graph: dgl.DGLGraph) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from relation_reference import dense_relation  # the pre-sparse builder, kept for the tests

    from dgl_graphtx.featurize import MOLECULE_BOND_VOCAB

    src, dst = (t.numpy().astype(np.int64) for t in graph.edges())
    dense_relation(graph.num_nodes(), src, dst, None, graph.ndata["pos"].double().numpy(), MOLECULE_BOND_VOCAB,
                   "radius", radius=RADIUS)


def run_system(system: str, dense_max_nodes: int, variants: List[str], threads: int) -> Dict[str, object]:
    torch.set_num_threads(threads)
    graph = system_graph(system)
    n = graph.num_nodes()
    with PeakMemory() as mem:
        start = time.perf_counter()
        rel = build_relation_graph(graph, RelationConfig("radius", radius=RADIUS))
        build_s = time.perf_counter() - start
    out: Dict[str, object] = {
        "system": system, "nodes": n, "edges": rel.num_edges(), "edges_per_node": rel.num_edges() / n,
        "beyond_cap": int((rel.edata["spd"] == SPD_BEYOND_CAP).sum()), "build_s": build_s, "build_gb": mem.gb,
        "dense_build_s": math.nan, "dense_build_gb": math.nan, "layers": [],
    }
    if n <= dense_max_nodes:
        with PeakMemory() as mem:
            start = time.perf_counter()
            dense_build(graph)
            dense_s = time.perf_counter() - start
        out["dense_build_s"], out["dense_build_gb"] = dense_s, mem.gb
    x = torch.randn(n, DIM, generator=torch.Generator().manual_seed(0))
    w = torch.randn(n, DIM, generator=torch.Generator().manual_seed(1))
    for variant in variants:
        torch.manual_seed(0)
        layer = LAYERS[variant]()
        layer.aggregation = "message_passing"  # one graph: the sparse path (auto picks it too)
        inputs = [x.clone().requires_grad_(True)] + list(layer.parameters())

        def step() -> None:  # runs before the loop's end deletes what it reads
            out_ = layer(rel, inputs[0])  # noqa: F821
            torch.autograd.grad((out_ * w).sum(), inputs, allow_unused=True)  # noqa: F821

        with PeakMemory() as mem:
            step()  # cold call: its memory growth is the layer's peak
        start = time.perf_counter()
        step()
        fb_s = time.perf_counter() - start
        out["layers"].append({"variant": variant, "fb_s": fb_s, "peak_gb": mem.gb,
                              "ns_per_edge": fb_s / rel.num_edges() * 1e9})
        del layer, inputs
    return out


def dense_limit_nodes(heads: int = HEADS, limit_gb: float = MEMORY_LIMIT_GB) -> int:
    """Largest N whose dense ``[H, N, N]`` float32 tensor fits in ``limit_gb``."""
    return int(math.sqrt(limit_gb * 2**30 / (4 * heads)))


def main(argv: Optional[List[str]] = None) -> int:
    parser = check.parser(__doc__, threads=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help=f"chain sizes (default {SIZES}; --quick {QUICK_SIZES})")
    parser.add_argument("--proteins", nargs="*", choices=sorted(P.STRUCTURES), default=None,
                        help="MDAnalysisTests systems (default: all, --quick adk; skipped with a note when the archive is missing)")
    parser.add_argument("--variants", nargs="+", choices=sorted(LAYERS), default=list(LAYERS))
    parser.add_argument("--dense-max-nodes", type=int, default=DENSE_MAX_NODES, help="the dense (pre-sparse) builder up to this many nodes")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_system(args.worker, args.dense_max_nodes, args.variants, args.threads)))
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    proteins = ["adk"] if args.quick and args.proteins is None else args.proteins
    env, systems = check.start(args, "large_graphs"), [f"chain-{n}" for n in sizes]
    if P.load_structure("adk") is None and proteins != []:
        print(f"note: MDAnalysisTests archive not in {P.DATA_DIR}; skipping the protein systems. Fetch it with: {P.FETCH_HINT}")
    else:
        systems += list(P.STRUCTURES) if proteins is None else proteins
    results = []
    for system in systems:
        cmd = [sys.executable, "-m", "benchmarks.checks.large_graphs", "--worker", system, "--dense-max-nodes", str(args.dense_max_nodes),
               "--threads", str(args.threads), "--variants", *args.variants]
        # fixed mmap threshold: large tensors are returned to the OS when freed, so resident size tracks live memory
        path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
        env_vars = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "1048576", "PYTHONPATH": path}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env_vars)
        if done.returncode != 0:
            print(f"  {system}: worker failed ({done.returncode}):\n{done.stderr[-2000:]}")
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        layers = ", ".join(f"{r['variant']} {r['fb_s']:.2f} s / {r['peak_gb']:.2f} GB" for r in results[-1]["layers"])
        print(f"  {system:<14} {results[-1]['nodes']:>7,} nodes build {results[-1]['build_s']:.2f} s | {layers}", flush=True)
    build_rows = [{k: r[k] for k, _ in BUILD_COLUMNS} for r in results]
    layer_rows = [{"system": r["system"], "nodes": r["nodes"], "edges": r["edges"], **lr} for r in results for lr in r["layers"]]
    limit = dense_limit_nodes()
    limit_line = (f"One dense [H, N, N] float32 tensor (H = {HEADS}) passes {MEMORY_LIMIT_GB:.0f} GB at N = {limit:,}; "
                  f"a dense forward + backward holds several such tensors (logits, weights and their gradients), "
                  f"so dense layouts stop near N = {limit // 2:,}.")
    check.finish("large_graphs", args, env, build_rows + layer_rows, BUILD_COLUMNS + LAYER_COLUMNS[3:])
    print(limit_line)
    if check.writes_docs(args):
        update_section("large_graphs", "\n".join([
            "#### Large graphs: sparse relation-graph construction and attention on 10^3-10^5 nodes", "",
            f"Written by `benchmarks/checks/large_graphs.py`: {environment_line(env)} Relation graphs `radius={RADIUS}` (default spd "
            "cap 64); chains are 3-D random walks (1.5 A steps); `adk`, `adk_solvated` and `yiip_membrane` are real structures from "
            "the MDAnalysisTests package (bonds inferred from distances; provenance in docs/scaling.md). GB = growth of the "
            "process's peak resident memory during the step. Dense builder = the pre-sparse construction (N x N tables), run up "
            f"to {args.dense_max_nodes:,} nodes.", "", markdown_table(build_rows, BUILD_COLUMNS), "",
            f"One attention layer per variant, d={DIM}, {HEADS} heads, DGL message passing, {args.threads} torch thread(s) in each "
            "measuring process; forward + backward (`autograd.grad` for the input and all parameters): seconds of the second call "
            "(peak GB of the first); ns per edge in the CSV:", "", markdown_table(*layer_pivot(layer_rows)), "", limit_line]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
