"""Write a benchmark's results into its own section of docs/benchmarks.md."""
from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = "# Benchmarks\n\nEach section is written by the script named in it; rerun the script to refresh it.\n"


def update_section(name: str, markdown: str, path: Path = DOCS) -> Path:
    """Replace (or append) the block between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    text = path.read_text() if path.exists() else HEADER
    block = f"<!-- {name}:start -->\n{markdown.strip()}\n<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
