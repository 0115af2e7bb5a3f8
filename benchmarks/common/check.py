"""What every check does: its common options (``--quick``, ``--csv``, ``--threads``, ``--no-docs``,
and where molecules come from), its start (threads, a quiet library log, the environment printed)
and its end (the table printed, the CSV written, its section of the docs rewritten)."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from benchmarks.common import report as R
from benchmarks.common.molecules import MOSES_DIR


def parser(doc: str, threads: Optional[int] = None) -> argparse.ArgumentParser:
    """A check's parser: ``doc`` (its module docstring) as help, and the options every check has."""
    found = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    found.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repeats; the docs are left alone")
    found.add_argument("--csv", type=Path, help="CSV of the rows (default: benchmarks/results/<check>[-quick].csv)")
    found.add_argument("--threads", type=int, default=threads, help="torch threads (default: %(default)s; None: torch's choice)")
    found.add_argument("--no-docs", action="store_true", help="leave the docs alone")
    return found


def molecule_options(found: argparse.ArgumentParser) -> None:
    """``--smiles FILE`` and ``--moses-dir``: where drug-sized molecules come from."""
    found.add_argument("--smiles", type=Path, help="SMILES file (first column) instead of MOSES")
    found.add_argument("--moses-dir", type=Path, default=MOSES_DIR, help="folder of the molsets wheel (MOSES SMILES)")


def start(args: argparse.Namespace, title: str) -> Dict[str, str]:
    """Set the threads, quiet the library's log and print the environment, which is returned."""
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("dgl_graphtx").setLevel(logging.WARNING)
    env = R.environment()
    R.print_environment(env, title)
    return env


def writes_docs(args: argparse.Namespace) -> bool:
    return not (args.quick or args.no_docs)


def finish(name: str, args: argparse.Namespace, env: Dict[str, str], rows: List[Dict[str, object]], columns: R.Columns,
           docs: Sequence[str] = (), section: Optional[str] = None, path: Path = R.DOCS) -> None:
    """Print the table and the load, write the CSV (``--csv``, else ``benchmarks/results/<name>.csv``)
    and, with ``docs`` lines and unless ``--quick`` or ``--no-docs``, rewrite the docs section
    ``section`` (default ``name``) of ``path`` as those lines followed by the table."""
    print("\n" + R.format_table(rows, columns) + "\n" + R.load_note())
    print(f"CSV written to {R.write_csv(args.csv or R.RESULTS_DIR / (name + ('-quick' if args.quick else '') + '.csv'), rows, env)}")
    if docs and writes_docs(args):
        print(f"updated {R.update_section(section or name, chr(10).join([*docs, '', R.markdown_table(rows, columns)]), path)}")
