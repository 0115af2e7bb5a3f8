"""``dgl-graphtx presets``: the named paper configurations, their parameter counts, and a
preset's whole recipe."""
from __future__ import annotations

import argparse
import dataclasses
from typing import List, Optional

from ..models import VARIANT_NAMES, PresetSummary, get_preset, summarize_presets
from ..models.variants import option_sections


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``presets`` sub-command to ``sub``."""
    presets = sub.add_parser(
        "presets",
        help="list the paper presets (paper, dataset, size, parameters) or show one recipe",
        description="Without arguments: every preset with its paper, dataset, size and parameter count "
        "(ours, and the paper's where it reports one). With MODEL: that model's presets. With MODEL "
        "PRESET: the whole recipe (model, featurizer, relation graphs, training settings, provenance).",
    )
    presets.add_argument("model", nargs="?", default=None, help=", ".join(VARIANT_NAMES))
    presets.add_argument("preset", nargs="?", default=None, help="a preset of MODEL: print its whole recipe")
    presets.set_defaults(func=run)


def format_count(n: Optional[int]) -> str:
    """``126081`` -> ``"126.1k"``, ``46200000`` -> ``"46.20M"``; ``None`` -> ``"-"``.

    Example:
        >>> format_count(126081), format_count(46_200_000), format_count(None)
        ('126.1k', '46.20M', '-')
    """
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1_000_000 else f"{n / 1e3:.1f}k"


def summary_lines(rows: List[PresetSummary]) -> List[str]:
    """One aligned text line per preset, after a header line."""
    table = [("model", "preset", "layers/d/heads", "params", "paper", "diff", "dataset", "paper")]
    for r in rows:
        c = r.config
        diff = "" if r.difference is None else f"{r.difference:+.1%}"
        table.append((r.model, r.preset, f"{c.num_layers}/{c.hidden_dim}/{c.num_heads}", format_count(r.params),
                      format_count(r.info.paper_params), diff, r.info.dataset, r.info.paper))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def recipe_lines(model: str, preset: str) -> List[str]:
    """The whole recipe of one preset as ``key: value`` lines."""
    p = get_preset(model, preset)
    lines = [f"{model} {preset}: {p.info.paper}, {p.info.dataset}", f"source: {p.info.source}"]
    if p.info.notes:
        lines.append(f"notes: {p.info.notes}")
    skip = {"atom_feature_dims", "bond_feature_dims", "bond_radices", "num_tasks", "task"}
    options = set(option_sections()) - {p.model.variant} | ({"gps"} if p.model.model_architecture != "gps" else set())
    for key, value in p.model.to_dict().items():
        if key not in skip and key not in options:
            lines.append(f"model.{key}: {value}")
    lines += [f"train.{k}: {v}" for k, v in p.train.to_dict().items()]
    lines += [f"featurizer.{k}: {v}" for k, v in p.featurizer.to_dict().items()]
    lines += [f"relation.{f.name}: {getattr(p.relation, f.name)}" for f in dataclasses.fields(p.relation)]
    return lines


def run(args: argparse.Namespace) -> int:
    """Print the table, or one preset's recipe."""
    if args.preset is not None:
        print("\n".join(recipe_lines(args.model, args.preset)))
        return 0
    print("\n".join(summary_lines(summarize_presets(args.model))))
    print("\nparams: one regression target on OGB features; paper: the count the paper reports; "
          "see docs/presets.md for every difference. Details: dgl-graphtx presets MODEL PRESET")
    return 0
