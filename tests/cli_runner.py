"""Run the ``dgl-graphtx`` command in-process with its output captured (shared by the CLI tests)."""
from __future__ import annotations

import contextlib
import io
from typing import Sequence, Tuple

from dgl_graphtx.cli import main


def run_cli(argv: Sequence[object]) -> Tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured: (exit code, stdout, stderr); argparse's
    ``SystemExit`` becomes its exit code."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()
