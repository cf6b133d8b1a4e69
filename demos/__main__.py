"""python -m demos [--quick] [--jobs N] [NAME ...]: run the demos, each as a script in its own
process (as `python demos/NAME.py` would), then print a summary table of the checks they printed
and the total time. Figures go to out/figures/ (quick: out/quick/); the committed ones in
demos/figures/ are the reference, and a run agrees with it when every check the chapters state
holds again.

Two demos run at a time on a machine with two cores or more (--jobs 1: one at a time, its
output as it prints), the costliest first (COST below): the adding problem starts first, the
others run beside it, and the short ones come last, to fill whichever side frees up, so that
neither side waits idle at the end. A running demo's output is printed when it ends, whole. The demos that time something
(attention_cost, efficient_attention, kv_cache) check ratios and counts, which a neighbour does
not move (attention_cost times its products in CPU time)."""

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from tqdm import tqdm

from demos import DEMOS
from demos._record import read_record, read_skipped

FOLDER = pathlib.Path(__file__).resolve().parent
REFERENCE = FOLDER / "figures"
# What each full run costs, in CPU seconds (a run on this project's two-core machine, the Numba
# kernels already compiled, rounded): only the order matters. Side by side, the costliest start
# first and the short ones fill in at the end (longest processing time first); a demo missing
# here counts as short.
COST = {
    "adding_problem": 250, "instabilities": 60, "efficient_attention": 60, "alignment": 55, "model_size": 6,
    "pre_vs_post_norm": 5, "vit_patches": 5, "scaling": 4, "multihead": 4, "attention_cost": 4, "kv_cache": 4,
    "causal_self_attention": 3, "positional": 2, "soft_lookup": 2, "stacking": 2,
}


def start(name, quick, capture):
    """Start demos/NAME.py in a fresh process; returns (process, record file, output file, start
    time, scratch folder). With capture, its output goes to a file, printed when it ends."""
    scratch = tempfile.TemporaryDirectory()
    record = pathlib.Path(scratch.name) / "record.jsonl"
    output = open(pathlib.Path(scratch.name) / "output.txt", "w+") if capture else None
    env = dict(os.environ, MINITENSOR_QUICK="1" if quick else "0", MINITENSOR_DEMO_RECORD=str(record))
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(FOLDER.parent), env.get("PYTHONPATH", "")] if p)
    process = subprocess.Popen([sys.executable, str(FOLDER / f"{name}.py")], env=env, stdout=output,
                               stderr=subprocess.STDOUT if capture else None)
    return process, record, output, time.perf_counter(), scratch


def reap(process, block=True):
    """(exit status, CPU seconds) of a started demo once it has ended (block: wait for it), else
    None. The CPU seconds are the user and system time of the demo's process and of every process
    it started and waited for (os.wait4's account; efficient_attention measures in fresh
    processes). Beside the wall-clock seconds they show how much of the run the demo computed and
    how much it waited for a core that other programs held. Without os.wait4 (Windows): nan."""
    if not hasattr(os, "wait4"):
        status = process.wait() if block else process.poll()
        return None if status is None else (status, float("nan"))
    pid, wait_status, usage = os.wait4(process.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    process.returncode = os.waitstatus_to_exitcode(wait_status)
    return process.returncode, usage.ru_utime + usage.ru_stime


def finish(name, running, ended=None):
    """Wait for a started demo (ended: what reap returned, when it has already ended); print its
    captured output; return (checks, figure, seconds, CPU seconds, exit status, skipped checks)."""
    process, record, output, started, scratch = running
    status, cpu = ended or reap(process)
    seconds = time.perf_counter() - started
    if output is not None:
        output.seek(0)
        print(f"\n=== {name} ===\n{output.read().rstrip()}", flush=True)
        output.close()
    checks, figure = read_record(record)
    skipped = read_skipped(record)
    scratch.cleanup()
    return checks, figure, seconds, cpu, status, skipped


def run(name, quick):
    """Run demos/NAME.py in a fresh process, its output as it prints; return what finish returns."""
    print(f"\n=== {name} ===", flush=True)
    return finish(name, start(name, quick, capture=False))


def run_all(names, quick, jobs, progress):
    """{name: what finish returns}, up to `jobs` demos at a time, costliest first."""
    if jobs <= 1:
        results = {}
        for name in names:
            results[name] = run(name, quick)
            progress.update()
        return results
    queue = sorted(names, key=lambda name: -COST.get(name, 0))  # the costly ones first, the short ones last
    running, results = {}, {}
    while queue or running:
        while queue and len(running) < jobs:
            name = queue.pop(0)
            running[name] = start(name, quick, capture=True)
        ended = {name: reap(entry[0], block=False) for name, entry in running.items()}
        done = [name for name, status_and_cpu in ended.items() if status_and_cpu is not None]
        for name in done:
            results[name] = finish(name, running.pop(name), ended[name])
            progress.update()
        if not done:
            time.sleep(0.2)
    return results


def duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds:02d} s"


