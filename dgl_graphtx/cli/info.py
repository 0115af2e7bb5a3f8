"""``dgl-graphtx info``: library versions and CUDA availability."""
from __future__ import annotations

import argparse

from ..env_info import environment_report


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``info`` sub-command to ``sub``."""
    sub.add_parser("info", help="versions and CUDA availability").set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print one ``name value`` line per library."""
    for key, value in environment_report().items():
        print(f"{key:14s} {value}")
    return 0
