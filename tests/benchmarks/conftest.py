"""Tests of the benchmark scripts (``benchmarks/``), not of the library: every test here carries the
``benchmarks`` marker, which ``make test`` deselects and ``make test-benchmarks`` selects."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # ``benchmarks`` is imported as a package from the repository root
    sys.path.insert(0, str(REPO))


def pytest_collection_modifyitems(items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.benchmarks)
