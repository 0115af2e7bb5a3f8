"""One searchable configuration field, as the variant registry and ``dgl-graphtx hpopt`` name it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple


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
