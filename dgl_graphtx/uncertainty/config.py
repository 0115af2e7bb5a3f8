"""Which uncertainty method a run uses and how it is calibrated."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..validation import check_number

#: ``--uncertainty`` choices: ``mve`` and ``evidential`` add an output head at training time;
#: ``mc_dropout`` samples dropout at prediction time; ``ensemble`` uses the spread of ensemble members.
METHODS = ("none", "mve", "evidential", "mc_dropout", "ensemble")
#: Methods that change the model's output head (and its loss).
HEAD_METHODS = ("mve", "evidential")


@dataclass
class UncertaintyConfig:
    """Uncertainty estimation and calibration settings (the ``uncertainty`` section of a run).

    Args:
        method: one of :data:`METHODS`.
        coverage: target coverage of the split-conformal intervals (regression).
        mc_samples: stochastic forward passes of MC dropout.
        evidential_reg: coefficient of the evidential regulariser ``|y - gamma| (2 nu + alpha)``.

    Example:
        >>> UncertaintyConfig("evidential").head, UncertaintyConfig("mc_dropout").head
        ('evidential', 'none')
    """

    method: str = "none"
    coverage: float = 0.9
    mc_samples: int = 20
    evidential_reg: float = 0.01

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"uncertainty.method must be one of {METHODS}, got {self.method!r}")
        check_number("uncertainty.coverage", self.coverage, 0, 1, low_open=True, high_open=True)
        check_number("uncertainty.mc_samples", self.mc_samples, 2, 10_000, integer=True)
        check_number("uncertainty.evidential_reg", self.evidential_reg, 0)

    @property
    def head(self) -> str:
        """The output head this method needs: ``mve``, ``evidential`` or ``none``."""
        return self.method if self.method in HEAD_METHODS else "none"

    @property
    def active(self) -> bool:
        """Whether any uncertainty is estimated (and calibrated)."""
        return self.method != "none"
