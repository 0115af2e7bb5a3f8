"""The molecules that calibrate a run's uncertainty: never ones that trained the model or chose
its best epoch, since residuals on the part that selected the model are optimistically small and
intervals calibrated on them under-cover. They are carved from a part of the split (whole groups
of a scaffold or k-means split), given as rows (cross-validation, ensembles), or come from a
separate file."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple, Union

from ..datasets import MoleculeDataset, Split, carve, molecule_groups
from ..errors import ConfigError
from ..uncertainty import UncertaintyConfig

#: What a run may be given to calibrate on: nothing (a share is carved), rows of its dataset
#: (taken out of the training and validation parts; never test rows), or a dataset of its own
#: (featurized like the run's).
GivenCalibration = Union[None, Sequence[int], MoleculeDataset]


@dataclass
class CalibrationPart:
    """The calibration molecules: rows ``indices`` of ``dataset`` and where they come from.

    Example:
        >>> ds = MoleculeDataset(["C", "CC", "CCC"], [[1.0], [2.0], [3.0]], progress=False)
        >>> CalibrationPart(ds, [0, 2], "carved from train").record()
        {'source': 'carved from train', 'count': 2, 'rows': [0, 2]}
    """

    dataset: MoleculeDataset
    indices: List[int]
    source: str

    def record(self) -> Dict[str, Any]:
        """Which molecules calibrated, for ``metrics.json`` and the checkpoint: the source, the
        count and their row numbers in the input (file rows, as ``test_predictions.csv``'s ``row``)."""
        return {"source": self.source, "count": len(self.indices),
                "rows": self.dataset.rows[self.indices].tolist() if self.indices else []}


def carve_calibration(parts: Split, uncertainty: UncertaintyConfig, size: int, seed: int,
                      groups: Optional[Sequence[Hashable]] = None) -> Tuple[Split, List[int]]:
    """``parts`` less about ``size`` molecules carved from its ``uncertainty.calibration_from``
    part (whole ``groups`` when given), and the carved rows.

    Example:
        >>> parts, rows = carve_calibration(Split(list(range(8)), [8, 9], [10]), UncertaintyConfig("mve"), 2, seed=0)
        >>> len(parts.train), len(rows), set(rows) <= set(range(8))
        (6, 2, True)
    """
    source = uncertainty.calibration_from
    pool = parts.train if source == "train" else parts.valid
    kept, carved = carve(pool, max(1, size), seed, groups)
    if not carved:
        raise ConfigError(f"no calibration molecules could be carved from the {len(pool)} molecules of the {source} part "
                          f"(calibration share {uncertainty.calibration_share}{', whole groups' if groups is not None else ''}); "
                          "raise --calibration-share or give --calibration FILE")
    if not kept:
        raise ConfigError(f"the calibration share {uncertainty.calibration_share} takes all {len(pool)} molecules of the {source} "
                          "part; lower --calibration-share, enlarge that part (data.fractions) or give --calibration FILE")
    return (parts._replace(train=kept) if source == "train" else parts._replace(valid=kept)), carved


def calibration_part(dataset: MoleculeDataset, parts: Split, uncertainty: UncertaintyConfig, seed: int,
                     groups: Optional[Sequence[Hashable]] = None, given: GivenCalibration = None,
                     kind: Union[None, str, Split] = None) -> Tuple[Split, Optional[CalibrationPart]]:
    """The split a run trains with and its calibration molecules (``None`` without an uncertainty
    method): ``given`` rows or dataset, else a share carved by :func:`carve_calibration`, keeping
    ``groups`` whole, or without them those of the split kind ``kind`` (none for a given :class:`Split`).

    Example:
        >>> ds = MoleculeDataset(["C", "CC", "CCC", "CCCC", "CCO", "CCN"], [[float(i)] for i in range(6)], progress=False)
        >>> parts, part = calibration_part(ds, Split([0, 1, 2, 3], [4], [5]), UncertaintyConfig("mve"), 0, given=[3])
        >>> parts.train, part.record()
        ([0, 1, 2], {'source': 'given rows', 'count': 1, 'rows': [3]})
    """
    if not uncertainty.active:
        if given is not None:
            raise ConfigError("a calibration set (--calibration) calibrates an uncertainty: choose a method with --uncertainty")
        return parts, None
    if isinstance(given, MoleculeDataset):
        if given.target_names != dataset.target_names:
            raise ConfigError(f"the calibration data has targets {given.target_names}, the training data {dataset.target_names}")
        return parts, CalibrationPart(given, list(range(len(given))), "calibration file")
    if given is not None:
        rows = sorted(set(int(i) for i in given))
        taken = set(rows)
        if taken & set(parts.test):
            raise ConfigError(f"calibration rows {sorted(taken & set(parts.test))[:5]} are in the test part; a molecule "
                              "that calibrates cannot also measure the calibration")
        parts = parts._replace(train=sorted(set(parts.train) - taken), valid=sorted(set(parts.valid) - taken))
        if not parts.train or not parts.valid:
            raise ConfigError("the given calibration rows leave no training or validation molecules")
        return parts, CalibrationPart(dataset, rows, "given rows")
    if groups is None and isinstance(kind, str):
        groups = molecule_groups(kind, dataset.identifiers, seed)
    size = round(uncertainty.calibration_share * len(dataset))
    parts, carved = carve_calibration(parts, uncertainty, size, seed, groups)
    return parts, CalibrationPart(dataset, carved, f"carved from {uncertainty.calibration_from}")
