"""Importing the package never starts ogb's version check: with the optional ``outdated``
package installed, ogb asks the package index for its latest version in a non-daemon thread
with no time-out, which can hang a process at exit on a machine without network."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_importing_the_package_never_starts_ogbs_version_check(tmp_path):
    # a stand-in ``outdated`` that records any use (the real one would go to the network)
    fake = tmp_path / "site" / "outdated"
    fake.mkdir(parents=True)
    calls = tmp_path / "calls.txt"
    (fake / "__init__.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(calls)!r}).write_text('imported')\n"
        "def check_outdated(package, version):\n"
        f"    pathlib.Path({str(calls)!r}).write_text('checked ' + package)\n"
        "    return False, version\n")
    script = ("import json, sys, threading\n"
              "import dgl_graphtx.cli, dgl_graphtx.training.metrics, dgl_graphtx.env_info\n"
              "print(json.dumps({'ogb': 'ogb' in sys.modules, 'outdated': sys.modules.get('outdated') is not None,\n"
              "                  'threads': [t.name for t in threading.enumerate()]}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(REPO)]), "DGLBACKEND": "pytorch"}
    env.pop("OUTDATED_IGNORE", None)
    job = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert job.returncode == 0, job.stderr[-2000:]
    seen = json.loads(job.stdout.strip().splitlines()[-1])
    assert seen == {"ogb": True, "outdated": False, "threads": ["MainThread"]}
    assert not calls.exists()  # never imported, never asked


def test_the_guard_leaves_sys_modules_as_it_found_them(monkeypatch):
    from dgl_graphtx._ogb import OUTDATED, import_without_version_check
    monkeypatch.delitem(sys.modules, "ogb")  # imported again below, as on first use
    monkeypatch.delitem(sys.modules, OUTDATED, raising=False)
    assert import_without_version_check().__name__ == "ogb"
    assert OUTDATED not in sys.modules  # hidden while ogb was imported, then no trace
