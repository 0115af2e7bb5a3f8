"""Importing the library and drawing its figures leave the caller's matplotlib backend as it is:
the figure modules used to call ``matplotlib.use("Agg")`` at import, which switched a notebook's
backend away under the user (``plt.show()`` then drew nothing), and imported ``pyplot``."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_callers_backend_survives_importing_and_drawing(tmp_path):
    script = ("import json, sys\n"
              "import matplotlib\n"
              "matplotlib.use('svg')  # the caller's choice (a notebook's would be its inline backend)\n"
              "import dgl_graphtx.cli, dgl_graphtx.runs, dgl_graphtx.insight\n"
              "from rdkit import Chem\n"
              "from dgl_graphtx.insight import plot_atom_importance\n"
              "from dgl_graphtx.training.plots import plot_parity\n"
              f"out = {str(tmp_path)!r}\n"
              "plot_parity([1.0, 2.0, 3.0], [1.1, 1.9, 3.2], out + '/parity.png')\n"
              "plot_atom_importance(Chem.MolFromSmiles('CCO'), [0.2, 0.3, 0.5], out + '/atoms.png', size=200)\n"
              "print(json.dumps({'backend': matplotlib.get_backend(), 'pyplot': 'matplotlib.pyplot' in sys.modules}))\n")
    job = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO,
                         env={"PATH": "", "PYTHONPATH": str(REPO), "DGLBACKEND": "pytorch", "OUTDATED_IGNORE": "1"})
    assert job.returncode == 0, job.stderr[-2000:]
    assert json.loads(job.stdout.strip().splitlines()[-1]) == {"backend": "svg", "pyplot": False}
    for name in ("parity.png", "atoms.png"):  # PNG by the suffix, whatever the backend
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
