"""What happened to problematic input rows: nothing is dropped without a record."""
from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import pandas as pd

from ..atomic_io import atomic_to_csv

#: The molecule was not featurized; the row is absent from the dataset.
SKIPPED = "skipped"
#: The molecule was kept but a target value was unusable and is treated as missing.
LABEL_MASKED = "label_masked"
#: The molecule was kept but an extra feature value was unusable (infinite, or beyond float32's
#: range) and is treated as missing (scaled to 0, the training mean).
FEATURE_MASKED = "feature_masked"


def one_line(text: str) -> str:
    r"""``text`` as is, or its ``repr`` if it holds line breaks or other control characters, so a
    report line stays one line whatever the input.

    Example:
        >>> one_line("CCO"), one_line("x\ny")
        ('CCO', "'x\\ny'")
    """
    return repr(text) if any(ch < " " or ch == "\x7f" for ch in text) else text


def show_value(value: object) -> str:
    """A cell's value as a report shows it: numbers as numbers, anything else quoted.

    Example:
        >>> import numpy as np
        >>> show_value(np.float64(1e308)), show_value("abc")
        ('1e+308', "'abc'")
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"{float(value):g}"
    return repr(str(value))


@dataclass(frozen=True)
class RowIssue:
    """One problem with one input row.

    Attributes:
        row: 0-based row (or SDF record) index in the input.
        smiles: the input text identifying the molecule (SMILES, or the SDF record name).
        reason: what went wrong, in words.
        action: :data:`SKIPPED`, :data:`LABEL_MASKED` or :data:`FEATURE_MASKED`.
    """

    row: int
    smiles: str
    reason: str
    action: str = SKIPPED


class InputReport:
    """Issues found while building a dataset, with a one-line summary and CSV export.

    Example:
        >>> rep = InputReport(total_rows=3)
        >>> rep.add(RowIssue(1, "C1CC", "SMILES syntax error"))
        >>> rep.num_skipped, rep.summary()
        (1, 'kept 2 of 3 rows; skipped 1 invalid (first: row 1 C1CC: SMILES syntax error)')
    """

    def __init__(self, total_rows: int, issues: Optional[List[RowIssue]] = None) -> None:
        self.total_rows = int(total_rows)
        self.issues: List[RowIssue] = list(issues or [])

    def add(self, issue: RowIssue) -> None:
        """Record one issue."""
        self.issues.append(issue)

    @property
    def skipped(self) -> List[RowIssue]:
        """Issues whose row is not in the dataset."""
        return [i for i in self.issues if i.action == SKIPPED]

    @property
    def num_skipped(self) -> int:
        """Number of rows left out of the dataset."""
        return len(self.skipped)

    def __len__(self) -> int:
        return len(self.issues)

    def summary(self) -> str:
        """One line: rows kept, skipped, labels masked, and the first problem."""
        kept = self.total_rows - self.num_skipped
        parts = [f"kept {kept} of {self.total_rows} rows"]
        if self.skipped:
            first = self.skipped[0]
            parts.append(
                f"skipped {self.num_skipped} invalid (first: row {first.row} {one_line(first.smiles)}: {one_line(first.reason)})"
            )
        for action, what in ((LABEL_MASKED, "label"), (FEATURE_MASKED, "extra feature")):
            masked = [i for i in self.issues if i.action == action]
            if masked:
                parts.append(f"masked unusable {what} values ({len(masked)} in the input report; first: row {masked[0].row}: "
                             f"{one_line(masked[0].reason)})")
        return "; ".join(parts)

    def to_frame(self) -> pd.DataFrame:
        """Issues as a DataFrame with columns ``row, smiles, reason, action``."""
        return pd.DataFrame([asdict(i) for i in self.issues], columns=["row", "smiles", "reason", "action"])

    def to_csv(self, path: Union[str, Path]) -> Path:
        """Write the issues to ``path`` as CSV and return the path."""
        return atomic_to_csv(self.to_frame(), path, index=False)

    def state_dict(self) -> Dict[str, object]:
        """Plain-data form for caches."""
        return {"total_rows": self.total_rows, "issues": [asdict(i) for i in self.issues]}

    @classmethod
    def from_state_dict(cls, state: Dict[str, Any]) -> "InputReport":
        """Inverse of :meth:`state_dict`."""
        return cls(state["total_rows"], [RowIssue(**i) for i in state["issues"]])
