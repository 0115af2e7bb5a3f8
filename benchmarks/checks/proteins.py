"""Real protein structures for the large-graph benchmark, read from the MDAnalysisTests package.

MDAnalysisTests (the test data of MDAnalysis, https://www.mdanalysis.org; package licence LGPL-3.0-or-later) ships
PDB / GRO files of real systems. The benchmark never downloads anything itself: fetch the package
archive once with pip's ordinary client into the ignored folder ``.cache/mdanalysistests``::

    pip download --no-deps MDAnalysisTests -d .cache/mdanalysistests

and the files are read straight out of the archive (``.tar.gz`` sdist or ``.whl``). Bonds are not
stored in these files for standard residues; they are inferred from distances (covalent radii
sum + 0.45 Angstrom, the usual proximity rule), which is what a user with a bare PDB file does.
"""
from __future__ import annotations

import gzip
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from scipy.spatial import cKDTree

import dgl

DATA_DIR = Path(__file__).resolve().parents[2] / ".cache" / "mdanalysistests"
FETCH_HINT = "pip download --no-deps MDAnalysisTests -d .cache/mdanalysistests"

#: (file in MDAnalysisTests/data, description)
STRUCTURES: Dict[str, Tuple[str, str]] = {
    "adk": ("adk_open.pdb", "adenylate kinase (open), PDB 4AKE chain A"),
    "adk_solvated": ("adk_oplsaa.gro", "adenylate kinase in water and ions (OPLS-AA, GRO)"),
    "yiip_membrane": ("analysis/YiiP_lipids.gro.gz", "YiiP transporter lipid membrane (GRO)"),
}

_COVALENT_RADIUS = {"H": 0.31, "C": 0.76, "N": 0.71, "O": 0.66, "S": 1.05, "P": 1.07, "NA": 1.66, "CL": 1.02,
                    "MG": 1.41, "K": 2.03, "CA": 1.76, "ZN": 1.22, "FE": 1.32}
_BOND_TOLERANCE = 0.45
_IONS = {"NA", "CL", "K", "MG", "CA", "ZN", "SOD", "CLA", "POT", "NA+", "CL-"}
_ION_ELEMENT = {"SOD": "NA", "POT": "K", "CLA": "CL", "NA+": "NA", "CL-": "CL"}


def _archive() -> Optional[Path]:
    found = sorted(DATA_DIR.glob("[Mm][Dd][Aa]nalysis[Tt]ests-*")) if DATA_DIR.exists() else []
    return found[-1] if found else None


def _read_member(archive: Path, name: str) -> Optional[bytes]:
    suffix = f"MDAnalysisTests/data/{name}"
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.namelist() if m.endswith(suffix)]
            return z.read(members[0]) if members else None
    with tarfile.open(archive) as t:
        members = [m for m in t.getmembers() if m.name.endswith(suffix)]
        return t.extractfile(members[0]).read() if members else None


def _element(atom_name: str, residue: str, element_field: str = "") -> str:
    """Element symbol: the PDB element column when present, ion residues by name, else the first
    letter of the atom name (CA in a protein residue is an alpha carbon)."""
    if element_field.strip():
        return element_field.strip().upper()
    res = residue.strip().upper()
    if res in _IONS:
        return _ION_ELEMENT.get(res, res)
    letters = "".join(c for c in atom_name if c.isalpha()).upper()
    return letters[:1] if letters else "C"


def _parse(name: str, text: str) -> Tuple[np.ndarray, List[str]]:
    pos, elements = [], []
    if name.endswith(".gro"):
        lines = text.splitlines()
        for line in lines[2:2 + int(lines[1])]:
            residue, atom = line[5:10], line[10:15].strip()
            pos.append([float(line[20:28]) * 10, float(line[28:36]) * 10, float(line[36:44]) * 10])  # nm -> A
            elements.append(_element(atom, residue))
    else:
        for line in text.splitlines():
            if line.startswith(("ATOM", "HETATM")):
                pos.append([float(line[30:38]), float(line[38:46]), float(line[46:54])])
                elements.append(_element(line[12:16], line[17:20], line[76:78] if len(line) >= 78 else ""))
    return np.asarray(pos, dtype=np.float64), elements


def load_structure(key: str) -> Optional[Tuple[dgl.DGLGraph, str]]:
    """``(graph with ndata["pos"] and distance-inferred bonds, description)``, or ``None`` when the
    MDAnalysisTests archive is not in :data:`DATA_DIR`."""
    archive = _archive()
    if archive is None:
        return None
    filename, description = STRUCTURES[key]
    raw = _read_member(archive, filename)
    if raw is None:
        return None
    if filename.endswith(".gz"):
        raw = gzip.decompress(raw)
    pos, elements = _parse(filename.removesuffix(".gz"), raw.decode("latin-1"))
    radius = np.array([_COVALENT_RADIUS.get(e, 0.76) for e in elements])
    pairs = cKDTree(pos).query_pairs(2 * radius.max() + _BOND_TOLERANCE, output_type="ndarray")
    a, b = pairs[:, 0], pairs[:, 1]
    ions = np.array([e in _IONS for e in elements])
    bonded = (np.linalg.norm(pos[a] - pos[b], axis=1) <= radius[a] + radius[b] + _BOND_TOLERANCE) & ~ions[a] & ~ions[b]
    a, b = torch.from_numpy(a[bonded]), torch.from_numpy(b[bonded])
    g = dgl.graph((torch.cat([a, b]), torch.cat([b, a])), num_nodes=len(pos))
    g.ndata["pos"] = torch.from_numpy(pos).float()
    return g, f"{description}; {archive.name}"
