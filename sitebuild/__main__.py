"""python -m sitebuild [--full] [--fresh] [--only NAME ...]: build the course site into site/."""

import argparse
import sys
import time

from sitebuild.build import build


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sitebuild", description=__doc__)
    parser.add_argument("--full", action="store_true", help="execute the demos' full runs (default: quick mode)")
    parser.add_argument("--fresh", action="store_true", help="ignore the cache: execute every demo again")
    parser.add_argument("--teacher", action="store_true",
                        help="also show the figures of the solved demo tasks (they plot the answers): not for students")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="build the pages of these demos only")
    parser.add_argument("--out", default=None, help="where the site goes (default: site/)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    out = build(quick=not args.full, fresh=args.fresh, only=args.only, out=args.out, teacher=args.teacher)
    print(f"wrote the site to {out} in {time.perf_counter() - start:.0f} s: open {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
