"""Reporting helpers of the benchmarks: environment, text and Markdown tables, CSV files, and
the script's own section of docs/benchmarks.md."""
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
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "dgl": dgl.__version__,
        "rdkit": rdkit.__version__,
        "dgl_graphtx": dgl_graphtx.__version__,
        "torch_threads": str(torch.get_num_threads()),
        "torch_interop_threads": str(torch.get_num_interop_threads()),
        "cpu_count": str(os.cpu_count()),
        "cpu_affinity": str(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else "?",
        "machine": f"{platform.system()} {platform.machine()} {platform.processor() or ''}".strip(),
    }
    if hasattr(os, "getloadavg"):
        info["loadavg_1m"] = f"{os.getloadavg()[0]:.2f}"
    return info


def print_environment(info: Dict[str, str], title: str) -> None:
    print(f"== {title}")
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"  {key:<{width}}  {value}")
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        cpus = int(info.get("cpu_affinity", "0")) if info.get("cpu_affinity", "?").isdigit() else os.cpu_count() or 1
        if load > 0.5 * cpus:
            print(f"  NOTE: 1-minute load average {load:.2f} on {cpus} CPUs: other work is running, timings are noisy")
            if torch.get_num_threads() > 1:
                print(
                    "  NOTE: with busy cores, every multi-threaded torch op can stall in OpenMP barriers\n"
                    "        (milliseconds each, even for tiny tensors); compare with --threads 1"
                )
    print()


def load_note() -> str:
    return f"1-minute load average at the end: {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""


def format_value(value: object) -> str:
    """Numbers shown with about three significant digits; NaN as ``-``."""
    if isinstance(value, float):
        if value != value:  # NaN
            return "-"
        if value != 0 and abs(value) < 0.01:
            return f"{value:.1e}"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def format_table(rows: List[Dict[str, object]], columns: List[Tuple[str, str]]) -> str:
    """Plain-text table; ``columns`` are ``(key, header)``."""
    cells = [[format_value(r.get(key, "")) for key, _ in columns] for r in rows]
    headers = [h for _, h in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    left = [isinstance(rows[0].get(key), str) if rows else True for key, _ in columns]

    def line(values: List[str]) -> str:
        return "  ".join(v.ljust(w) if lft else v.rjust(w) for v, w, lft in zip(values, widths, left))

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(c) for c in cells]
    return "\n".join(out)


def markdown_table(rows: List[Dict[str, object]], columns: List[Tuple[str, str]]) -> str:
    """The same table in Markdown."""
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(format_value(r.get(key, "")) for key, _ in columns) + " |" for r in rows]
    return "\n".join(lines)


def environment_line(env: Dict[str, str]) -> str:
    """One Markdown line naming the versions, threads and load of a run."""
    return (
        f"{env['date'][:10]}; torch {env['torch']}, dgl {env['dgl']}; {env['torch_threads']} torch thread(s) on "
        f"{env['cpu_affinity']} CPU(s); 1-minute load average at start {env.get('loadavg_1m', '?')}."
    )


def default_csv(name: str, quick: bool) -> Path:
    return RESULTS_DIR / (f"{name}-quick.csv" if quick else f"{name}.csv")


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


def publish(name: str, rows: List[Dict[str, object]], columns: List[Tuple[str, str]], env: Dict[str, str],
            csv_path: Path, docs_intro: List[str], update_docs: bool) -> None:
    """End of a benchmark run: the load note, the CSV, and (unless disabled) the docs section
    ``name`` made of ``docs_intro`` lines followed by the table."""
    print(load_note())
    print(f"CSV written to {write_csv(csv_path, rows, env)}")
    if update_docs:
        print(f"updated {update_section(name, chr(10).join(docs_intro + ['', markdown_table(rows, columns)]))}")

