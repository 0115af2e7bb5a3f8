"""Reporting of the checks and the suite: the environment, text and Markdown tables, CSV files, a
script's own section of a docs page, and figures."""
from __future__ import annotations

import csv
import datetime
import os
import platform
import re
from pathlib import Path
from typing import Dict, List, Tuple

import rdkit
import torch

import dgl_graphtx  # noqa: F401  (selects DGL's PyTorch backend before dgl is imported)
import dgl

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "benchmarks" / "results"
DOCS = REPO / "docs" / "benchmarks.md"
Columns = List[Tuple[str, str]]


def update_section(name: str, markdown: str, path: Path = DOCS) -> Path:
    """Replace (or append) the block between ``<!-- name:start -->`` and ``<!-- name:end -->`` of ``path``."""
    text = path.read_text()
    block = f"<!-- {name}:start -->\n{markdown.strip()}\n<!-- {name}:end -->"
    pattern = re.compile(rf"<!-- {re.escape(name)}:start -->.*?<!-- {re.escape(name)}:end -->", re.S)
    path.write_text(pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n")
    return path


def save_figure(figure, path: Path, dpi: int = 110) -> Path:
    """Write a matplotlib ``figure`` (tight layout) to ``path``, creating its folder, and close it."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return path


def environment() -> Dict[str, str]:
    """Versions, thread counts and the machine's load, for the report header and the CSV."""
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "python": platform.python_version(),
        "torch": torch.__version__, "dgl": dgl.__version__, "rdkit": rdkit.__version__, "dgl_graphtx": dgl_graphtx.__version__,
        "torch_threads": str(torch.get_num_threads()), "torch_interop_threads": str(torch.get_num_interop_threads()),
        "cpu_count": str(os.cpu_count()),
        "cpu_affinity": str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "?",
        "machine": f"{platform.system()} {platform.machine()} {platform.processor() or ''}".strip(),
    }
    if hasattr(os, "getloadavg"):
        info["loadavg_1m"] = f"{os.getloadavg()[0]:.2f}"
    return info


def print_environment(info: Dict[str, str], title: str) -> None:
    """The environment, and a note when other work loads the machine (timings are then noisy)."""
    print(f"== {title}")
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"  {key:<{width}}  {value}")
    cpus = int(info["cpu_affinity"]) if info["cpu_affinity"].isdigit() else os.cpu_count() or 1
    if float(info.get("loadavg_1m", 0)) > 0.5 * cpus:
        print(f"  NOTE: 1-minute load average {info['loadavg_1m']} on {cpus} CPUs: other work is running, timings are noisy")
        if torch.get_num_threads() > 1:
            print("  NOTE: with busy cores, every multi-threaded torch op can stall in OpenMP barriers; compare with --threads 1")
    print()


def load_note() -> str:
    return f"1-minute load average at the end: {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""


def environment_line(env: Dict[str, str]) -> str:
    """One Markdown line naming the versions, threads and load of a run."""
    return (f"{env['date'][:10]}; torch {env['torch']}, dgl {env['dgl']}; {env['torch_threads']} torch thread(s) on "
            f"{env['cpu_affinity']} CPU(s); 1-minute load average at start {env.get('loadavg_1m', '?')}.")


def format_value(value: object) -> str:
    """Numbers shown with about three significant digits; NaN as ``-``."""
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value != 0 and abs(value) < 0.01:
            return f"{value:.1e}"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(rows: List[Dict[str, object]], columns: Columns) -> str:
    """Plain-text table; ``columns`` are ``(key, header)``."""
    cells = [[format_value(r.get(key, "")) for key, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h) in enumerate(columns)]
    left = [isinstance(rows[0].get(key), str) if rows else True for key, _ in columns]

    def line(values: List[str]) -> str:
        return "  ".join(v.ljust(w) if lft else v.rjust(w) for v, w, lft in zip(values, widths, left))

    return "\n".join([line([h for _, h in columns]), "  ".join("-" * w for w in widths)] + [line(c) for c in cells])


def markdown_table(rows: List[Dict[str, object]], columns: Columns) -> str:
    """The same table in Markdown."""
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(format_value(r.get(key, "")) for key, _ in columns) + " |" for r in rows])


def write_csv(path: Path, rows: List[Dict[str, object]], env: Dict[str, str]) -> Path:
    """Write ``rows`` (plus the environment as extra columns on every row) to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [{**row, **{f"env_{k}": v for k, v in env.items()}} for row in rows]
    fields: List[str] = []
    for record in records:
        fields += [k for k in record if k not in fields]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    return path
