"""The optimizer's parameter groups: the head at the base learning rate and the backbone (all but
the head) at a scaled one, with a rate of its own per block under layer-wise decay."""
from __future__ import annotations

from typing import Any, Dict, List

import torch

from ..models import MoleculeModel


def backbone_depths(model: torch.nn.Module) -> Dict[int, int]:
    """Depth of the parameters of each block in ``model.blocks`` (1 for the block next to the
    input, ``L`` for the last), keyed by ``id(parameter)``; parameters outside the blocks are at
    depth 0 (the input encoders) when absent from the result.

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> model = build_model(get_preset("gradformer", num_layers=2, hidden_dim=16, num_heads=2).model)
        >>> sorted(set(backbone_depths(model).values()))
        [1, 2]
    """
    blocks = getattr(model, "blocks", None) or []
    return {id(p): depth for depth, block in enumerate(blocks, start=1) for p in block.parameters()}


def head_parameters(model: MoleculeModel) -> List[torch.nn.Parameter]:
    """The parameters of ``model``'s heads: the molecule-level head, and the atom and bond heads
    of a model with atom- or bond-level targets."""
    heads = [model.head] + ([model.levels] if model.levels is not None else [])
    return [p for head in heads for p in head.parameters()]


def backbone_parameters(model: MoleculeModel) -> List[torch.nn.Parameter]:
    """Every parameter of ``model`` but those of its heads."""
    head = {id(p) for p in head_parameters(model)}
    return [p for p in model.parameters() if id(p) not in head]


def parameter_groups(model: MoleculeModel, lr: float, backbone_lr_scale: float = 1.0,
                     layer_lr_decay: float = 1.0) -> List[Dict[str, Any]]:
    """One group; or the head at ``lr`` (the optimizer's default) and the backbone at ``lr *
    backbone_lr_scale``, split by depth with a rate of its own per block when ``layer_lr_decay``
    < 1 (block ``i`` of ``L`` at ``layer_lr_decay ** (L + 1 - i)`` times the backbone's rate, the
    input encoders at ``layer_lr_decay ** (L + 1)``).

    Example:
        >>> from dgl_graphtx.models import build_model, get_preset
        >>> model = build_model(get_preset("gradformer", num_layers=2, hidden_dim=16, num_heads=2).model)
        >>> [group.get("lr") for group in parameter_groups(model, 1.0, 0.5, 0.5)]
        [0.0625, 0.125, 0.25, None]
    """
    if backbone_lr_scale == 1.0 and layer_lr_decay == 1.0:
        return [{"params": list(model.parameters())}]
    backbone_lr = lr * backbone_lr_scale
    head = [{"params": head_parameters(model)}]
    if layer_lr_decay == 1.0:
        return [{"params": backbone_parameters(model), "lr": backbone_lr}] + head
    depths = backbone_depths(model)
    top = max(depths.values(), default=0) + 1
    groups: Dict[int, List[torch.nn.Parameter]] = {}
    for parameter in backbone_parameters(model):
        groups.setdefault(depths.get(id(parameter), 0), []).append(parameter)
    return [{"params": params, "lr": backbone_lr * layer_lr_decay ** (top - depth)}
            for depth, params in sorted(groups.items())] + head
