"""The transfer benchmark suite: every tool on the same split files of public sets, each set in a
development half (recipes may be chosen on it) or a test half (run only to report).

Sets, tools, halves and the reasons are in ``benchmarks/suite/config.py``; finished runs are rows of
the ledger ``benchmarks/suite/results/runs.csv``, a worktree of the ``suite-results`` branch (results
stay out of main's history), checked against the split-file digests ``benchmarks/suite/splits.json``.
Each (set, seed, tool) run has a key over its settings and split files, so rerunning the same command
resumes where it stopped. chemprop runs from its own virtualenv ``.venv-bench``. Nothing here
commits: the ledger is committed by hand on its branch.

Run (from the repository root):
      git worktree add benchmarks/suite/results suite-results   (once: the ledger)
      nohup nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks.suite --half dev > .cache/suite/dev.log 2>&1 &
      .venv/bin/python -m benchmarks.suite --family moleculeace --half dev --seeds 42   (the MoleculeACE screen)
      .venv/bin/python -m benchmarks.suite --seed-check      (issue 40's goal pairs on the 2-D test sets at 10 seeds)
      .venv/bin/python -m benchmarks.suite --report          (tables into docs/benchmarks.md and the README)
      .venv/bin/python -m benchmarks.suite --quick           (2 tiny sets, 1 seed, 2 epochs: ~1 min)
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import List, Optional

from .config import (CACHE, DIGESTS, FAMILIES, RESULTS, RESULTS_BRANCH, SEED_CHECK_SEEDS, SEED_CHECK_SETS, SEED_CHECK_TOOLS, SETS,
                     SETS_BY_NAME, TOOLS, TOOLS_BY_NAME, Quick)
from .runner import Store, plan, quick_sets, run_all


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", choices=("dev", "test", "all"), default="dev",
                        help="which sets: dev (recipes may be chosen on it), test (report only), all (default: dev)")
    parser.add_argument("--family", choices=FAMILIES, help="these sets only: the suite's own, or MoleculeACE's 30 (default: both)")
    parser.add_argument("--sets", nargs="+", choices=list(SETS_BY_NAME), help="these sets only (within --half)")
    parser.add_argument("--tools", nargs="+", choices=list(TOOLS_BY_NAME),
                        help="these tools only (default: every tool that runs on a set, or the set's default tools)")
    parser.add_argument("--seeds", nargs="+", type=int, help="split and training seeds (default: each set's own, 0 1 2 or 42 117 709)")
    parser.add_argument("--epochs", type=int, help="every set's epochs replaced by this (timing runs; results go to their own folder)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 tiny sets, 1 seed, 2 epochs, our default and RF")
    parser.add_argument("--seed-check", action="store_true",
                        help=f"issue 40's goal at {len(SEED_CHECK_SEEDS)} seeds: {', '.join(SEED_CHECK_TOOLS)} on "
                             f"{', '.join(SEED_CHECK_SETS)} (test half, report only) at seeds {SEED_CHECK_SEEDS[0]}-{SEED_CHECK_SEEDS[-1]}")
    parser.add_argument("--prepare", action="store_true", help="write the split files and record their digests; run nothing")
    parser.add_argument("--report", action="store_true", help="write the report from the ledger (runs nothing)")
    parser.add_argument("--no-docs", action="store_true", help="with --report: print only, leave docs/ and the README alone")
    parser.add_argument("--readme-only", action="store_true",
                        help="with --report: write the README's test table only, leave docs/benchmarks.md alone (while the "
                             "tools it shows rerun into a new ledger)")
    parser.add_argument("--results", type=Path, help=f"ledger and digests folder (default: the ledger in {RESULTS}, a worktree of the "
                                                       f"{RESULTS_BRANCH} branch, and main's digests; with --quick {CACHE / 'quick'})")
    parser.add_argument("--cache", type=Path, help=f"split files, predictions and working folders (default: {CACHE})")
    return parser.parse_args(argv)


def _selected(args: argparse.Namespace) -> tuple:
    """The sets, seeds (None: each set's own) and tools the arguments ask for."""
    if args.quick:
        quick = Quick()
        return (quick_sets([SETS_BY_NAME[name] for name in quick.sets], quick.size, quick.epochs), list(quick.seeds),
                [TOOLS_BY_NAME[name] for name in quick.tools])
    if args.seed_check:
        return ([SETS_BY_NAME[name] for name in SEED_CHECK_SETS], list(SEED_CHECK_SEEDS),
                [TOOLS_BY_NAME[name] for name in SEED_CHECK_TOOLS])
    sets = [s for s in SETS if args.half in ("all", s.half) and (not args.sets or s.name in args.sets)
            and (args.family is None or s.family == args.family)]
    sets = [dataclasses.replace(s, epochs=args.epochs) for s in sets] if args.epochs else sets
    return sets, args.seeds, [t for t in TOOLS if not args.tools or t.name in args.tools]


def store_for(args: argparse.Namespace) -> Store:
    """The ledger and digests the arguments name; the suite's own ledger must be checked out first."""
    if args.epochs and not args.results:
        raise SystemExit("--epochs needs --results: runs with other epochs do not belong among the suite's results")
    cache = args.cache or (CACHE / "quick" if args.quick else CACHE)
    if args.results or args.quick:
        return Store(args.results or CACHE / "quick", cache)
    if not RESULTS.is_dir():
        raise SystemExit(f"the ledger's folder {RESULTS} is missing: check out its branch with `git worktree add {RESULTS} "
                         f"{RESULTS_BRANCH}` (after `git fetch origin {RESULTS_BRANCH}`), or pass --results DIR")
    return Store(RESULTS, cache, DIGESTS)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    store = store_for(args)
    if args.report:
        from .report import write_report

        return write_report(store, docs=not (args.no_docs or args.quick), readme_only=args.readme_only)
    sets, seeds, tools = _selected(args)
    if not sets:
        raise SystemExit(f"no set of half {args.half!r} among {args.sets or args.family}")
    runs = plan(store, sets, seeds, tools, named_tools=bool(args.tools or args.quick or args.seed_check))
    if not runs:
        raise SystemExit(f"nothing to run: {', '.join(t.name for t in tools)} run on none of {', '.join(s.name for s in sets)} "
                         "(3-D tools need a 3-D set; screened recipes run on the development half only)")
    if args.prepare:
        print(f"split files of {len(sets)} set(s) written under {store.cache / 'splits'}; digests in {store.digests}; "
              f"{len(runs)} runs planned")
        return 0
    failed = run_all(store, runs)
    print(f"{failed} run(s) failed" if failed else "all runs finished", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
