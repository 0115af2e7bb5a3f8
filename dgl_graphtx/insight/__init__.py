"""Looking inside trained models: attention maps on molecules, per-atom importance by attention
rollout, per-atom contributions by integrated gradients, learned focus and decay parameters,
parity/residual plots and per-molecule error tables."""
from .attention_maps import VIRTUAL, AttentionMaps, attention_maps
from .attribution import atom_importance, attention_rollout
from .figures import (
    draw_molecule_weights,
    error_table,
    plot_atom_contributions,
    plot_atom_importance,
    plot_attention_heatmap,
    plot_attention_on_molecule,
    plot_focus_functions,
    plot_parity_residuals,
    plot_start_points,
)
from .integrated_gradients import DEFAULT_STEPS, BatchAttribution, integrated_gradients, lobatto_rule, repeated_batch
from .learned_structure import decay_parameters, focus_curve, focus_parameters, parameters_at_initial_values

__all__ = [
    "DEFAULT_STEPS",
    "VIRTUAL",
    "AttentionMaps",
    "BatchAttribution",
    "atom_importance",
    "attention_maps",
    "attention_rollout",
    "decay_parameters",
    "draw_molecule_weights",
    "error_table",
    "focus_curve",
    "focus_parameters",
    "integrated_gradients",
    "lobatto_rule",
    "parameters_at_initial_values",
    "plot_atom_contributions",
    "plot_atom_importance",
    "plot_attention_heatmap",
    "plot_attention_on_molecule",
    "plot_focus_functions",
    "plot_parity_residuals",
    "plot_start_points",
    "repeated_batch",
]
