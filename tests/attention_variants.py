"""The catalogue of attention variants and modes shared by the attention test modules.

Layers are built by the variant registry (``dgl_graphtx.models.variants``), the way models build
them; ``test_variant_registry.py`` checks that every registered variant is in :data:`VARIANTS`.
:func:`read_params` and :func:`run_reference` run a layer's parameters through the dense reference.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import torch

from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.models import ModelConfig, variant_spec
from dgl_graphtx.nn import RelationAttention
from dgl_graphtx.nn.dense_blocks import BlockLayout
from dgl_graphtx.testing import CarrierRun, run_with_gradients

import dense_reference as ref

D_MODEL, HEADS, MAX_DIST = 16, 4, 3  # L = 3 so that FAR (aspirin has spd up to 6) is exercised
GRADFORMER_DECAY = 0.6
RBF_CUTOFF = 5.0  # Angstrom or hops: aspirin's pairs lie on both sides of it
ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"
SALT = "CC(=O)[O-].[Na+]"
SALT2 = "c1ccccc1O.[Na+].[Cl-]"
FEAT3D = FeaturizerConfig(coordinates="etkdg")


@dataclass(frozen=True)
class Variant:
    kind: str
    mode: str = "paper"
    focus: Optional[str] = None
    distance: Optional[str] = None
    learn_decay: bool = False
    slope: float = 0.0  # Gradformer reference mode's LeakyReLU slope
    rbf: int = 0  # MoireGT: Gaussian basis functions of the distance behind a learned per-head bias


    @property
    def id(self) -> str:
        parts = [self.kind] + ([self.mode] if self.kind not in ("vanilla", "graphormer") else [])
        if self.focus:
            parts += [self.focus, self.distance]
        if self.rbf:
            parts.append(f"rbf{self.rbf}")
        if self.kind == "gradformer":
            parts.append("learned" if self.learn_decay else "fixed")
            if self.mode == "reference":
                parts.append(f"slope{self.slope:g}")
        return "-".join(parts)

    @property
    def opts(self) -> Dict:
        return {"max_distance": MAX_DIST, "focus": self.focus, "distance": self.distance, "slope": self.slope,
                "rbf": self.rbf, "rbf_cutoff": RBF_CUTOFF}


VARIANTS = (
    [Variant("vanilla"), Variant("graphormer"), Variant("grpe", "paper"), Variant("grpe", "reference")]
    + [
        Variant("moire", mode, focus, distance)
        for mode in ("paper", "reference")
        for focus in ref.FOCUS_NAMES
        for distance in ("dist", "spd")
    ]
    + [Variant("moire", mode, "gaussian", distance, rbf=6) for mode in ("paper", "reference") for distance in ("dist", "spd")]
    + [Variant("gradformer", mode, learn_decay=learn) for mode in ("paper", "decay", "reference") for learn in (False, True)]
    # the authors' slopes: 0.1 in their ZINC/NCI1/CLUSTER scripts, 0.2 for ogbg-molhiv
    + [Variant("gradformer", "reference", slope=slope) for slope in (0.1, 0.2)]
)


def options(v: Variant) -> Dict[str, Any]:
    """The settings of ``v`` for its registry entry's options class (the fields it has)."""
    spec = variant_spec(v.kind)
    if spec.options is None:
        return {}
    wanted = dict(mode=v.mode, focus=v.focus, distance=v.distance, learn_decay=v.learn_decay, slope=v.slope,
                  max_distance=MAX_DIST, decay=GRADFORMER_DECAY, rbf=v.rbf, rbf_cutoff=RBF_CUTOFF)
    names = {f.name for f in dataclasses.fields(spec.options)}
    return {v.kind: spec.options(**{k: x for k, x in wanted.items() if k in names and x is not None})}


def build(v: Variant, attn_dropout: float = 0.0, embed_dim: int = D_MODEL, heads: int = HEADS) -> RelationAttention:
    """A freshly initialised layer of variant ``v``, built by its registry entry."""
    config = ModelConfig(variant=v.kind, num_layers=1, hidden_dim=embed_dim, num_heads=heads, attn_dropout=attn_dropout,
                         readout="mean", virtual_node=False, **options(v))
    (layer,) = variant_spec(v.kind).build_layers(config, config.options)
    return layer


