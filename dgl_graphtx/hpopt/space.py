"""Search spaces of the hyperparameter search: shared knobs plus each variant's own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Sequence, Tuple

from ..errors import ConfigError
from ..nn.focus import FOCUS_FUNCTIONS


@dataclass(frozen=True)
class Param:
    """One searched configuration field (a dotted ``section.field`` key, as ``--set`` takes).

    Either ``choices`` (categorical) or a ``low``/``high`` range (``integer`` or float, ``log``
    scale optional).

    Example:
        >>> Param("train.lr", low=1e-4, high=3e-3, log=True).describe()
        'train.lr in [0.0001, 0.003] (log)'
    """

    key: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    integer: bool = False
    choices: Tuple[Any, ...] = ()

    def describe(self) -> str:
        """One line for ``--help`` and logs."""
        if self.choices:
            return f"{self.key} in {{{', '.join(map(str, self.choices))}}}"
        return f"{self.key} in [{self.low:g}, {self.high:g}]" + (" (log)" if self.log else "")

    def suggest(self, trial: Any) -> Any:
        """The value an Optuna ``trial`` proposes for this field."""
        if self.choices:
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.log)


#: Knobs of every variant: width, depth, heads, dropout, learning rate, batch size.
COMMON: Tuple[Param, ...] = (
    Param("model.hidden_dim", choices=(32, 64, 128)),
    Param("model.num_layers", 2, 6, integer=True),
    Param("model.num_heads", choices=(2, 4, 8)),
    Param("model.dropout", 0.0, 0.3),
    Param("train.lr", 1e-4, 3e-3, log=True),
    Param("train.batch_size", choices=(16, 32, 64)),
)
_RELATION = Param("relation.mode", choices=("complete", "hops"))
#: Each variant's own knobs (searched after :data:`COMMON`).
VARIANT_PARAMS: Dict[str, Tuple[Param, ...]] = {
    "grpe": (Param("model.grpe.max_distance", 3, 8, integer=True), _RELATION),
    "moire": (Param("model.moire.focus", choices=tuple(FOCUS_FUNCTIONS)), Param("model.moire.init_width", 0.5, 4.0), _RELATION),
    "gradformer": (Param("model.gradformer.decay", 0.1, 0.9),),
    "vanilla": (_RELATION,),
    "graphormer": (Param("model.graphormer.max_distance", 3, 8, integer=True),),
}


def search_space(variant: str) -> Tuple[Param, ...]:
    """The parameters searched for ``variant``.

    Example:
        >>> [p.key for p in search_space("gradformer")][-1]
        'model.gradformer.decay'
    """
    if variant not in VARIANT_PARAMS:
        raise ConfigError(f"no search space for model {variant!r}; models are {sorted(VARIANT_PARAMS)}")
    return COMMON + VARIANT_PARAMS[variant]


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
