"""The ``dgl.graphbolt`` placeholder: used exactly when the installed DGL has no compiled graphbolt
library for the running torch, and ``import dgl`` works in any import order where dgl_graphtx is
installed (the start-up hook ``dgl_graphtx-graphbolt.pth``). The expectation is derived from the
files in DGL's own package folder, not from the library's helper; every import order is tried in a
fresh interpreter."""
from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
from pathlib import Path
from typing import List

import torch

from dgl_graphtx import _dgl_env

#: A small DGL computation printing its result and whether dgl.graphbolt is the placeholder.
COMPUTE = (
    "import sys, torch\n"
    "import dgl.function as fn\n"
    "g = dgl.graph(([0, 1], [1, 2]))\n"
    "g.ndata['x'] = torch.ones(3, 2)\n"
    "g.update_all(fn.copy_u('x', 'm'), fn.sum('m', 'y'))\n"
    "print(g.ndata['y'].sum().item(), hasattr(sys.modules['dgl.graphbolt'], '__dgl_graphtx_placeholder__'))\n"
)


def _dgl_dir() -> Path:
    return Path(next(iter(importlib.util.find_spec("dgl").submodule_search_locations)))


def _has_library_for(torch_version: str) -> bool:
    release = torch_version.split("+")[0]
    return any(p.name.startswith(f"libgraphbolt_pytorch_{release}.") for p in (_dgl_dir() / "graphbolt").iterdir())


def _python(code: str, cwd: Path) -> List[str]:
    """The words of the last line ``code`` prints in a fresh interpreter started in ``cwd`` (outside
    the checkout, so only the installed package is found). Without ``DGLBACKEND`` and before
    ``~/.dgl/config.json`` exists (a fresh machine), DGL's first import prints a line of its own
    ("Setting the default backend to ...") before the computation's."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("DGLBACKEND", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[-1].split() if done.stdout.strip() else []


EXPECTED = ["4.0", str(not _has_library_for(torch.__version__))]


def test_library_lookup_reads_dgl_folder(tmp_path):
    (tmp_path / "graphbolt").mkdir()
    (tmp_path / "graphbolt" / "libgraphbolt_pytorch_2.2.1.so").write_bytes(b"")
    assert _dgl_env.graphbolt_library("2.2.1+cu121", tmp_path) == tmp_path / "graphbolt" / "libgraphbolt_pytorch_2.2.1.so"
    assert _dgl_env.graphbolt_library("2.2.10", tmp_path) is None
    assert _dgl_env.graphbolt_library("2.13.0+cpu", tmp_path) is None


def test_start_up_hook_is_installed_in_site_packages():
    hooks = [Path(d) / "dgl_graphtx-graphbolt.pth" for d in site.getsitepackages()]
    assert any(h.is_file() for h in hooks), f"no dgl_graphtx-graphbolt.pth in {site.getsitepackages()}"


def test_dgl_imported_first(tmp_path):
    assert _python("import dgl\n" + COMPUTE, tmp_path) == EXPECTED


def test_dgllife_imported_first(tmp_path):
    code = "import dgllife, dgl\nfrom dgllife.utils import smiles_to_bigraph\nassert smiles_to_bigraph('CCO').num_nodes() == 3\n"
    assert _python(code + COMPUTE, tmp_path) == EXPECTED


def test_dgl_imported_after_the_package(tmp_path):
    assert _python("import dgl_graphtx, dgl\n" + COMPUTE, tmp_path) == EXPECTED


def test_start_up_imports_nothing_and_installs_one_hook(tmp_path):
    """The start-up line imports nothing (a Python that never imports dgl pays for nothing, and a
    checkout of the package on sys.path later still wins over the installed copy), and puts one
    hook on sys.meta_path even where site-packages is read twice (a venv's lib64 link to lib)."""
    code = ("import sys; print('dgl_graphtx' in sys.modules, 'torch' in sys.modules, 'dgl' in sys.modules, "
            "sum(bool(getattr(f, '__dgl_graphtx_placeholder__', False)) for f in sys.meta_path))")
    assert _python(code, tmp_path) == ["False", "False", "False", "1"]


def test_pytest_of_a_user_test_file_that_imports_dgl(tmp_path):
    (tmp_path / "test_user.py").write_text(
        "import dgl\nimport torch\n\n\ndef test_graph():\n    g = dgl.graph(([0, 1], [1, 2]))\n"
        "    assert g.num_edges() == 2 and dgl.add_self_loop(g).num_edges() == 5\n")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
