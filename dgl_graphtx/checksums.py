"""Content digests of files: what checkpoints, backbones, stores and streamed outputs record to
tell their inputs apart and to catch damaged files, and the record a folder the library writes
keeps of its files (:data:`RECORD`, in the format of ``sha256sum``)."""
from __future__ import annotations

import hashlib
import os
import re
from typing import Dict, List, Set, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]
#: The record of a folder the library writes (a run, an ensemble, a cross-validation, a store):
#: one ``<SHA-256>  <file name>`` line per file written there, as ``sha256sum`` writes them, so
#: ``sha256sum -c SHA256SUMS`` checks the folder too. A name listed twice (a file being replaced)
#: accepts either digest.
RECORD = "SHA256SUMS"
_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


def file_sha256(path: PathLike) -> str:
    """The SHA-256 hex digest of the file at ``path``, read 1 MiB at a time.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
        >>> _ = p.write_bytes(b"abc")
        >>> file_sha256(p)[:16]
        'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def parse_record(text: str) -> Tuple[Dict[str, Set[str]], List[int]]:
    """The digests a :data:`RECORD` lists per file name, and the numbers (1-based) of the lines
    that are not ``<64 hex digits>  <name>``.

    Example:
        >>> entries, bad = parse_record("a" * 64 + "  best.pt\\nnot a line\\n")
        >>> sorted(entries), bad
        (['best.pt'], [2])
    """
    entries: Dict[str, Set[str]] = {}
    bad = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        found = _LINE.fullmatch(line)
        if found is None:
            bad.append(number)
            continue
        entries.setdefault(found.group(2), set()).add(found.group(1))
    return entries, bad


def format_record(entries: Dict[str, Set[str]]) -> str:
    """The text of a :data:`RECORD` listing ``entries`` (names in order).

    Example:
        >>> format_record({"b.json": {"b" * 64}}) == "b" * 64 + "  b.json\\n"
        True
    """
    return "".join(f"{digest}  {name}\n" for name in sorted(entries) for digest in sorted(entries[name]))
