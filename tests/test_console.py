"""The entry points of the ``dgl-graphtx`` command load it inside their own ``try``: Ctrl-C while
torch, DGL and RDKit load (seconds) is the one interruption line, exit status 130, where it printed
Python's traceback (or, on Python 3.10, matplotlib's ``RuntimeError``, exit status 1)."""
from __future__ import annotations

import signal
import subprocess
import sys
from typing import Callable

import pytest

from command_processes import command_env

from dgl_graphtx import console


def _loading_fails(monkeypatch, failure: Callable[[], None]) -> None:
    """Importing ``dgl_graphtx.cli``, the command the entry points load, calls ``failure`` (which raises)."""
    class Finder:
        def find_spec(self, name, path=None, target=None):
            if name == "dgl_graphtx.cli":
                failure()

    monkeypatch.delitem(sys.modules, "dgl_graphtx.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])


def _interrupted() -> None:
    raise KeyboardInterrupt


def _interrupted_then_wrapped() -> None:
    """What Python 3.10 raised while handling an interruption inside matplotlib's import."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise RuntimeError("Error calling __set_name__ on '_axis_method_wrapper' instance 'set_zticks' in 'Axes3D'")


@pytest.mark.parametrize("entry", ["console_main", "module_main"])
@pytest.mark.parametrize("failure", [_interrupted, _interrupted_then_wrapped])
def test_ctrl_c_while_the_command_loads_is_one_line(entry, failure, monkeypatch, capsys):
    _loading_fails(monkeypatch, failure)
    assert getattr(console, entry)() == 130
    assert capsys.readouterr().err == "error: interrupted (Ctrl-C)\n"


def test_another_error_while_the_command_loads_is_not_taken_for_an_interruption(monkeypatch):
    def broken() -> None:
        raise ImportError("a broken install")

    _loading_fails(monkeypatch, broken)
    with pytest.raises(ImportError, match="a broken install"):
        console.console_main()


def test_an_import_that_fails_after_the_signal_came_is_the_interruption(monkeypatch, capsys):
    """The probe, once in 24: a module whose import was interrupted, imported again by another,
    failed with pybind11's ImportError ('generic_type: type ... is already registered'), which does
    not carry the KeyboardInterrupt; the signal itself was noted."""
    def signal_then_other_error() -> None:
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # swallowed by the interrupted module's own clean-up
        raise ImportError('generic_type: type "ObjSense" is already registered!')

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test worker may ignore it)
    try:
        _loading_fails(monkeypatch, signal_then_other_error)
        assert console.console_main() == 130
    finally:
        signal.signal(signal.SIGINT, previous)
    assert capsys.readouterr().err == "error: interrupted (Ctrl-C)\n"
    assert signal.getsignal(signal.SIGINT) is previous


def test_an_interruption_a_c_extension_caught_does_not_end_the_process_by_sigint(tmp_path):
    """CPython notes a KeyboardInterrupt that ends code run through PyRun_String (pybind11's and
    Boost.Python's exec: torch, RDKit) and, under ``python -m``, then ends the interpreter by SIGINT
    (-2), even after the command caught it and returned 130 (the probe: 2 of 10 during the extra
    features; 3 of 24 while the command loaded)."""
    package = tmp_path / "interrupted_inside"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import ctypes, sys\n"
        "from dgl_graphtx import console\n"
        "def command():\n"
        "    ctypes.pythonapi.PyRun_SimpleString(b'raise KeyboardInterrupt')  # an extension's exec, interrupted\n"
        "    return 130\n"
        "sys.exit(console._run(lambda: command))\n")
    done = subprocess.run([sys.executable, "-m", package.name], capture_output=True, text=True, env=command_env(),
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 130, done.stderr
