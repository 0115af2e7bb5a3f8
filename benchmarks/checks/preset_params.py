"""Parameter counts of every preset, ours next to the paper's (and the official code's where
derived), split by component; writes the generated section of docs/presets.md.

Counting builds each model on PyTorch's ``meta`` device (no memory, no training), so the whole
table takes about a second:

    .venv/bin/python -m benchmarks.checks.preset_params            # print and rewrite docs/presets.md
    .venv/bin/python -m benchmarks.checks.preset_params --no-docs  # print only
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Dict

import torch


from dgl_graphtx.cli.presets import format_count  # noqa: E402
from dgl_graphtx.models import ModelConfig, build_model, summarize_presets  # noqa: E402

from benchmarks.common.report import update_section  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "presets.md"


def components(config: ModelConfig) -> Dict[str, int]:
    """Parameters per component: ``inputs`` (atom / bond / random-walk encoders, input MLP, the
    virtual-node embedding), ``tables`` (GRPE's shared encodings), ``layers`` (the transformer or
    GPS blocks) and ``readout`` (final norm and head)."""
    with torch.device("meta"):
        model = build_model(config)
    parts: Counter = Counter()
    for name, prm in model.named_parameters():
        tables, layers, readout = ".structure.encodings." in name, name.startswith("blocks."), name.startswith(("head", "final_norm"))
        parts["tables" if tables else "layers" if layers else "readout" if readout else "inputs"] += prm.numel()
    return dict(parts)


def markdown_table() -> str:
    lines = [
        "| model | preset | dataset | layers / d / heads | ours | inputs | tables | layers | readout | paper | official code "
        "| ours vs paper |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in summarize_presets():
        c, info = row.config, row.info
        parts = components(c)
        assert sum(parts.values()) == row.params
        diff = "" if row.difference is None else f"{row.difference:+.1%}"
        official = "" if info.official_params is None else f"{info.official_params:,}"
        lines.append(
            f"| {row.model} | `{row.preset}` | {info.dataset} | {c.num_layers} / {c.hidden_dim} / {c.num_heads} "
            f"| {row.params:,} | {parts.get('inputs', 0):,} | {parts.get('tables', 0):,} | {parts.get('layers', 0):,} "
            f"| {parts.get('readout', 0):,} | {format_count(info.paper_params) if info.paper_params else 'not reported'} "
            f"| {official} | {diff} |"
        )
    note = (
        "Counted by `benchmarks/checks/preset_params.py` for one regression target on OGB features (built on the "
        "`meta` device). *inputs*: atom, bond and random-walk encoders, input MLP, virtual-node embedding; "
        "*tables*: GRPE's spatial and edge encodings (shared by all layers); *layers*: transformer or GPS "
        "blocks; *readout*: final norm and head. *official code*: the authors' model at that size with the "
        "vocabularies of their script (see below)."
    )
    return "\n".join(lines) + "\n\n" + note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/presets.md alone")
    args = parser.parse_args()
    table = markdown_table()
    print(table)
    if not args.no_docs:
        print(f"\nwrote {update_section('preset-params', table, DOCS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
