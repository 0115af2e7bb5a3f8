"""The ``dgl.graphbolt`` placeholder: registered exactly when the installed DGL has no compiled
graphbolt library for the running torch, and ``import dgl`` works either way. The expectation is
derived from the files in DGL's own package folder, not from the library's helper."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import torch

from dgl_graphtx import _dgl_env


def _dgl_dir() -> Path:
    return Path(next(iter(importlib.util.find_spec("dgl").submodule_search_locations)))


def _has_library_for(torch_version: str) -> bool:
    release = torch_version.split("+")[0]
    return any(p.name.startswith(f"libgraphbolt_pytorch_{release}.") for p in (_dgl_dir() / "graphbolt").iterdir())


def test_placeholder_used_exactly_when_dgl_lacks_the_library():
    assert _dgl_env.GRAPHBOLT_PLACEHOLDER == (not _has_library_for(torch.__version__))


def test_library_lookup_reads_dgl_folder(tmp_path):
    (tmp_path / "graphbolt").mkdir()
    (tmp_path / "graphbolt" / "libgraphbolt_pytorch_2.2.1.so").write_bytes(b"")
    assert _dgl_env.graphbolt_library("2.2.1+cu121", tmp_path) == tmp_path / "graphbolt" / "libgraphbolt_pytorch_2.2.1.so"
    assert _dgl_env.graphbolt_library("2.2.10", tmp_path) is None
    assert _dgl_env.graphbolt_library("2.13.0+cpu", tmp_path) is None


def test_fresh_interpreter_imports_dgl_after_the_package():
    """``import dgl_graphtx`` then ``import dgl`` computes in a new process, with DGL's own
    graphbolt where it has one and the placeholder where it has not."""
    code = (
        "import dgl_graphtx, dgl, sys, torch\n"
        "g = dgl.graph(([0, 1], [1, 2]))\n"
        "g.ndata['x'] = torch.ones(3, 2)\n"
        "import dgl.function as fn\n"
        "g.update_all(fn.copy_u('x', 'm'), fn.sum('m', 'y'))\n"
        "print(g.ndata['y'].sum().item(), hasattr(sys.modules['dgl.graphbolt'], '__dgl_graphtx_placeholder__'))\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout.split()
    assert out == ["4.0", str(not _has_library_for(torch.__version__))]
