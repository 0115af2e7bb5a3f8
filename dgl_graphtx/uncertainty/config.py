"""Which uncertainty method a run uses and how it is calibrated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

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


def stored_settings(extra: Dict[str, Any], method: Optional[str] = None,
                    mc_samples: Optional[int] = None) -> Tuple[UncertaintyConfig, Optional[Dict[str, Any]]]:
    """The uncertainty settings a checkpoint's metadata ``extra`` records, with ``method`` /
    ``mc_samples`` overriding them, and the stored calibration (a dict) when it was fitted for the
    method used.

    Example:
        >>> stored = {"uncertainty": {"method": "mve", "coverage": 0.8, "calibration": {"method": "mve"}}}
        >>> config, calibration = stored_settings(stored)
        >>> config.method, config.coverage, calibration
        ('mve', 0.8, {'method': 'mve'})
        >>> stored_settings(stored, method="mc_dropout", mc_samples=5)[1] is None
        True
    """
    saved = dict(extra.get("uncertainty") or {})
    calibration = saved.pop("calibration", None)
    if method is not None:
        saved["method"] = method
    if mc_samples is not None:
        saved["mc_samples"] = mc_samples
    config = UncertaintyConfig(**saved)
    if calibration is not None and calibration.get("method") != config.method:
        calibration = None
    return config, calibration