#: float64 agreement of two computations of the same layer (outputs, then gradients).
EXACT = dict(atol=1e-12, grad_atol=1e-10)


def attend_with(layer: RelationAttention, aggregation: str) -> Callable[..., Any]:
    """``(graph, x) -> (outputs, attention)`` of ``layer`` with ``aggregation``: the function the
    checks of :mod:`dgl_graphtx.testing` call."""
    def attend(graph, x):
        layer.aggregation = aggregation
        return layer(graph, x, get_attention=True)
    return attend


def run_attention(layer: RelationAttention, graph, x, aggregation: str, seed: Optional[int] = None) -> CarrierRun:
    """Outputs, attention and their gradients (``x``, then the parameters) of ``layer`` on ``graph``."""
    return run_with_gradients(attend_with(layer, aggregation), [graph], [x], list(layer.parameters()), seed)


def block_dropout_mask(graph, heads: int, p: float, seed: int, dtype=torch.float64) -> torch.Tensor:
    """The per-edge ``[E, H]`` dropout mask (0 or ``1 / (1 - p)``) that the dense-block path draws
    from ``seed`` when the layer draws no other random numbers first: one draw per slot of the
    ``[B, H, n, n]`` softmax blocks, read at the edges."""
    layout = BlockLayout.of(graph, heads)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        dense = torch.nn.functional.dropout(torch.ones(layout.on_edge.shape, dtype=dtype), p, True)
    return layout.gather(dense)


class FixedDropout(torch.nn.Module):
    """Multiplies by a given mask: a layer's attention dropout replaced by a known draw."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.mask = mask
        self.p = 1.0  # what the skeleton reads to know that dropout acts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask


def read_params(layer, v: Variant) -> Dict:
    """The layer's parameters as plain float64 tensors, named as the dense reference wants them."""
    t = lambda p: p.detach().double().clone()  # noqa: E731
    P = {
        "heads": layer.num_heads,
        "qkv_w": t(layer.qkv.weight),
        "qkv_b": t(layer.qkv.bias),
        "out_w": t(layer.out_proj.weight),
        "out_b": t(layer.out_proj.bias),
    }
    s = layer.structure
    if v.kind == "graphormer":
        P["spatial_bias"], P["edge_bias"] = t(s.spatial_bias), t(s.edge_bias)
        assert P["spatial_bias"].shape == (ref.num_spatial_classes(MAX_DIST), HEADS)
        assert P["edge_bias"].shape == (ref.NUM_EDGE_CLASSES, HEADS)
    elif v.kind == "grpe":
        enc = s.encodings
        for key, table in [("PQ", enc.spatial_query), ("PK", enc.spatial_key), ("PV", enc.spatial_value),
                           ("EQ", enc.edge_query), ("EK", enc.edge_key), ("EV", enc.edge_value)]:
            P[key] = t(table).reshape(table.shape[0], D_MODEL)  # a row of d entries, split per head
            rows = ref.num_spatial_classes(MAX_DIST) if key[0] == "P" else ref.NUM_EDGE_CLASSES
            assert P[key].shape == (rows, D_MODEL)
    elif v.kind == "moire":
        P["shift"], P["width"] = t(s.shift), t(s.width)
        P["self_weight"] = t(s.self_weight) if v.mode == "paper" else None
        if v.rbf:
            P["rbf_w"], P["rbf_v"] = t(s.radial.to_bias.weight), t(s.radial.value_table)
    elif v.kind == "gradformer":
        P["start"], P["decay_logit"] = t(s.params.start), t(s.params.decay_logit)
    return P


def run_reference(v: Variant, P: Dict, x: torch.Tensor, rel, **kw):
    return ref.reference_attention(v.kind, v.mode, v.opts, P, x, ref.dense_pairs(rel), **kw)
