"""The structural parameters a model learned: MoireGT focus shifts and widths, Gradformer start
points and decay ratio, per layer and head, as tables."""
from __future__ import annotations

from typing import List

import pandas as pd
import torch

from ..errors import ConfigError
from ..models import MoleculeModel, build_model
from ..nn.focus import FOCUS_FUNCTIONS
from ..nn.gradformer import DecayTerm
from ..nn.moire import MoireTerm


def _terms(model: MoleculeModel, kind: type, variant: str) -> list:
    terms = [layer.structure for layer in model.attention_layers()]
    if not terms or not all(isinstance(t, kind) for t in terms):
        raise ConfigError(f"this is a {model.config.variant} model; the plot needs a {variant} model")
    return terms


def focus_parameters(model: MoleculeModel) -> pd.DataFrame:
    """One row per layer and head of a MoireGT model: ``focus``, ``distance``, the effective
    shift ``mu`` and width ``sigma`` the forward pass uses (:meth:`MoireTerm.effective_focus`:
    ``mu`` is clamped to 0.5 in ``paper`` mode only) and the self weight.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> table = focus_parameters(build_model(get_preset("moire", num_layers=2, hidden_dim=16, num_heads=2).model))
        >>> table.columns.tolist(), len(table)
        (['layer', 'head', 'focus', 'distance', 'mu', 'sigma', 'self_weight'], 4)
    """
    rows = []
    for layer, term in enumerate(_terms(model, MoireTerm, "MoireGT")):
        mu, sigma = (t.detach().cpu() for t in term.effective_focus())
        weight = term.self_weight.detach().cpu() if term.self_weight is not None else torch.full_like(mu, float("nan"))
        for head in range(len(mu)):
            rows.append({"layer": layer, "head": head, "focus": term.focus, "distance": term.distance,
                         "mu": float(mu[head]), "sigma": float(sigma[head]), "self_weight": float(weight[head])})
    return pd.DataFrame(rows)


def focus_curve(focus: str, distances: torch.Tensor, mu: float, sigma: float) -> torch.Tensor:
    """``f(d; mu, sigma)`` of a named focus function.

    Example:
        >>> focus_curve("gaussian", torch.tensor([1.0, 2.0]), mu=1.0, sigma=1.0).tolist()
        [1.0, 0.3678794503211975]
    """
    return FOCUS_FUNCTIONS[focus](distances, torch.tensor(mu), torch.tensor(sigma)).exp()


def decay_parameters(model: MoleculeModel) -> pd.DataFrame:
    """One row per layer and head of a Gradformer model: start point ``sp`` and ``lambda``.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> decay_parameters(build_model(get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2).model))
           layer  head  start  decay  learned_decay
        0      0     0    2.0    0.5          False
        1      0     1    2.0    0.5          False
    """
    rows = []
    for layer, term in enumerate(_terms(model, DecayTerm, "Gradformer")):
        start = term.params.start.detach().cpu()
        decay = float(term.params.decay())
        for head in range(len(start)):
            rows.append({"layer": layer, "head": head, "start": float(start[head]), "decay": round(decay, 6),
                         "learned_decay": bool(term.params.learn_decay)})
    return pd.DataFrame(rows)


def parameters_at_initial_values(model: MoleculeModel, atol: float = 1e-6) -> List[str]:
    """Names of the attention terms' parameters (focus shift and width, start points, ...) that
    still hold their initial values, which are deterministic: compared with a freshly built model
    of the same configuration. A figure of such parameters shows the initialisation, not
    something learned.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> model = build_model(get_preset("gradformer", num_layers=1, hidden_dim=16, num_heads=2).model)
        >>> parameters_at_initial_values(model)
        ['params.start']
    """
    fresh = build_model(model.config)
    names: List[str] = []
    moved = set()
    for layer, initial in zip(model.attention_layers(), fresh.attention_layers()):
        if layer.structure is None or initial.structure is None:  # plain attention: nothing structural
            continue
        start = dict(initial.structure.named_parameters())
        for name, value in layer.structure.named_parameters():
            names += [name] if name not in names else []
            if not torch.allclose(value.detach().cpu(), start[name].detach(), atol=atol, rtol=0):
                moved.add(name)
    return [name for name in names if name not in moved]
