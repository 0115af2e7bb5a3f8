"""The documentation stays true to the code: every relative link in the README and docs/ reaches a
file (and its heading, for ``#anchor`` links), every ``dgl-graphtx`` command in their shell blocks
is accepted by the command's parser, and every ``python -m benchmarks...`` names a module that exists."""
from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

from dgl_graphtx.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "benchmarks").rglob("README.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SHELL = ("bash", "sh", "console", "")


def blocks(page: Path) -> Tuple[str, List[str]]:
    """The page's prose (code blocks left out) and its shell code blocks (bash, sh, or no language)."""
    prose, shell, current, language = [], [], None, ""
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            if current is None:
                current, language = [], line.strip()[3:].strip()
            else:
                if language in SHELL:
                    shell.append("\n".join(current))
                current = None
        elif current is None:
            prose.append(line)
        else:
            current.append(line)
    return "\n".join(prose), shell


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading.

    Example:
        >>> anchor("## GPU speed (`benchmarks/checks/training_steps.py`)")
        'gpu-speed-benchmarkscheckstraining_stepspy'
    """
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set:
    text = blocks(page)[0]
    return {anchor(line) for line in text.splitlines() if line.startswith("#")}


def _links() -> Iterator[Tuple[Path, str]]:
    for page in PAGES:
        for target in LINK.findall(blocks(page)[0]):
            if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                yield page, target


@pytest.mark.parametrize("page,target", list(_links()), ids=lambda v: v if isinstance(v, str) else v.name)
def test_relative_links_reach_their_file_and_heading(page, target):
    path, _, fragment = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), f"{page.relative_to(REPO)}: {target} does not exist"
    if fragment and file.suffix == ".md":
        assert fragment in _anchors(file), f"{page.relative_to(REPO)}: no heading #{fragment} in {file.relative_to(REPO)}"


def _commands(prefix: str) -> Iterator[Tuple[str, List[str]]]:
    """Shell lines of the pages' code blocks that start with ``prefix`` (continuations joined, comments cut)."""
    for page in PAGES:
        for block in blocks(page)[1]:
            for line in block.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True) if line.strip() else []
                while words and ("=" in words[0] or words[0] in ("nohup", "nice", "-n", "5", "env")):
                    words = words[1:]  # environment settings and wrappers before the command
                if words and words[0].endswith(prefix):
                    yield f"{page.relative_to(REPO)}: {line.strip()}", words[1:]


#: Commands written as templates (``a|b`` alternatives, ``[...]`` optional parts, ``...``) are not parsed.
CLI_COMMANDS = [(where, words) for where, words in _commands("dgl-graphtx")
                if words and not any(w == "..." or "|" in w or w.startswith("[") for w in words)]


@pytest.mark.parametrize("where,words", CLI_COMMANDS, ids=[w for w, _ in CLI_COMMANDS])
def test_documented_commands_parse(where, words, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # commands written for a GPU machine parse here too
    words = [w for w in words if w not in (">", "2>&1", "&") and not w.startswith(">")]
    try:
        build_parser().parse_args(words)
    except SystemExit as exit:
        if exit.code:  # --help exits 0
            pytest.fail(f"{where}: rejected by the parser")


def test_documented_benchmark_modules_exist():
    sys.path.insert(0, str(REPO))
    try:
        modules = {words[1] for _, words in _commands("python") if words[:1] == ["-m"] and words[1].startswith("benchmarks")}
        assert modules, "no `python -m benchmarks...` command found in the pages"
        missing = [name for name in sorted(modules) if importlib.util.find_spec(name) is None]
        assert not missing, missing
    finally:
        sys.path.remove(str(REPO))
