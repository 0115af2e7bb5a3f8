"""Runs Python examples of the docs for ``tests/test_docs_examples.py``, each in a fresh process.

``python docs_examples_runner.py WORKSPACE EXAMPLES.json RESULTS.json``: this process imports the
library once (with ``WORKSPACE/sitecustomize.py``, found on ``PYTHONPATH``), then forks one child
per example, which runs the example's code as ``__main__`` in its own copy of ``WORKSPACE`` with
its output in a file; the exit status and the output's tail of each go to ``RESULTS.json``.
Forking keeps the imports' cost (seconds per process) out of every example.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import dgl_graphtx.datasets  # noqa: E402,F401  (imported once, before the children fork)
import dgl_graphtx.inference  # noqa: E402,F401
import dgl_graphtx.insight  # noqa: E402,F401
import dgl_graphtx.runs  # noqa: E402,F401

#: Seconds an example may run before its process is stopped.
TIME_LIMIT = 300


def run_child(name: str, code: str, folder: Path) -> None:
    """In the forked child: the example's code as ``__main__`` in ``folder``, then exit."""
    output = os.open(folder / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    signal.alarm(TIME_LIMIT)
    status = 0
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main() -> None:
    workspace, examples, results_file = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text()), Path(sys.argv[3])
    results = {}
    for number, (name, code) in enumerate(examples.items()):
        folder = workspace.parent / f"example-{number}"
        shutil.copytree(workspace, folder, symlinks=True)
        start, pid = time.perf_counter(), os.fork()
        if pid == 0:
            run_child(name, code, folder)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        results[name] = {"status": status, "seconds": time.perf_counter() - start, "output": (folder / "output.txt").read_text()[-3000:]}
    results_file.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
