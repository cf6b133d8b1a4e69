"""python -m demos [--quick] [NAME ...]: run the demos, then print a summary table."""

import argparse
import os
import importlib
import sys
import time

from tqdm import tqdm

from . import DEMOS


def run(name, quick):
    module = importlib.import_module(f"demos.{name}")
    start = time.perf_counter()
    outcome = module.main(quick=quick)
    return outcome, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m demos", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"demos to run (default: all): {', '.join(DEMOS)}")
    parser.add_argument("--quick", action="store_true", help="shrink training (for tests)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DEMOS]
    if unknown:
        parser.error(f"unknown demo(s) {', '.join(unknown)}; known: {', '.join(DEMOS)}")
    names = args.names or DEMOS
    if args.quick:  # quick figures go beside the committed full-run ones, not over them
        from . import _common

        _common.FIGURES = _common.FIGURES / "quick"
    rows = []
    for name in tqdm(names, desc="demos", unit="demo", file=sys.stderr):
        print(f"\n=== {name} ===", flush=True)
        outcome, seconds = run(name, args.quick)
        checks = outcome["checks"]
        rows.append((name, sum(checks.values()), len(checks), seconds, outcome["figure"]))
    print("\n" + f"{'demo':24}{'checks':>10}{'seconds':>10}  figure")
    for name, passed, total, seconds, figure in rows:
        print(f"{name:24}{passed:>6}/{total:<3}{seconds:>10.1f}  {os.path.relpath(figure)}")
    failed = [row[0] for row in rows if row[1] != row[2]]
    if failed:
        print(f"\nchecks failed in: {', '.join(failed)}")
        return 1
    print(f"\nall {sum(r[2] for r in rows)} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
