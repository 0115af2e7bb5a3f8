"""The molecules that calibrate a run's uncertainty: never ones that trained the model or chose
its best epoch, since residuals on the part that selected the model are optimistically small and
intervals calibrated on them under-cover. They are carved from a part of the split (whole groups
of a scaffold or k-means split), given as rows, or come from a separate file, whose molecules
that are also in the run's data are left out (compared by canonical SMILES), with a warning saying
how many."""
from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
from rdkit import Chem

from ..datasets import MoleculeDataset, Split, carve, molecule_groups
from ..datasets.data_record import PARTS
from ..errors import ConfigError, InvalidMoleculeError
from ..featurize.molecule import to_heavy_atom_mol
from ..uncertainty import UncertaintyConfig

logger = logging.getLogger("dgl_graphtx")

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
    #: Molecules of a calibration file left out because the run's data holds them too.
    left_out: int = 0

    def record(self) -> Dict[str, Any]:
        """Which molecules calibrated, for ``metrics.json`` and the checkpoint: the source, the
        count and their row numbers in the input (file rows, as ``test_predictions.csv``'s ``row``),
        and how many of a calibration file's were left out as the run's own (when any were)."""
        return {"source": self.source, "count": len(self.indices),
                "rows": self.dataset.rows[self.indices].tolist() if self.indices else [],
                **({"left_out_as_in_the_run": self.left_out} if self.left_out else {})}

    def identity(self) -> Dict[str, Any]:
        """What the run's checkpoints record of these molecules, so that a resumed run can be
        checked to calibrate on the same ones: the source, the count and a SHA-256 of their
        identifiers, input rows and labels.

        Example:
            >>> ds = MoleculeDataset(["C", "CC", "CCC"], [[1.0], [2.0], [3.0]], progress=False)
            >>> a, b = CalibrationPart(ds, [0, 2], "carved from train"), CalibrationPart(ds, [0, 1], "carved from train")
            >>> a.identity()["molecules"], a.identity() == b.identity()
            (2, False)
        """
        digest = hashlib.sha256()
        digest.update("\n".join(self.dataset.identifiers[i] for i in self.indices).encode())
        digest.update(self.dataset.rows[self.indices].numpy().astype(np.int64).tobytes())
        digest.update(self.dataset.raw_labels[self.indices].numpy().astype(np.float32).tobytes())
        return {"source": self.source, "molecules": len(self.indices), "digest": digest.hexdigest()}


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
    if not uncertainty.active:  # a calibration set without a method is refused by the run's plan
        return parts, None
    if isinstance(given, MoleculeDataset):
        if given.target_names != dataset.target_names:
            raise ConfigError(f"the calibration data has targets {given.target_names}, the training data {dataset.target_names}")
        return parts, calibration_file_part(given, dataset, parts)
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


def canonical_smiles(identifier: str) -> Optional[str]:
    """RDKit's canonical SMILES of a molecule identifier (its SMILES; hydrogens an SD record
    carried made implicit), or ``None`` for one that is no SMILES.

    Example:
        >>> canonical_smiles("OCC"), canonical_smiles("[H]OC([H])([H])C"), canonical_smiles("XYZ record 3")
        ('CCO', 'CCO', None)
    """
    try:
        return Chem.MolToSmiles(to_heavy_atom_mol(identifier))
    except InvalidMoleculeError:
        return None


def calibration_file_part(calibration: MoleculeDataset, dataset: MoleculeDataset, parts: Split) -> CalibrationPart:
    """The molecules of a calibration file that calibrate a run on ``dataset`` split into ``parts``:
    all but those whose canonical SMILES is also one of the run's training, validation or test
    molecules (a molecule that calibrates must neither have trained nor chosen the model, and
    cannot measure the calibration either), left out with one warning saying how many of each
    part; none left is an error.

    Example:
        >>> run = MoleculeDataset(["C", "CC", "CCC"], [[1.0], [2.0], [3.0]], progress=False)
        >>> file = MoleculeDataset(["OC", "CC", "CCCC"], [[1.0], [2.0], [3.0]], progress=False)
        >>> part = calibration_file_part(file, run, Split([0], [1], [2]))
        >>> part.indices, part.left_out
        ([0, 2], 1)
    """
    held: Dict[str, Set[str]] = {name: {c for c in (canonical_smiles(dataset.identifiers[i]) for i in getattr(parts, name)) if c}
                                 for name in PARTS}
    keep: List[int] = []
    clashes = {name: 0 for name in PARTS}
    for index, identifier in enumerate(calibration.identifiers):
        smiles = canonical_smiles(identifier)
        found = [name for name in PARTS if smiles is not None and smiles in held[name]]
        for name in found[:1]:
            clashes[name] += 1
        if not found:
            keep.append(index)
    left_out = len(calibration) - len(keep)
    if left_out:
        where = ", ".join(f"{n} in the {name} part" for name, n in clashes.items() if n)
        message = (f"{left_out} of the {len(calibration)} molecules of the calibration file are also in the run's data ({where}; "
                   "compared by canonical SMILES): a molecule that calibrates must not train, choose or test the model")
        if not keep:
            raise ConfigError(message + "; none is left to calibrate on: give a calibration file of other molecules")
        logger.warning("%s; left out, %d calibrate", message, len(keep))
    return CalibrationPart(calibration, keep, "calibration file", left_out)


#: Uncertainty settings that choose which molecules calibrate (and so which ones train).
CHOOSING = ("method", "calibration_share", "calibration_from")


def check_resumed_calibration(path: Path, saved: Optional[Dict[str, Any]], uncertainty: UncertaintyConfig) -> None:
    """Refuse to resume the run of ``path`` (its ``last.pt``) with uncertainty settings that choose
    other calibration molecules than it set apart when it started (``saved``: the uncertainty
    settings the checkpoint records, ``None`` for a run without a method): the molecules that
    would calibrate now may have trained.

    Example:
        >>> check_resumed_calibration(Path("last.pt"), {"method": "mve", "calibration_share": 0.1}, UncertaintyConfig("mve"))
        >>> check_resumed_calibration(Path("last.pt"), {"method": "mve", "calibration_share": 0.1},  # doctest: +ELLIPSIS
        ...                           UncertaintyConfig("mve", calibration_share=0.3))
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.ConfigError: last.pt was trained with uncertainty.calibration_share=0.1; resume with the same (now 0.3): the ...
    """
    before = dict(saved) if saved else {"method": "none"}
    defaults = UncertaintyConfig()
    names = CHOOSING if before["method"] != "none" or uncertainty.active else CHOOSING[:1]
    changed = [name for name in names if before.get(name, getattr(defaults, name)) != getattr(uncertainty, name)]
    if changed:
        trained = ", ".join(f"uncertainty.{n}={before.get(n, getattr(defaults, n))}" for n in changed)
        raise ConfigError(f"{path} was trained with {trained}; "
                          f"resume with the same (now {', '.join(str(getattr(uncertainty, n)) for n in changed)}): the molecules that "
                          "calibrate must be those set apart when the run started, which never trained")
