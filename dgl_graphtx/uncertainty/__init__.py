"""Uncertainty estimation (distribution heads, MC dropout, ensembles), calibration on the
validation set (z-scaling, split-conformal intervals, temperature scaling) and uncertainty
metrics (NLL, miscalibration area, interval coverage and width, Spearman rho)."""
from .calibration import Calibration, conformal_quantile, fit_regression_calibration, fit_temperature, fit_z_scale
from .config import HEAD_METHODS, METHODS, UncertaintyConfig
from .heads import HEAD_OUTPUTS, evidential_nll, gaussian_nll, head_loss, predictive_moments
from .metrics import miscalibration_area, uncertainty_metrics

__all__ = [
    "Calibration",
    "HEAD_METHODS",
    "HEAD_OUTPUTS",
    "METHODS",
    "UncertaintyConfig",
    "conformal_quantile",
    "evidential_nll",
    "fit_regression_calibration",
    "fit_temperature",
    "fit_z_scale",
    "gaussian_nll",
    "head_loss",
    "miscalibration_area",
    "predictive_moments",
    "uncertainty_metrics",
]
