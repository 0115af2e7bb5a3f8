"""What ``--checkpoint`` may name, resolved the same way by every command and by :class:`~dgl_graphtx.inference.Predictor`:
a checkpoint file, a run folder (its ``best.pt``) or an ensemble folder (every ``best.pt`` below it)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Sequence, Union

from ..errors import CheckpointError

PathLike = Union[str, Path]
#: The checkpoint a run keeps (the best validation epoch).
BEST = "best.pt"


def checkpoints_in(path: PathLike) -> List[Path]:
    """``path`` itself if it is a file; a run folder's ``best.pt``; else every ``best.pt`` below
    the folder (an ensemble's members, sorted).

    Example:
        >>> checkpoints_in("no/such/folder")
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: checkpoint not found: no/such/folder (give a best.pt, a run folder or an ensemble folder)
    """
    path = Path(path)
    if path.is_file():
        return [path]
    if (path / BEST).is_file():
        return [path / BEST]
    found = sorted(path.rglob(BEST)) if path.is_dir() else []
    if not found:
        last = " (it holds last.pt only: the run has not finished an epoch with a validation score)" if (path / "last.pt").is_file() else ""
        raise CheckpointError(f"checkpoint not found: {path} (give a {BEST}, a run folder or an ensemble folder){last}")
    return found


def resolve_checkpoints(given: Union[PathLike, Sequence[PathLike]]) -> List[Path]:
    """Every checkpoint named by one or several ``--checkpoint`` values (see :func:`checkpoints_in`).

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp()); _ = (run / "best.pt").write_bytes(b"")
        >>> resolve_checkpoints([run]) == [run / "best.pt"]
        True
    """
    items = [given] if isinstance(given, (str, Path)) else list(given)
    return [path for item in items for path in checkpoints_in(item)]


def single_checkpoint(given: Union[PathLike, Sequence[PathLike]], use: str = "this") -> Path:
    """The one checkpoint ``given`` names; an ensemble (several) is an error naming ``use``.

    Example:
        >>> import tempfile
        >>> ens = Path(tempfile.mkdtemp())
        >>> for m in ("member_0", "member_1"):
        ...     (ens / m).mkdir(); _ = (ens / m / "best.pt").write_bytes(b"")
        >>> single_checkpoint(ens, "plot attention")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dgl_graphtx.errors.CheckpointError: ... holds 2 checkpoints (an ensemble); plot attention reads one model: give one of them, e.g. .../member_0/best.pt
    """
    paths = resolve_checkpoints(given)
    if len(paths) > 1:
        where = given if isinstance(given, (str, Path)) else ", ".join(str(g) for g in given)
        raise CheckpointError(f"{where} holds {len(paths)} checkpoints (an ensemble); {use} reads one model: "
                              f"give one of them, e.g. {paths[0]}")
    return paths[0]
