"""Training labels checked before featurization, and text class labels mapped to 0/1.

A target whose every value is blank or not a number cannot train anything, so it is refused with
one line naming the target and what it holds. For classification, a column of two text classes
(``BBB+``/``BBB-``, ``active``/``inactive``) is mapped to 0/1: the positive class is the one
``positive_label`` names, else the one that reads as positive (``+``, ``yes``, ``active``,
``true``, ``positive``...), else the later one alphabetically; the mapping is logged, stored in the
checkpoint, and applied again by ``evaluate`` and ``plot parity`` to files with the same text labels.
"""
from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from ..errors import ConfigError

logger = logging.getLogger("dgl_graphtx")

#: Cell texts read as a missing label.
BLANKS = frozenset({"", "nan", "NaN", "NA", "N/A", "None"})
_POSITIVE_WORDS = frozenset({"1", "yes", "y", "true", "t", "active", "positive", "pos", "p", "hit", "toxic", "penetrating"})
_NEGATIVE_WORDS = frozenset({"0", "no", "n", "false", "f", "inactive", "negative", "neg", "nonactive", "non-toxic", "nontoxic"})


@dataclass(frozen=True)
class ClassLabels:
    """The two classes of one classification target: which text is 0 and which is 1.

    Example:
        >>> labels = ClassLabels("BBB", negative="BBB-", positive="BBB+")
        >>> labels.encode(pd.Series(["BBB+", "BBB-", None])).tolist()
        [1.0, 0.0, nan]
    """

    target: str
    negative: str
    positive: str

    def encode(self, values: pd.Series) -> pd.Series:
        """``values`` as 1.0 (positive), 0.0 (negative) or NaN (blank); other values stay as they
        are (and are reported as unusable labels by the dataset)."""
        texts = _texts(values)
        out = values.astype(object).copy()
        for row, text in enumerate(texts):
            if text in BLANKS:
                out.iloc[row] = np.nan
            elif _same(text, self.positive):
                out.iloc[row] = 1.0
            elif _same(text, self.negative):
                out.iloc[row] = 0.0
        return out

    def describe(self) -> str:
        """One sentence saying which class is positive."""
        return f"target {self.target!r}: class {self.positive!r} -> 1 (positive), {self.negative!r} -> 0"

    def to_dict(self) -> Dict[str, str]:
        """Plain dict (checkpoint metadata)."""
        return asdict(self)


def _texts(values: pd.Series) -> List[str]:
    return ["" if pd.isna(v) else (f"{v:g}" if isinstance(v, float) else str(v).strip()) for v in values]


def _same(text: str, label: str) -> bool:
    """Equal as text, or as numbers (``1.0`` and ``1``)."""
    if text == label:
        return True
    try:
        return float(text) == float(label)
    except ValueError:
        return False


def _numbers(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)


def _reads_positive(text: str) -> Optional[bool]:
    """True / False when the text clearly names a positive / negative class, else None."""
    word = text.strip().lower()
    if word in _POSITIVE_WORDS or re.search(r"\+$", word):
        return True
    if word in _NEGATIVE_WORDS or re.search(r"-$", word) or word.startswith(("non", "not ")):
        return False
    return None


def _choose(target: str, classes: Sequence[str], positive_label: Optional[str]) -> ClassLabels:
    if positive_label is not None:
        matches = [c for c in classes if _same(c, positive_label)]
        if not matches:
            raise ConfigError(f"--positive-label {positive_label!r} is not a value of target {target!r}; "
                              f"its values are {list(classes)}")
        positive = matches[0]
        negative = next(c for c in classes if c != positive)
        return ClassLabels(target, negative, positive)
    readings = [_reads_positive(c) for c in classes]
    if readings.count(True) == 1 and readings.count(False) <= 1:
        positive = classes[readings.index(True)]
    elif readings.count(False) == 1 and readings.count(None) == 1:
        positive = classes[readings.index(None)]
    else:
        positive = sorted(classes)[1]
    return ClassLabels(target, next(c for c in classes if c != positive), positive)


