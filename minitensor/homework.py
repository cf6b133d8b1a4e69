"""Homework: turn the solution into a student copy, and grade a copy task by task, locally.

    python -m minitensor.homework strip OUT               # a student copy of this repository in OUT
    python -m minitensor.homework grade [PATH]            # a table of tasks passed; exit 1 if any fails
    python -m minitensor.homework grade PATH --task softmax_backward
    python -m minitensor.homework grade PATH --extra hidden_tests/

Solution regions are marked in the code, inside a function:

    # BEGIN SOLUTION softmax_backward
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))
    # END SOLUTION

`strip` replaces each region with `raise NotImplementedError("Task <name>: <hint>")`.
Tests carry `@pytest.mark.task("<name>")`; each task's tests need only that task and
the tasks before it in TASKS (tests/test_homework.py checks that this holds).
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

# The course, in order: (task, the one-line hint a student sees in the NotImplementedError).
TASKS = [
    ("topological_order", "order the nodes so each comes before the nodes it sends gradient to (autograd.py)"),
    ("elementwise_backward", "return dL/d(input) for Mul, Div, Exp and Tanh from grad and the saved arrays"),
    ("unbroadcast", "find the axes broadcasting added or stretched from size 1 (autograd.summed_axes)"),
    ("matmul_backward", "dA = grad @ B^T, dB = A^T @ grad; mind 1-D operands and shared weights"),
    ("reductions", "put the reduced axes back and broadcast: Sum, Mean, Var, and Max/Min's ties"),
    ("gradcheck_central_difference", "(f(x + eps e_j) - f(x - eps e_j)) / (2 eps); restore x afterwards"),
    ("softmax_backward", "dx = y * (dy - sum(dy * y)) along the axis (backends/numpy_backend.py)"),
    ("layer_norm_backward", "dx = rstd (g - mean(g) - x_hat mean(g x_hat)), g = dy * weight"),
    ("attention_masks", "causal mask (True hides the future) and softmax(q k^T / sqrt(d) + mask) v"),
    ("multihead_split_merge", "reshape (B, T, H*dh) to (B, H, T, dh) and back"),
    ("pre_norm_block", "x = x + MHA(LN1(x)); return x + MLP(LN2(x))"),
    ("tiled_attention", "keys tile by tile: a running max, normaliser and weighted sum per query"),
    ("kv_cache", "append the new keys and values along the time axis; return all of them"),
]
TASK_NAMES = [name for name, _ in TASKS]
HINTS = dict(TASKS)

MARKED_FOLDERS = ("minitensor", "models", "demos")
BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?: (?P<task>\w+))?\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
SKIP = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist"}


def strip_source(text, keep=(), where="<source>"):
    """The text with every solution region (except those of tasks in `keep`) replaced by a raise."""
    out, region = [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        begin = BEGIN.match(line)
        if begin:
            if region is not None:
                raise ValueError(f"{where}:{number}: a BEGIN SOLUTION inside another region")
            task = begin.group("task")
            if task not in HINTS:
                raise ValueError(f"{where}:{number}: unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
            region = task
            if task in keep:
                out.append(line)
            else:
                out.append(f'{begin.group("indent")}raise NotImplementedError("Task {task}: {HINTS[task]}")\n')
            continue
        if END.match(line):
            if region is None:
                raise ValueError(f"{where}:{number}: END SOLUTION without BEGIN")
            if region in keep:
                out.append(line)
            region = None
            continue
        if region is None or region in keep:
            out.append(line)
    if region is not None:
        raise ValueError(f"{where}: region {region!r} is never closed")
    return "".join(out)


def marked_files(root):
    root = pathlib.Path(root)
    for folder in MARKED_FOLDERS:
        yield from sorted((root / folder).rglob("*.py"))


def tasks_in(root):
    """{task: number of regions} found under root."""
    counts = {}
    for path in marked_files(root):
        for line in path.read_text().splitlines():
            match = BEGIN.match(line)
            if match:
                counts[match.group("task")] = counts.get(match.group("task"), 0) + 1
    return counts


def strip(out, root=None, keep=()):
    """Write a student copy of the repository at `root` into `out`: everything, except that
    each solution region of a task not in `keep` becomes a NotImplementedError. Then check
    that the copy still imports."""
    root = pathlib.Path(root or pathlib.Path(__file__).resolve().parent.parent)
    out = pathlib.Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"strip: {out} exists and is not empty")
    shutil.copytree(root, out, dirs_exist_ok=True, ignore=lambda folder, names: [n for n in names if n in SKIP])
    for path in marked_files(out):
        text = path.read_text()
        if "BEGIN SOLUTION" in text:
            path.write_text(strip_source(text, keep, where=str(path.relative_to(out))))
    check = subprocess.run(
        [sys.executable, "-c", "import minitensor, models.transformer, models.attention, models.recurrent, demos"],
        cwd=out, env=_env_for(out), capture_output=True, text=True,
    )
    if check.returncode:
        raise RuntimeError(f"strip: the student copy does not import:\n{check.stderr}")
    return out


def _env_for(path):
    """Run with `path` first on sys.path, so its minitensor (not an installed one) is imported."""
    env = dict(os.environ)
    paths = [str(pathlib.Path(path).resolve()), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(paths).rstrip(os.pathsep)
    env.pop("MINITENSOR_BACKEND", None)
    return env


# ----------------------------------------------------------------------------
# Grading: pytest in a subprocess, with a plugin that records each test's task and outcome
# ----------------------------------------------------------------------------


class _Recorder:
    """A pytest plugin: keep the task-marked tests (optionally one task) and record outcomes."""

    def __init__(self, path, only=None):
        self.path, self.only, self.task_of, self.outcomes = path, only, {}, {}

    def pytest_collection_modifyitems(self, config, items):
        kept, dropped = [], []
        for item in items:
            marker = item.get_closest_marker("task")
            task = marker.args[0] if marker and marker.args else None
            if task is None or (self.only and task != self.only):
                dropped.append(item)
            else:
                self.task_of[item.nodeid] = task
                kept.append(item)
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_logreport(self, report):
        if report.nodeid not in self.task_of:
            return
        if report.failed or (report.when == "call" and report.passed):
            previous = self.outcomes.get(report.nodeid, "passed")
            self.outcomes[report.nodeid] = "failed" if report.failed else previous

    def pytest_sessionfinish(self):
        results = {nodeid: (task, self.outcomes.get(nodeid, "failed")) for nodeid, task in self.task_of.items()}
        pathlib.Path(self.path).write_text(json.dumps(results))


def _run_pytest_with_recorder(argv):
    """What the grading subprocess runs: argv = [results file, task or "", pytest arguments...]."""
    import pytest

    out, only, args = argv[0], argv[1] or None, argv[2:]
    return pytest.main(args, plugins=[_Recorder(out, only)])


def grade(path=".", task=None, extra=None, stream=None):
    """Run the task tests of the repository at `path`; print a table; return (ok, rows)."""
    stream = stream or sys.stdout
    path = pathlib.Path(path).resolve()
    if task is not None and task not in HINTS:
        raise ValueError(f"grade: unknown task {task!r}; known: {', '.join(TASK_NAMES)}")
    with tempfile.TemporaryDirectory() as scratch:
        results_file = pathlib.Path(scratch) / "results.json"
        args = [str(path / "tests"), "-q", "-p", "no:cacheprovider"]
        if extra:
            args.append(str(pathlib.Path(extra).resolve()))
        command = [sys.executable, "-c",
                   "import sys; from minitensor.homework import _run_pytest_with_recorder as r; "
                   "sys.exit(r(sys.argv[1:]))", str(results_file), task or "", *args]
        subprocess.run(command, cwd=path, env=_env_for(path), capture_output=True, text=True)
        results = json.loads(results_file.read_text()) if results_file.exists() else {}
    per_task = {name: [0, 0] for name in ([task] if task else TASK_NAMES)}
    for _, (name, outcome) in results.items():
        per_task.setdefault(name, [0, 0])
        per_task[name][1] += 1
        per_task[name][0] += outcome == "passed"
    rows = []
    print(f"{'#':>3}  {'task':32}{'tests':>9}{'points':>9}", file=stream)
    for number, (name, (passed, total)) in enumerate(per_task.items(), 1):
        points = 10.0 * passed / total if total else 0.0
        rows.append((name, passed, total, points))
        print(f"{number:>3}  {name:32}{passed:>5}/{total:<3}{points:>9.1f}", file=stream)
    earned = sum(r[3] for r in rows)
    print(f"{'':>3}  {'total':32}{'':>9}{earned:>9.1f} / {10 * len(rows)}", file=stream)
    ok = all(total and passed == total for _, passed, total, _ in rows)
    if not ok:
        failing = next(name for name, passed, total, _ in rows if not total or passed != total)
        print(f"to see why, in {path}: python -m pytest tests/test_homework_tasks.py -k {failing}", file=stream)
    return ok, rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m minitensor.homework", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    strip_parser = commands.add_parser("strip", help="write a student copy")
    strip_parser.add_argument("out")
    strip_parser.add_argument("--keep", nargs="*", default=(), metavar="TASK", help="tasks to leave solved")
    grade_parser = commands.add_parser("grade", help="grade a copy task by task")
    grade_parser.add_argument("path", nargs="?", default=".")
    grade_parser.add_argument("--task", help="grade one task")
    grade_parser.add_argument("--extra", help="a folder of extra (hidden) tests to add")
    args = parser.parse_args(argv)
    if args.command == "strip":
        out = strip(args.out, keep=args.keep)
        print(f"student copy written to {out}: {len(TASKS) - len(args.keep)} tasks to do")
        return 0
    ok, _ = grade(args.path, task=args.task, extra=args.extra)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
