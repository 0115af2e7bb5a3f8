"""Exceptions raised for user mistakes.

Every error that a user can fix (a bad SMILES in strict mode, an impossible configuration, a
corrupt checkpoint) derives from :class:`GraphTxError`, so command-line tools can print it as one
line without a traceback while genuine bugs still surface with their stack.
"""

#: Exit status of a command, a job or one of its processes stopped by an interruption (Ctrl-C: 128 + SIGINT).
INTERRUPTED_EXIT = 130
#: What an interrupted command says first (after ``error:``), before what can be done next.
INTERRUPTED = "interrupted (Ctrl-C)"


def one_line(message: object) -> str:
    """``message`` (an error, or its text) as one line: its lines stripped and joined by spaces, so
    that what an input held (a value with line breaks) cannot break the one ``error:`` line.

    Example:
        >>> one_line(ValueError("no spread\\n  to calibrate"))
        'no spread to calibrate'
    """
    return " ".join(line.strip() for line in str(message).splitlines())


def raised_by_interruption(error: BaseException) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt`` or was raised while one unwound (a library's
    clean-up failing halfway, say): Ctrl-C is then what stopped the work.

    Example:
        >>> try:
        ...     try:
        ...         raise KeyboardInterrupt
        ...     finally:
        ...         raise FileNotFoundError("lock file")  # a clean-up that failed halfway
        ... except FileNotFoundError as err:
        ...     raised_by_interruption(err), raised_by_interruption(FileNotFoundError("lock file"))
        (True, False)
    """
    seen = set()
    current: "BaseException | None" = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class GraphTxError(Exception):
    """Base class for errors caused by input or configuration, not by a bug."""


class InvalidMoleculeError(GraphTxError, ValueError):
    """A molecule could not be parsed, featurized or embedded in 3-D."""


class ConfigError(GraphTxError, ValueError):
    """A configuration is inconsistent (for example ``radius`` truncation without coordinates)."""


class CheckpointError(GraphTxError, RuntimeError):
    """A checkpoint file is missing, corrupt, or does not match what the caller expects."""


class DamagedFileError(GraphTxError, ValueError):
    """A file the library wrote (a sidecar, a store's array, a resumable output) is missing, cut
    short or changed since it was written; the message names it and what to do."""


class NonFiniteError(GraphTxError, FloatingPointError):
    """Training produced a NaN or infinite loss, gradient or weight."""


class OutputError(GraphTxError, OSError):
    """An output file or folder cannot be written (exists, read-only, full disk, a folder...)."""


class PeerFailedError(GraphTxError):
    """Another process of a distributed job stopped on an error, which that process reports."""
