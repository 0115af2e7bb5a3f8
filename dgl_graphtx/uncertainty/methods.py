"""The uncertainty methods a run can use: one table, the single source of the method names, the
size of the output head each needs, its training loss, where its standard deviation comes from
at prediction time, and how its conformal intervals are calibrated.

``--uncertainty``'s choices, :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`, the head
sizes of :class:`~dgl_graphtx.models.ModelConfig`, the trainer's loss, :class:`~dgl_graphtx.inference.Predictor`
and the calibration all read :data:`UNCERTAINTY_METHODS`; docs/uncertainty.md "Adding an
uncertainty method" shows a new entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ..errors import ConfigError
from .heads import Moments, evidential_head_loss, evidential_moments, gaussian_head_loss, gaussian_parameters

#: Where a method's standard deviation comes from at prediction time: none, the model's own
#: distribution head, the spread of dropout passes, or the spread of ensemble members.
STD_SOURCES = ("none", "head", "dropout", "members")
#: Conformal scores of the calibration: ``|r| / std`` (normalised) or ``|r|`` (absolute).
CONFORMAL_SCORES = ("normalised", "absolute")


@dataclass(frozen=True)
class UncertaintyMethod:
    """One uncertainty method.

    Args:
        name: the method's name (``--uncertainty``, ``uncertainty.method``).
        summary: one line on what it is.
        head_outputs: outputs per target of the model's final layer (1: the plain point head;
            more: a distribution head, the mean first).
        moments: a distribution head's mean and variance ``[B, T]`` from its raw output ``[B, k*T]``
            (standardised target space).
        loss: a distribution head's element-wise training loss ``(raw, target, settings)``, where
            ``settings`` is the run's :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`.
        std: where the std comes from at prediction time, one of :data:`STD_SOURCES`.
        tasks: the tasks it estimates an uncertainty for.
        scores: the conformal scores its intervals are calibrated with, one of
            :data:`CONFORMAL_SCORES` (normalised by the z-scaled std when it gives one).

    Example:
        >>> spec = UNCERTAINTY_METHODS["evidential"]
        >>> spec.head_outputs, spec.std, spec.scores
        (4, 'head', 'normalised')
    """

    name: str
    summary: str
    head_outputs: int = 1
    moments: Optional[Callable[[torch.Tensor], Moments]] = None
    loss: Optional[Callable[[torch.Tensor, torch.Tensor, Any], torch.Tensor]] = None
    std: str = "none"
    tasks: Tuple[str, ...] = ("regression",)
    scores: str = "normalised"

    def __post_init__(self) -> None:
        if self.std not in STD_SOURCES or self.scores not in CONFORMAL_SCORES:
            raise ValueError(f"method {self.name!r}: std must be one of {STD_SOURCES}, scores one of {CONFORMAL_SCORES}")
        if (self.head_outputs > 1) != (self.std == "head") or (self.std == "head") != (self.loss is not None) \
                or (self.loss is None) != (self.moments is None):
            raise ValueError(f"method {self.name!r}: a distribution head (head_outputs > 1, std 'head') needs moments and a loss")

    @property
    def has_head(self) -> bool:
        """Whether the method adds a distribution head (and its loss) to the model."""
        return self.head_outputs > 1


def _table(*methods: UncertaintyMethod) -> Dict[str, UncertaintyMethod]:
    return {method.name: method for method in methods}


#: Every uncertainty method, in the order the CLI and the docs list them.
UNCERTAINTY_METHODS: Dict[str, UncertaintyMethod] = _table(
    UncertaintyMethod("none", "no uncertainty", tasks=("regression", "classification", "multiclass")),
    UncertaintyMethod("mve", "mean-variance estimation: a Gaussian head trained by its NLL (Nix & Weigend 1994)",
                      head_outputs=2, moments=gaussian_parameters, loss=gaussian_head_loss, std="head"),
    UncertaintyMethod("evidential", "deep evidential regression: a Normal-Inverse-Gamma head (Amini et al. 2020)",
                      head_outputs=4, moments=evidential_moments, loss=evidential_head_loss, std="head"),
    UncertaintyMethod("mc_dropout", "MC dropout: the spread of passes with dropout on (Gal & Ghahramani 2016)",
                      std="dropout", tasks=("regression", "classification")),
    UncertaintyMethod("ensemble", "the spread of ensemble members trained with different seeds", std="members"),
)

#: The method names, in table order (``--uncertainty``'s choices).
METHODS: Tuple[str, ...] = tuple(UNCERTAINTY_METHODS)


def head_methods() -> Tuple[str, ...]:
    """The methods that change the model's output head (and its loss), in table order.

    Example:
        >>> head_methods()
        ('mve', 'evidential')
    """
    return tuple(name for name, spec in UNCERTAINTY_METHODS.items() if spec.has_head)


def uncertainty_method(name: str) -> UncertaintyMethod:
    """The entry of method ``name``, or a one-line :class:`ConfigError` listing the choices.

    Example:
        >>> uncertainty_method("mve").head_outputs
        2
    """
    if name not in UNCERTAINTY_METHODS:
        raise ConfigError(f"uncertainty.method must be one of {tuple(UNCERTAINTY_METHODS)}, got {name!r}")
    return UNCERTAINTY_METHODS[name]


def check_method_fits(name: str, task: str) -> None:
    """A one-line :class:`ConfigError` when method ``name`` estimates no uncertainty for ``task``.

    Example:
        >>> check_method_fits("mc_dropout", "classification")
        >>> check_method_fits("mve", "classification")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: uncertainty 'mve' is for regression models, not for a classification one; drop --uncertainty or ...
    """
    spec = uncertainty_method(name)
    if task not in spec.tasks:
        others = tuple(n for n, m in UNCERTAINTY_METHODS.items() if task in m.tasks and n != "none")
        raise ConfigError(f"uncertainty {name!r} is for {' and '.join(spec.tasks)} models, not for a {task} one; "
                          f"drop --uncertainty{f' or choose one of {others}' if others else ''}")


def head_outputs(head: str) -> int:
    """Outputs per target of the model head that method ``head`` needs (1 for ``none``).

    Example:
        >>> head_outputs("none"), head_outputs("evidential")
        (1, 4)
    """
    return uncertainty_method(head).head_outputs


def predictive_moments(head: str, raw: torch.Tensor) -> Moments:
    """Mean and predictive variance ``[B, T]`` of a distribution head's raw output ``[B, k*T]``.

    Example:
        >>> round(float(predictive_moments("mve", torch.tensor([[1.0, 0.0]])).variance), 4)  # softplus(0)
        0.6931
    """
    spec = uncertainty_method(head)
    if spec.moments is None:
        raise ConfigError(f"uncertainty method {head!r} has no distribution head; use one of {head_methods()}")
    return spec.moments(raw)


def head_loss(head: str, raw: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, settings: Any) -> torch.Tensor:
    """Mean of a distribution head's loss over the observed labels (``mask``); ``settings`` (the
    run's :class:`~dgl_graphtx.uncertainty.UncertaintyConfig`) carries the method's own
    coefficients, e.g. ``evidential_reg``.

    Example:
        >>> from dgl_graphtx.uncertainty import UncertaintyConfig
        >>> raw = torch.tensor([[0.0, 0.5413], [9.0, 0.5413]])  # variance softplus(0.5413) = 1
        >>> y, mask = torch.tensor([[1.0], [0.0]]), torch.tensor([[True], [False]])
        >>> round(float(head_loss("mve", raw, y, mask, UncertaintyConfig("mve"))), 3)
        1.419
    """
    spec = uncertainty_method(head)
    if spec.loss is None:
        raise ConfigError(f"uncertainty method {head!r} has no distribution loss; use one of {head_methods()}")
    target = torch.where(mask, target, torch.zeros_like(target))  # masked labels may be NaN
    per_label = spec.loss(raw, target, settings)
    per_label = torch.where(mask, per_label, torch.zeros_like(per_label))
    return per_label.sum() / mask.sum().clamp_min(1).to(per_label.dtype)
