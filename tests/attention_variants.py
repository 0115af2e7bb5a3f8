"""The catalogue of attention variants and modes shared by the attention test modules.

Layers are built by the variant registry (``dgl_graphtx.models.variants``), the way models build
them; ``test_variant_registry.py`` checks that every registered variant is in :data:`VARIANTS`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from dgl_graphtx.featurize import FeaturizerConfig
from dgl_graphtx.models import ModelConfig, variant_spec
from dgl_graphtx.nn import RelationAttention

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
