"""Which uncertainty method a run uses and how it is calibrated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ..errors import ConfigError
from ..validation import check_number
from .methods import uncertainty_method

#: Parts of a split the calibration molecules can be carved from (``uncertainty.calibration_from``).
CALIBRATION_SOURCES = ("train", "valid")
#: How the conformal quantile is cut (``uncertainty.calibration_bins``): one for all molecules, or one
#: per bin of similarity to the training part (:mod:`~dgl_graphtx.uncertainty.mondrian`).
CALIBRATION_BINS = ("none", "similarity")


@dataclass
class UncertaintyConfig:
    """Uncertainty estimation and calibration settings (the ``uncertainty`` section of a run).

    Args:
        method: a name of :data:`~dgl_graphtx.uncertainty.methods.UNCERTAINTY_METHODS`.
        coverage: target coverage of the split-conformal intervals (regression).
        mc_samples: stochastic forward passes of MC dropout.
        evidential_reg: coefficient of the evidential regulariser ``|y - gamma| (2 nu + alpha)``.
        calibration_share: share of all molecules that calibrate, carved from the
            ``calibration_from`` part of the split (whole groups of a scaffold or k-means split),
            so that the molecules that choose the best epoch never calibrate; ignored when a
            calibration file is given (``data.calibration``).
        calibration_from: the part the calibration molecules are carved from, ``train`` or ``valid``.
        calibration_bins: ``none`` (one conformal quantile) or ``similarity`` (Mondrian: one per
            third of the calibration molecules by nearest-neighbour similarity to the training
            part, which the checkpoint then stores as fingerprints; for scaffold or series shift).

    Example:
        >>> UncertaintyConfig("evidential").head, UncertaintyConfig("mc_dropout").head
        ('evidential', 'none')
    """

    method: str = "none"
    coverage: float = 0.9
    mc_samples: int = 20
    evidential_reg: float = 0.01
    calibration_share: float = 0.1
    calibration_from: str = "train"
    calibration_bins: str = "none"

    def __post_init__(self) -> None:
        uncertainty_method(self.method)
        check_number("uncertainty.coverage", self.coverage, 0, 1, low_open=True, high_open=True)
        check_number("uncertainty.mc_samples", self.mc_samples, 2, 10_000, integer=True)
        check_number("uncertainty.evidential_reg", self.evidential_reg, 0)
        check_number("uncertainty.calibration_share", self.calibration_share, 0, 1, low_open=True, high_open=True)
        if self.calibration_from not in CALIBRATION_SOURCES:
            raise ConfigError(f"uncertainty.calibration_from must be one of {CALIBRATION_SOURCES}, got {self.calibration_from!r}")
        if self.calibration_bins not in CALIBRATION_BINS:
            raise ConfigError(f"uncertainty.calibration_bins must be one of {CALIBRATION_BINS}, got {self.calibration_bins!r}")

    @property
    def head(self) -> str:
        """The output head this method needs: its own distribution head, or ``none``."""
        return self.method if uncertainty_method(self.method).has_head else "none"

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
    saved.pop("calibrated_on", None)
    if method is not None:
        saved["method"] = method
    if mc_samples is not None:
        saved["mc_samples"] = mc_samples
    config = UncertaintyConfig(**saved)
    if calibration is not None and calibration.get("method") != config.method:
        calibration = None
    return config, calibration
