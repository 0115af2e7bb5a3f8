"""The transfer benchmark suite (issue 28): every tool on the same split files of public sets,
split into a development half (recipes may be chosen on it) and a test half (run only to report).

Sets, tools, halves and the reasons are in ``benchmarks/_suite/config.py``; results (one JSON and
one predictions CSV per run, split-file digests) in ``benchmarks/suite_results/``. Each
(set, seed, tool) run is cached by a key over its settings and split files, so rerunning the same
command resumes where it stopped. chemprop runs from its own virtualenv ``.venv-bench``.

Run:  nohup nice -n 5 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/suite.py --half dev > .cache/suite/dev.log 2>&1 &
      .venv/bin/python benchmarks/suite.py --report            (tables into docs/benchmarks.md)
      .venv/bin/python benchmarks/suite.py --quick             (2 tiny sets, 1 seed, 2 epochs: ~1 min)
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _suite.config import CACHE, RESULTS, SEEDS, SETS, SETS_BY_NAME, TOOLS, TOOLS_BY_NAME, Quick  # noqa: E402
from _suite.runner import Store, plan, quick_sets, run_all  # noqa: E402


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", choices=("dev", "test", "all"), default="dev",
                        help="which sets: dev (recipes may be chosen on it), test (report only), all (default: dev)")
    parser.add_argument("--sets", nargs="+", choices=list(SETS_BY_NAME), help="these sets only (within --half)")
    parser.add_argument("--tools", nargs="+", choices=list(TOOLS_BY_NAME), help="these tools only (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="split and training seeds (default: 0 1 2)")
    parser.add_argument("--epochs", type=int, help="every set's epochs replaced by this (timing runs; results go to their own folder)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 tiny sets, 1 seed, 2 epochs, our default and RF")
    parser.add_argument("--commit", action="store_true", help="commit each finished run's result files to the current branch")
    parser.add_argument("--prepare", action="store_true", help="write the split files and record their digests; run nothing")
    parser.add_argument("--report", action="store_true", help="write the report from the stored results (runs nothing)")
    parser.add_argument("--no-docs", action="store_true", help="with --report: print only, leave docs/benchmarks.md alone")
    parser.add_argument("--results", type=Path, help=f"results folder (default: {RESULTS}; with --quick {CACHE / 'quick'})")
    parser.add_argument("--cache", type=Path, help=f"split files and working folders (default: {CACHE})")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.epochs and not args.results:
        raise SystemExit("--epochs needs --results: runs with other epochs do not belong among the suite's results")
    results = args.results or (CACHE / "quick" if args.quick else RESULTS)
    cache = args.cache or (CACHE / "quick" if args.quick else CACHE)
    if args.report:
        from _suite.report import write_report

        return write_report(results, docs=not (args.no_docs or args.quick))
    if args.quick:
        quick = Quick()
        sets = quick_sets([SETS_BY_NAME[name] for name in quick.sets], quick.size, quick.epochs)
        seeds, tools = list(quick.seeds), [TOOLS_BY_NAME[name] for name in quick.tools]
    else:
        sets = [s for s in SETS if args.half in ("all", s.half) and (not args.sets or s.name in args.sets)]
        sets = [dataclasses.replace(s, epochs=args.epochs) for s in sets] if args.epochs else sets
        seeds, tools = args.seeds, [t for t in TOOLS if not args.tools or t.name in args.tools]
    if not sets:
        raise SystemExit(f"no set of half {args.half!r} among {args.sets}")
    store = Store(results, cache)
    runs = plan(store, sets, seeds, tools)
    if not runs:
        raise SystemExit(f"nothing to run: {', '.join(t.name for t in tools)} run on none of {', '.join(s.name for s in sets)} "
                         "(3-D tools need a 3-D set; screened recipes run on the development half only)")
    if args.prepare:
        print(f"split files of {len(sets)} set(s) x {len(seeds)} seed(s) written under {cache / 'splits'}; "
              f"digests in {results / 'splits.json'}; {len(runs)} runs planned")
        return 0
    on_result = None
    if args.commit:
        from _suite.commits import commit_files as on_result
    failed = run_all(store, runs, on_result)
    print(f"{failed} run(s) failed" if failed else "all runs finished", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
