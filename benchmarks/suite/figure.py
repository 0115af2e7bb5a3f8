"""The suite's figure: each tool's relative improvement over chemprop's default per (set, seed),
one panel per half (docs/img/suite.png)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.common.report import save_figure  # noqa: E402

from .config import HALVES, SETS_BY_NAME, TOOL_ORDER  # noqa: E402
from .metrics import relative_improvement  # noqa: E402

REFERENCE = "chemprop"


def improvements(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows (half, set, seed, tool, improvement over :data:`REFERENCE` on the same split)."""
    pivot = frame.pivot_table(index=["half", "set", "seed"], columns="tool", values="value")
    metric = frame.groupby("set")["metric"].first()
    rows = []
    for (half, name, seed), values in pivot.iterrows():
        for tool, value in values.dropna().items():
            if tool != REFERENCE and pd.notna(values.get(REFERENCE)):
                rows.append({"half": half, "set": name, "seed": seed, "tool": tool,
                             "improvement": relative_improvement(metric[name], value, values[REFERENCE])})
    return pd.DataFrame(rows, columns=["half", "set", "seed", "tool", "improvement"])


def draw(frame: pd.DataFrame, path: Path) -> Path:
    """One panel per half with results: tools across, a dot per (set, seed), coloured by set."""
    table = improvements(frame)
    halves = [h for h in HALVES if h in set(table.half)]
    figure, axes = plt.subplots(1, max(len(halves), 1), figsize=(6.5 * max(len(halves), 1), 4.2), squeeze=False)
    for axis, half in zip(axes[0], halves):
        part = table[table.half == half]
        tools = [t for t in TOOL_ORDER if t in set(part.tool)]
        present = set(part.set)
        names = [s for s in SETS_BY_NAME if s in present] + sorted(present - set(SETS_BY_NAME))
        for offset, name in enumerate(names):
            dots = part[part.set == name]
            x = [tools.index(t) + 0.08 * (offset - 2) for t in dots.tool]
            axis.scatter(x, 100 * dots.improvement, s=14, label=name)
        axis.axhline(0, color="grey", linewidth=0.8)
        axis.set_xticks(range(len(tools)), tools, rotation=35, ha="right", fontsize=8)
        axis.set_ylabel(f"improvement over {REFERENCE} (% of its error)")
        axis.set_title(HALVES[half], fontsize=10)
        axis.legend(fontsize=7)
    return save_figure(figure, path)
