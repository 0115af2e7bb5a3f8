"""Search spaces of the hyperparameter search: shared knobs plus each variant's own (the
``search`` entry of its :data:`~dgl_graphtx.models.variants.VARIANT_SPECS` row)."""
from __future__ import annotations

from typing import Any, Dict, Sequence, Tuple

from ...models.search_params import Param
from ...models.variants import variant_spec

#: Knobs of every variant: width, depth, heads, dropout, learning rate, batch size.
COMMON: Tuple[Param, ...] = (
    Param("model.hidden_dim", choices=(32, 64, 128)),
    Param("model.num_layers", 2, 6, integer=True),
    Param("model.num_heads", choices=(2, 4, 8)),
    Param("model.dropout", 0.0, 0.3),
    Param("train.lr", 1e-4, 3e-3, log=True),
    Param("train.batch_size", choices=(16, 32, 64)),
)


def search_space(variant: str) -> Tuple[Param, ...]:
    """The parameters searched for ``variant``.

    Example:
        >>> [p.key for p in search_space("gradformer")][-1]
        'model.gradformer.decay'
    """
    return COMMON + variant_spec(variant).search


def as_overrides(values: Dict[str, Any]) -> Sequence[str]:
    """Suggested ``values`` as ``--set`` strings; ``relation.mode=hops`` gets ``relation.hops=3``.

    Example:
        >>> as_overrides({"model.num_layers": 3, "relation.mode": "hops"})
        ['model.num_layers=3', 'relation.mode=hops', 'relation.hops=3']
    """
    out = [f"{key}={value}" for key, value in values.items()]
    if values.get("relation.mode") == "hops":
        out.append("relation.hops=3")
    elif values.get("relation.mode") == "complete":
        out.append("relation.hops=none")
    return out
