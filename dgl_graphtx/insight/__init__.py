"""Looking inside trained models: attention maps on molecules, learned focus and decay
parameters, parity/residual plots and per-molecule error tables."""
from .attention_maps import VIRTUAL, AttentionMaps, attention_maps
from .figures import (
    draw_molecule_weights,
    error_table,
    plot_attention_heatmap,
    plot_attention_on_molecule,
    plot_focus_functions,
    plot_parity_residuals,
    plot_start_points,
)
from .learned_structure import decay_parameters, focus_curve, focus_parameters

__all__ = [
    "VIRTUAL",
    "AttentionMaps",
    "attention_maps",
    "decay_parameters",
    "draw_molecule_weights",
    "error_table",
    "focus_curve",
    "focus_parameters",
    "plot_attention_heatmap",
    "plot_attention_on_molecule",
    "plot_focus_functions",
    "plot_parity_residuals",
    "plot_start_points",
]
