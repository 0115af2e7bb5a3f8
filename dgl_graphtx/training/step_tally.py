"""What an epoch's optimisation steps report, kept on the device and read every few steps.

A step that reads a number back from the device (its loss for the epoch's mean, whether it was
finite) makes the host wait until the device has caught up, so the next step cannot be queued
while this one runs. :class:`StepTally` keeps the sums and each step's flags on the device;
the trainer reads them every :attr:`StepTally.window` steps and at the end of the epoch.
"""
from __future__ import annotations

from typing import List, NamedTuple, Tuple, Union

import torch


class StepReport(NamedTuple):
    """One step as read back: its batch (1-based), whether it was skipped (a loss or gradient
    that was not finite in some process), whether the loss was the cause, the loss and the
    gradient norm in this process."""

    batch: int
    skipped: bool
    loss_not_finite: bool
    loss: float
    grad_norm: float


class StepTally:
    """The loss summed over molecules, the molecules and the skipped steps of an epoch, and the
    flags of the last ``window`` steps, on ``device``.

    Example:
        >>> tally = StepTally("cpu", window=4)
        >>> tally.add(torch.tensor(2.0), torch.tensor(1.0), torch.tensor(False), torch.tensor(False), molecules=3)
        >>> tally.add(torch.tensor(float("nan")), torch.tensor(1.0), torch.tensor(True), torch.tensor(True), molecules=3)
        >>> [(r.batch, r.skipped) for r in tally.read()], tally.totals.tolist()
        ([(1, False), (2, True)], [6.0, 3.0, 1.0])
    """

    def __init__(self, device: Union[torch.device, str], window: int) -> None:
        self.window = window
        self.totals = torch.zeros(3, dtype=torch.float64, device=device)  # loss x molecules, molecules, skipped
        self._steps = torch.zeros(window, 4, dtype=torch.float64, device=device)
        self._count = 0  # steps recorded since the last read
        self._batches = 0  # steps recorded in all

    @property
    def full(self) -> bool:
        """Whether ``window`` steps wait to be read."""
        return self._count == self.window

    def add(self, loss: torch.Tensor, grad_norm: torch.Tensor, skipped: torch.Tensor, loss_not_finite: torch.Tensor,
            molecules: int) -> None:
        """Record one step (all tensors 0-d on the device; nothing is read back)."""
        loss = loss.detach().double()
        kept = (~skipped).double()
        self.totals += torch.stack([torch.where(skipped, 0.0, loss) * molecules, kept * molecules, 1.0 - kept])
        self._steps[self._count] = torch.stack([1.0 - kept, loss_not_finite.double(), loss, grad_norm.detach().double()])
        self._count += 1
        self._batches += 1

    def read(self) -> List[StepReport]:
        """The steps recorded since the last read (one read of the device)."""
        rows: List[Tuple[float, ...]] = [tuple(row) for row in self._steps[: self._count].tolist()]
        first = self._batches - self._count + 1
        self._count = 0
        return [StepReport(first + i, bool(row[0]), bool(row[1]), row[2], row[3]) for i, row in enumerate(rows)]
