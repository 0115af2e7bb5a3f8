"""The MOSES training set as a pretraining corpus, read out of the ``molsets`` wheel."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Union

from ...atomic_io import atomic_path
from ...errors import ConfigError

PathLike = Union[str, Path]


#: The MOSES training set inside the ``molsets`` wheel: 1,584,663 ZINC-derived SMILES, MIT licence
#: (Polykovskiy et al., Front. Pharmacol. 11, 565644 (2020)).
MOSES_MEMBER = "moses/dataset/data/train.csv.gz"


MOSES_LICENCE = "MIT (MOSES, Polykovskiy et al. 2020; molecules from ZINC)"


def moses_corpus(wheel_dir: PathLike, out_dir: PathLike) -> Path:
    """The MOSES training SMILES (``SMILES`` column) as ``out_dir/moses_train.csv.gz``, copied out
    of the ``molsets`` wheel in ``wheel_dir`` (fetch it with ``pip download --no-deps molsets -d
    DIR``; it is read, never installed). Nothing is downloaded here."""
    wheels = sorted(Path(wheel_dir).glob("molsets-*.whl"))
    if not wheels:
        raise ConfigError(f"no molsets wheel in {wheel_dir}: fetch it with 'pip download --no-deps molsets -d {wheel_dir}'")
    target = Path(out_dir) / "moses_train.csv.gz"
    if not target.is_file():
        with zipfile.ZipFile(wheels[-1]) as archive, archive.open(MOSES_MEMBER) as raw, atomic_path(target) as tmp:
            tmp.write_bytes(raw.read())
    return target