def cpu_summary(rows, jobs, wall_seconds):
    """The line after the total time: the demos' CPU time, the time they would take on `jobs` cores
    of their own (the larger of CPU time / jobs and the costliest demo's), and the machine's load;
    where the run took longer than that, it says the rest was spent waiting for cores, so that a
    run slowed by other programs says so."""
    total, costliest = sum(row[6] for row in rows), max(rows, key=lambda row: row[6])
    if total != total:  # nan: no CPU times (no os.wait4)
        return "CPU time: not measured on this system"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"
    estimate = max(total / jobs, costliest[6])
    line = (f"CPU time: {duration(total)} in all, {duration(costliest[6])} the costliest ({costliest[0]}); on "
            f"{jobs} core{'s' * (jobs != 1)} of their own about {duration(estimate)}")
    waited = wall_seconds - estimate
    if waited >= max(5.0, 0.1 * estimate):  # more than start-up and rounding: other programs held the cores
        return line + f", so about {duration(waited)} of the run went to waiting for cores (load average now: {load})"
    return line + f" (load average now: {load})"


class _Lines:
    """The progress as one line per finished demo, for a log or a pipe (tqdm redraws its bar with
    carriage returns, which a pipe keeps: the last bar came out twice)."""

    def __init__(self, total):
        self.total, self.done = total, 0

    def update(self):
        self.done += 1
        print(f"demos: {self.done}/{self.total} done", file=sys.stderr, flush=True)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        return False


def progress_bar(total):
    """tqdm's bar on a terminal; elsewhere a line per finished demo."""
    if sys.stderr.isatty():
        return tqdm(total=total, desc="demos", unit="demo", file=sys.stderr)
    return _Lines(total)


def jobs_count(text):
    jobs = int(text)
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"at least 1 demo at a time, got {jobs}")
    return jobs


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m demos", description=__doc__)
    parser.add_argument("names", nargs="*", help=f"demos to run (default: all): {', '.join(DEMOS)}")
    parser.add_argument("--quick", action="store_true", help="shrink training (for tests); same as MINITENSOR_QUICK=1")
    parser.add_argument("--jobs", type=jobs_count, default=min(2, os.cpu_count() or 1),
                        help="demos run at a time (default: 2, or 1 on one core); 1 shows each demo's output as it prints")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in DEMOS]
    if unknown:
        parser.error(f"unknown demo(s) {', '.join(unknown)}; known: {', '.join(DEMOS)}")
    names = args.names or DEMOS
    started = time.perf_counter()
    with progress_bar(len(names)) as progress:
        results = run_all(names, args.quick, args.jobs if len(names) > 1 else 1, progress)
    rows, skipped = [], {}
    for name in names:
        checks, figure, seconds, cpu, status, skips = results[name]
        rows.append((name, sum(checks.values()), len(checks), seconds, figure, status, cpu))
        skipped.update({f"{name}: {label}": why for label, why in skips.items()})
    print("\n" + f"{'demo':24}{'checks':>10}{'seconds':>10}{'CPU s':>8}  figure")
    for name, passed, total, seconds, figure, status, cpu in rows:
        shown = os.path.relpath(figure) if figure else f"(stopped with an error, exit status {status})"
        print(f"{name:24}{passed:>6}/{total:<3}{seconds:>10.1f}{cpu:>8.1f}  {shown}")
    wall = time.perf_counter() - started
    side_by_side = f", {args.jobs} at a time" if args.jobs > 1 and len(rows) > 1 else ""
    print(f"\ntotal time: {duration(wall)} for {len(rows)} demo{'s' * (len(rows) != 1)}"
          f"{' (quick)' if args.quick else ''}{side_by_side}")
    print(cpu_summary(rows, args.jobs if len(rows) > 1 else 1, wall))
    failed = [row[0] for row in rows if row[1] != row[2] or row[5] or not row[2]]
    if failed:
        print(f"checks failed in: {', '.join(failed)}: this run does not agree with the reference figures "
              f"in {os.path.relpath(REFERENCE)}/ there")
        return 1
    ran = sum(r[2] for r in rows)
    if skipped:
        print(f"{len(skipped)} check{'s' * (len(skipped) != 1)} skipped, not counted below: "
              + "; ".join(f"{label} ({why})" for label, why in skipped.items()))
    if args.quick:
        print(f"all {ran} checks{' that ran' if skipped else ''} passed (a quick run: its training is too short to "
              f"hold the chapters' numbers, which only a full run checks)")
    elif skipped:
        print(f"all {ran} checks that ran passed: this run agrees with the chapters and with the reference figures in "
              f"{os.path.relpath(REFERENCE)}/ on those (the {len(skipped)} skipped ones were not checked)")
    else:
        print(f"all {ran} checks passed: this run agrees with the chapters and with the reference "
              f"figures in {os.path.relpath(REFERENCE)}/ on every check they state (training curves and timings "
              f"differ from run to run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
