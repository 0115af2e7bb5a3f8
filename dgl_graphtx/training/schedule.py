"""Learning-rate schedules as multiplicative factors per optimisation step."""
from __future__ import annotations

import math
from typing import Callable

SCHEDULES = ("linear", "cosine", "constant")


def lr_factor(schedule: str, warmup_steps: int, total_steps: int, final_ratio: float) -> Callable[[int], float]:
    """Factor of the base learning rate at each step, for :class:`torch.optim.lr_scheduler.LambdaLR`.

    Linear warm-up from ~0 to 1 over ``warmup_steps``, then ``linear`` decay (GRPE paper) or
    ``cosine`` decay to ``final_ratio`` at ``total_steps``, or ``constant``.

    Example:
        >>> f = lr_factor("linear", warmup_steps=2, total_steps=6, final_ratio=0.0)
        >>> [round(f(s), 2) for s in range(7)]
        [0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0]
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        span = max(total_steps - warmup_steps, 1)
        progress = min((step - warmup_steps) / span, 1.0)
        if schedule == "linear":
            return 1.0 - (1.0 - final_ratio) * progress
        return final_ratio + (1.0 - final_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor
