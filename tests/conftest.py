"""Shared fixtures and independent reference helpers for the foundation-layer tests.

The helpers here never call into ``dgl_graphtx``: they compute reference values straight from
RDKit, numpy or the raw text of an SDF file, so that the tests compare the library against
something it did not produce itself.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List, Tuple

os.environ.setdefault("DGLBACKEND", "pytorch")
# Importing ``ogb`` starts background threads (ogb.version and the ``outdated`` package) that ask
# PyPI for the latest version. Tests must never touch the network: make ``outdated`` unimportable
# before anything imports ogb, which makes ogb skip its check (it guards the import).
sys.modules.setdefault("outdated", None)
os.environ.setdefault("OUTDATED_IGNORE", "1")

import numpy as np  # noqa: E402  (after the guard above)
import pytest  # noqa: E402  (after the guard above)
from rdkit import Chem  # noqa: E402  (after the guard above)

from dgl_graphtx.datasets import example_sdf_path  # noqa: E402  (after the guard above)
from dgl_graphtx.nn.tracing import CAN_EXPORT  # noqa: E402  (after the guard above)

#: Molecules with rings, branches, charges, stereo, triple/aromatic bonds and fragments.
REFERENCE_SMILES = [
    "CCO",
    "c1ccccc1O",
    "CC(=O)Nc1ccc(O)cc1",
    "C1CC2CCC1C2",
    "C/C=C/C(=O)O",
    "N[C@@H](C)C(=O)O",
    "CC#N",
    "C[N+](C)(C)C",
    "[O-]C=O",
    "c1ccc2ccccc2c1",
]

#: Disconnected inputs: salts and mixtures.
FRAGMENTED_SMILES = ["[Na+].[Cl-]", "CC(=O)[O-].[Na+]", "c1ccccc1.O"]


def rdkit_spd(mol: Chem.Mol) -> np.ndarray:
    """Hop counts from ``Chem.GetDistanceMatrix`` with -1 for unreachable pairs."""
    dm = Chem.GetDistanceMatrix(mol)
    out = np.where(dm >= 1e6, -1, dm).astype(np.int64)  # RDKit uses 1e8 for "no path"
    return out


def in_graph_order(mol: Chem.Mol, graph) -> Chem.Mol:
    """The input ``mol`` with its atoms renumbered so that atom ``i`` is node ``i`` of ``graph``,
    following the graph's ``input_atom`` map (hydrogens the featurizer added, ``-1``, are left out).
    References computed on it line up with the graph's nodes; a wrong map shows as wrong atoms."""
    return Chem.RenumberAtoms(mol, [i for i in graph.ndata["input_atom"].tolist() if i >= 0])


def relation_pairs(rel) -> List[Tuple[int, int]]:
    """Relation-graph edges as (query i, key j) pairs (edge j -> i)."""
    src, dst = rel.edges()
    return list(zip(dst.tolist(), src.tolist()))


def edge_index(rel) -> Dict[Tuple[int, int], int]:
    """Map (query i, key j) -> edge id; asserts that no pair occurs twice."""
    pairs = relation_pairs(rel)
    index = {pair: e for e, pair in enumerate(pairs)}
    assert len(index) == len(pairs), "duplicate pairs in relation graph"
    return index


def parse_sdf_text(path: Path) -> List[dict]:
    """Read an SDF V2000 file by hand: atom symbols, coordinates and SD properties per record."""
    records = []
    text = Path(path).read_text()
    for block in text.split("$$$$"):
        lines = block.strip("\n").splitlines()
        if len(lines) < 4:
            continue
        counts = lines[3]
        n_atoms = int(counts[0:3])
        atoms = lines[4 : 4 + n_atoms]
        coords = np.array([[float(a[0:10]), float(a[10:20]), float(a[20:30])] for a in atoms])
        symbols = [a[31:34].strip() for a in atoms]
        props = {}
        for k, line in enumerate(lines):
            if line.startswith(">") and "<" in line:
                name = line[line.index("<") + 1 : line.rindex(">")]
                props[name] = lines[k + 1].strip()
        records.append({"name": lines[0].strip(), "coords": coords, "symbols": symbols, "props": props})
    return records


@pytest.fixture(scope="session")
def sdf_path() -> Path:
    return Path(example_sdf_path())


@pytest.fixture(scope="session")
def sdf_records(sdf_path) -> List[dict]:
    records = parse_sdf_text(sdf_path)
    assert len(records) == 8
    return records


@pytest.fixture(scope="session")
def sdf_mols_with_h(sdf_path) -> List[Chem.Mol]:
    mols = list(Chem.SDMolSupplier(str(sdf_path), removeHs=False))
    assert all(m is not None for m in mols)
    return mols


@pytest.fixture(scope="session")
def sdf_mols(sdf_path) -> List[Chem.Mol]:
    mols = list(Chem.SDMolSupplier(str(sdf_path), removeHs=True))
    assert all(m is not None for m in mols)
    return mols


@pytest.fixture(scope="session", autouse=True)
def user_cache_in_tmp(tmp_path_factory):
    """The user's dataset cache (``$XDG_CACHE_HOME``, used by ``train`` by default) in a temporary
    folder: tests never write into the real home folder."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if previous is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = previous


BENCHMARK_TESTS = Path(__file__).resolve().parent / "benchmarks"


#: Docstring examples that export a model, which needs torch 2.6 (older torch refuses in one line).
EXPORTING_EXAMPLES = ("dgl_graphtx.inference.export.export_model",)


def pytest_collection_modifyitems(items):
    """The tests of the benchmark scripts (``tests/benchmarks/``) carry the ``benchmarks`` marker,
    which ``make test`` deselects and ``make test-benchmarks`` selects; examples that export are
    skipped before torch 2.6."""
    for item in items:
        if BENCHMARK_TESTS in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.benchmarks)
        if item.name in EXPORTING_EXAMPLES and not CAN_EXPORT:
            item.add_marker(pytest.mark.skip(reason="torch.export of the library's models needs torch 2.6 or newer"))
