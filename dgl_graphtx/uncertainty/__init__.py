"""Uncertainty estimation (distribution heads, MC dropout, ensembles; one table of methods in
:mod:`~dgl_graphtx.uncertainty.methods`), calibration on molecules that did not choose the model
(z-scaling, split-conformal and CV+ intervals, temperature scaling) and uncertainty metrics (NLL,
miscalibration area, interval coverage and width, Spearman rho)."""
from .calibration import Calibration, fit_regression_calibration, fit_temperature, fit_z_scale
from .conformal import conformal_quantile, coverage_spread, cv_plus_intervals
from .config import UncertaintyConfig
from .heads import evidential_nll, gaussian_nll
from .methods import METHODS, UNCERTAINTY_METHODS, UncertaintyMethod, head_loss, head_methods, predictive_moments, uncertainty_method
from .metrics import miscalibration_area, uncertainty_metrics

__all__ = [
    "Calibration",
    "METHODS",
    "UNCERTAINTY_METHODS",
    "UncertaintyConfig",
    "UncertaintyMethod",
    "conformal_quantile",
    "coverage_spread",
    "cv_plus_intervals",
    "evidential_nll",
    "fit_regression_calibration",
    "fit_temperature",
    "fit_z_scale",
    "gaussian_nll",
    "head_loss",
    "head_methods",
    "miscalibration_area",
    "predictive_moments",
    "uncertainty_method",
    "uncertainty_metrics",
]
