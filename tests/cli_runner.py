"""Run the ``dgl-graphtx`` command in-process with its output captured (shared by the CLI tests)."""
from __future__ import annotations

import contextlib
import io
import warnings
from typing import Any, Callable, Sequence, Tuple

from dgl_graphtx.cli import main
from dgl_graphtx.training import Trainer


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


def assert_one_error_line(result: Tuple[int, str, str], *fragments: str) -> str:
    """A user error: exit status 2, exactly one ``error:`` line on stderr holding every fragment,
    no traceback; returns that line."""
    code, out, err = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (code, err)
    assert "Traceback" not in out + err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def run_cli_without_runtime_warnings(argv: Sequence[object]) -> Tuple[int, str, str]:
    """:func:`run_cli`, failing the test if the command let a ``RuntimeWarning`` escape (numpy's
    ``invalid value`` warnings and the like must be handled, not printed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_cli(argv)
    leaked = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not leaked, [str(w.message) for w in leaked]
    return result


def must_not_be_called(what: str) -> Callable[..., Any]:
    """A stand-in that fails the test when called, saying that ``what`` happened too early."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(what)
    return refuse


def stopped_after_first_epoch(monkeypatch: Any, argv: Sequence[object]) -> None:
    """Run the training command ``argv`` and stop it as Ctrl-C would (``KeyboardInterrupt``) when
    its second epoch starts, so that its ``last.pt`` holds epoch 1."""
    import pytest

    real = Trainer._train_epoch

    def stop_at_epoch_2(self, module, loader, optimizer, scheduler, epoch):
        if epoch == 2:
            raise KeyboardInterrupt
        return real(self, module, loader, optimizer, scheduler, epoch)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_train_epoch", stop_at_epoch_2)
        with pytest.raises(KeyboardInterrupt):
            run_cli(argv)