def encode_class_labels(
    frame: pd.DataFrame, positive_label: Optional[str] = None
) -> Tuple[pd.DataFrame, Tuple[ClassLabels, ...]]:
    """Map each target column of two text classes to 0/1 (see the module docstring).

    Columns whose numbers are all 0/1 are kept as they are; other numbers (say -1/1) are mapped only
    when ``positive_label`` names one of them. A mapped column with more or fewer than two classes,
    or a 0/1 column of one class, is an error naming its values.

    Example:
        >>> frame = pd.DataFrame({"BBB": ["BBB+", "BBB-", "BBB+", ""]})
        >>> encoded, classes = encode_class_labels(frame)
        >>> encoded["BBB"].tolist(), classes[0].positive
        ([1.0, 0.0, 1.0, nan], 'BBB+')
        >>> encode_class_labels(frame, positive_label="BBB-")[0]["BBB"].tolist()
        [0.0, 1.0, 0.0, nan]
    """
    out = frame.copy()
    found: List[ClassLabels] = []
    for name in frame.columns:
        values = frame[name]
        numbers = _numbers(values)
        observed = numbers[np.isfinite(numbers)]
        texts = [t for t in _texts(values) if t not in BLANKS]
        classes = list(dict.fromkeys(texts))
        if len(observed) and np.isin(observed, (0.0, 1.0)).all():
            if len(np.unique(observed)) == 1:
                _refuse_classes(name, [f"{observed[0]:g}"])
            continue  # already 0/1 (stray text cells are reported as unusable by the dataset)
        if positive_label is None and len(observed) == len(texts):
            continue  # numbers other than 0/1: check_binary_labels says how to map them
        if len(classes) != 2:
            _refuse_classes(name, classes)
        labels = _choose(str(name), classes, positive_label)
        out[name] = labels.encode(values)
        found.append(labels)
        logger.info("classification %s (pick the other with --positive-label)", labels.describe())
    return out, tuple(found)


def _refuse_classes(name: Any, classes: Sequence[str]) -> None:
    shown = ", ".join(repr(c) for c in classes[:6]) + (", ..." if len(classes) > 6 else "")
    raise ConfigError(f"classification target {name!r} has {len(classes)} distinct value(s) ({shown}); "
                      "it needs exactly two classes (map them to 0/1, or train with --task regression)")


def check_usable_targets(frame: pd.DataFrame, source: Any, task: str) -> None:
    """Raise :class:`ConfigError` for a target column without a single numeric value, naming what
    it holds, before anything is featurized or trained.

    Example:
        >>> check_usable_targets(pd.DataFrame({"BBB": ["BBB+", "BBB-"]}), "b3db.csv", "regression")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: target 'BBB' of b3db.csv has no usable label: its 2 values are text ('BBB+', 'BBB-'), not ...
    """
    for name in frame.columns:
        numbers = _numbers(frame[name])
        if np.isfinite(numbers).any():
            continue
        texts = [t for t in _texts(frame[name]) if t not in BLANKS]
        if not texts:
            raise ConfigError(f"target {name!r} of {source} has no usable label: every value is blank; choose another target")
        classes = list(dict.fromkeys(texts))
        shown = ", ".join(repr(c) for c in classes[:4]) + (", ..." if len(classes) > 4 else "")
        fix = ("for two classes train with --task classification (--positive-label VALUE picks the positive one)"
               if task == "regression" and len(classes) == 2 else "check the column / SD property")
        raise ConfigError(f"target {name!r} of {source} has no usable label: its {len(texts)} values are text ({shown}), "
                          f"not numbers; {fix}")


def class_labels_from_meta(stored: Optional[Sequence[Mapping[str, Any]]]) -> Tuple[ClassLabels, ...]:
    """The class mapping a checkpoint's metadata stores (its ``extra.class_labels``; ``None`` or
    empty when the labels were 0/1).

    Example:
        >>> class_labels_from_meta([{"target": "y", "negative": "no", "positive": "yes"}])[0].positive
        'yes'
    """
    return tuple(ClassLabels(**item) for item in stored or [])


def apply_class_labels(frame: pd.DataFrame, classes: Sequence[ClassLabels]) -> pd.DataFrame:
    """``frame`` with each mapped target's text classes encoded as at training time.

    Example:
        >>> apply_class_labels(pd.DataFrame({"y": ["yes", "no"]}), [ClassLabels("y", "no", "yes")])["y"].tolist()
        [1.0, 0.0]
    """
    out = frame.copy()
    for labels in classes:
        if labels.target in out.columns:
            out[labels.target] = labels.encode(out[labels.target])
    return out
