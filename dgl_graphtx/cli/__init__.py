"""Command-line interface: ``dgl-graphtx {train, hpopt, featurize, predict, evaluate, embed, plot, export, presets, info, demo}``.

One module per sub-command; each has ``register(subparsers)``, which adds its parser and sets
``func`` to its ``run(args)``: parse, call the library, print. The commands share the helpers of
``common.py`` (option groups), ``molecule_io.py`` (checkpoints and molecule files) and
``run_report.py`` (the summary of a training run); no command imports another. User mistakes
(missing files, bad columns, invalid settings, corrupt checkpoints) are printed as one ``error:``
line without a traceback and exit with status 2. Ctrl-C at the ``dgl-graphtx`` command
(:func:`console_main`) is one ``error: interrupted`` line too, exit status 130, saying whether
``--resume`` continues the run; :func:`main`, called from Python, lets the ``KeyboardInterrupt``
through.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, Optional, Sequence

from ..atomic_io import describe_os_error
from ..errors import INTERRUPTED, INTERRUPTED_EXIT, GraphTxError, PeerFailedError, one_line
from ..logs import configure_logging
from ..runs.distributed import launched_by_torchrun, report_user_error
from ..threads import set_threads
from . import demo, embed, evaluate, export, featurize, hpopt, info, plot, predict, presets, pretrain, train
from .common import verbosity

SUBCOMMANDS = (train, hpopt, featurize, predict, evaluate, embed, plot, export, presets, pretrain, info, demo)


#: Exit status of a command whose output's reader went away (128 + SIGPIPE, as a shell reports it).
BROKEN_PIPE_EXIT = 141


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose mistakes print one ``error:`` line (exit 2), like user errors."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {one_line(message)} (see '{self.prog} --help')\n")  # a value may hold line breaks


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests).

    Example:
        >>> build_parser().parse_args(["info"]).command
        'info'
    """
    parser = OneLineErrorParser(prog="dgl-graphtx", description="Graph transformers (GRPE, MoireGT, Gradformer) for molecules on DGL.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``dgl-graphtx`` console script."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for commands that relaunch themselves
    configure_logging(verbosity(args))
    try:
        if hasattr(args, "threads"):  # before torch starts its thread pool; processes started later inherit it
            set_threads(args.threads)
        return args.func(args)
    except GraphTxError as err:
        return report_user_error(one_line(err), after_peers=isinstance(err, PeerFailedError))  # whatever the input held
    except BrokenPipeError:  # the reader of the output went away (`| head`): stop quietly, as other commands do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more reaches the closed pipe at exit
        return BROKEN_PIPE_EXIT
    except OSError as err:  # an I/O failure the command did not anticipate: still one line, naming the path
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        return report_user_error(f"{describe_os_error(err)}{where}")
    except KeyboardInterrupt as err:
        if launched_by_torchrun():  # the launcher passed on its interruption and says it once; what was written is on disk,
            os._exit(INTERRUPTED_EXIT)  # and an exit through the interpreter's shutdown can wait forever on the process group
        raise CommandInterrupted(interrupted_message(args)) from err


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl-C during a command, with what the user can do next as its message."""


def interrupted_message(args: argparse.Namespace) -> str:
    """What an interrupted command says: whether ``--resume`` continues it from what it wrote.

    Example:
        >>> interrupted_message(build_parser().parse_args(["train", "m.csv", "--targets", "y", "--out", "run"]))
        'interrupted (Ctrl-C); what was written is kept: rerun the same command with --resume to continue'
        >>> interrupted_message(build_parser().parse_args(["predict", "--checkpoint", "best.pt", "CCO"]))
        'interrupted (Ctrl-C)'
    """
    if getattr(args, "interrupted_hint", None):  # set by a command once it knows more than its options say
        return f"{INTERRUPTED}; {args.interrupted_hint}"
    if args.command == "featurize":  # a store resumes from its finished shards when started again
        return f"{INTERRUPTED}; the finished shards are kept: rerun the same command to continue"
    resumable = hasattr(args, "resume") and (args.command != "predict" or args.output is not None)
    return INTERRUPTED + ("; what was written is kept: rerun the same command with --resume to continue" if resumable else "")


def console_main() -> int:
    """The ``dgl-graphtx`` console script: :func:`main`, with Ctrl-C said in one ``error:`` line
    (exit status 130) rather than Python's traceback."""
    try:
        return main()
    except KeyboardInterrupt as err:
        print(f"error: {err if isinstance(err, CommandInterrupted) else INTERRUPTED}", file=sys.stderr, flush=True)
        return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(console_main())
