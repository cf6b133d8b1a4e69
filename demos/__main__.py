"""python -m demos [--quick] [NAME ...]: run the demos, each as a script in its own process
(as `python demos/NAME.py` would), then print a summary table of the checks they printed and the
total time. Figures go to out/figures/ (quick: out/quick/); the committed ones in demos/figures/
are the reference, and a run agrees with it when every check the chapters state holds again."""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from tqdm import tqdm

from demos import DEMOS
from demos._record import read_record

FOLDER = pathlib.Path(__file__).resolve().parent
REFERENCE = FOLDER / "figures"


def run(name, quick):
    """Run demos/NAME.py in a fresh process; return (checks, figure, seconds, exit status)."""
    with tempfile.TemporaryDirectory() as scratch:
        record = pathlib.Path(scratch) / "record.jsonl"
        env = dict(os.environ, MINITENSOR_QUICK="1" if quick else "0", MINITENSOR_DEMO_RECORD=str(record))
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(FOLDER.parent), env.get("PYTHONPATH", "")] if p)
        start = time.perf_counter()
        status = subprocess.run([sys.executable, str(FOLDER / f"{name}.py")], env=env).returncode
        seconds = time.perf_counter() - start
        checks, figure = read_record(record)
    return checks, figure, seconds, status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m demos", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"demos to run (default: all): {', '.join(DEMOS)}")
    parser.add_argument("--quick", action="store_true", help="shrink training (for tests); same as MINITENSOR_QUICK=1")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DEMOS]
    if unknown:
        parser.error(f"unknown demo(s) {', '.join(unknown)}; known: {', '.join(DEMOS)}")
    names = args.names or DEMOS
    started = time.perf_counter()
    rows = []
    for name in tqdm(names, desc="demos", unit="demo", file=sys.stderr):
        print(f"\n=== {name} ===", flush=True)
        checks, figure, seconds, status = run(name, args.quick)
        rows.append((name, sum(checks.values()), len(checks), seconds, figure, status))
    print("\n" + f"{'demo':24}{'checks':>10}{'seconds':>10}  figure")
    for name, passed, total, seconds, figure, status in rows:
        shown = os.path.relpath(figure) if figure else f"(stopped with an error, exit status {status})"
        print(f"{name:24}{passed:>6}/{total:<3}{seconds:>10.1f}  {shown}")
    minutes, seconds = divmod(round(time.perf_counter() - started), 60)
    print(f"\ntotal time: {minutes} min {seconds:02d} s for {len(rows)} demo{'s' * (len(rows) != 1)}"
          f"{' (quick)' if args.quick else ''}")
    failed = [row[0] for row in rows if row[1] != row[2] or row[5] or not row[2]]
    if failed:
        print(f"checks failed in: {', '.join(failed)}: this run does not agree with the reference figures "
              f"in {os.path.relpath(REFERENCE)}/ there")
        return 1
    if args.quick:
        print(f"all {sum(r[2] for r in rows)} checks passed (a quick run: its training is too short to hold the "
              f"chapters' numbers, which only a full run checks)")
    else:
        print(f"all {sum(r[2] for r in rows)} checks passed: this run agrees with the chapters and with the reference "
              f"figures in {os.path.relpath(REFERENCE)}/ on every check they state (training curves and timings "
              f"differ from run to run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
