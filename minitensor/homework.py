"""Homework: turn the solution into a student copy, grade copies task by task, bundle an autograder.

    python -m minitensor.homework strip OUT                    # a student copy of this repository in OUT
    python -m minitensor.homework grade [PATH]                 # a table of tasks; exit 1 if any fails
    python -m minitensor.homework grade PATH --task softmax_backward -v     # one task, with its feedback
    python -m minitensor.homework grade PATH --extra hidden/ --gradescope results.json --timeout 60
    python -m minitensor.homework bundle autograder.zip --tasks softmax_backward layer_norm_backward

Solution regions are marked in the code with a task name from TASKS, as comment lines

    # BEGIN SOLUTION <task>
    ...the solved lines...
    # END SOLUTION

`strip` replaces a region inside a function with `raise NotImplementedError("Task <task>: <hint>")`;
a region of whole functions (a fast kernel, say) becomes functions of the same names that raise.
Tests carry `@pytest.mark.task("<task>")`; a demo task's tests are its demo's checks. Each task's
tests need only that task and the tasks before it in TASKS (tests/test_homework.py checks this).

`grade` runs the teacher's tests (this repository's tests/, or a bundle's) on the copy in a
scratch folder: the copy's own tests and conftest.py are never run, and nothing is written into
the copy or into this repository. This file imports nothing of minitensor, so the autograder runs
it as a plain script beside the tests it grades with.
"""

import argparse
import configparser
import fnmatch
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import NamedTuple

# The course, in order: (task, the hint a student sees in the NotImplementedError). A hint says
# what to derive and what is at hand, never the result.
TASKS = [
    ("topological_order", "list the nodes reachable from the output so that each comes before the nodes it "
                          "sends gradient to, without recursion (a 20,000-op chain must work); autograd.py"),
    ("elementwise_backward", "derive d(output)/d(input) of Mul, Div, Exp and Tanh by hand and apply it to grad, "
                             "using what forward saved (an array no wanted gradient reads is saved as None: mind "
                             "ctx.needs_input_grad); ops/elementwise.py"),
    ("unbroadcast", "compare the two shapes, aligned on the right: which axes did broadcasting add or stretch "
                    "from size 1?; autograd.summed_axes"),
    ("matmul_backward", "write C = A B with indices, differentiate with respect to one element of A and of B, "
                        "and check the shapes; mind 1-D operands and shared weights; ops/linalg.py"),
    ("reductions", "each input element's share of the reduced output: restore the reduced axes, then spread "
                   "grad over them (Sum, Mean, Var; Max and Min between ties); ops/reduce.py"),
    ("gradcheck_central_difference", "estimate one partial derivative from f on both sides of x (an error "
                                     "of order eps squared), and leave x as you found it; gradcheck.py"),
    ("demo_attention_cost", "count the multiply-adds of one layer: the projections and MLP against the scores "
                            "and the weighted sum, as functions of T and d (seed 000, 'Efficient attention'); "
                            "demos/attention_cost.py"),
    ("softmax_backward", "write the Jacobian of softmax along the axis, then its product with dy without "
                         "building the matrix; you have y and dy; backends/numpy_backend.py"),
    ("demo_scaling", "measure, per width d_k, the statistics the seed tabulates for raw and scaled scores "
                     "(seed 000, 'Scaled dot-product attention'); demos/scaling.py"),
    ("layer_norm_backward", "differentiate x_hat = (x - mean) * rstd remembering that the mean and the "
                            "variance depend on every x of the row; you have dy, x, weight, mean and rstd; "
                            "backends/numpy_backend.py"),
    ("attention_masks", "which (query, key) pairs may a causal model use? Build that boolean mask (True hides) "
                        "and the masked softmax attention of the seed; models/attention.py"),
    ("demo_stacking", "write out two attention layers without a nonlinearity and regroup the products "
                      "(seed 001); demos/stacking.py"),
    ("multihead_split_merge", "one (T, d_head) matrix per head from (B, T, H*d_head), and back: which axes "
                              "move, in which order?; models/attention.py"),
    ("pre_norm_block", "the seed's pre-norm block: each sublayer reads a normalised copy of the residual "
                       "stream and adds its output to it; models/transformer.py"),
    ("tiled_attention", "visit the keys a tile at a time, keeping per query only what finishes the softmax "
                        "exactly at the end; work out how to correct it when a larger score arrives; "
                        "backends/numpy_backend.py"),
    ("demo_multihead", "count every weight and bias of the four projections of nn.MultiheadAttention as a "
                       "function of d (seed 000, 'Multi-head attention'); demos/multihead.py"),
    ("demo_causal_self_attention", "the scores, the causal mask as the seed's figure shows it, the weights and "
                                   "the outputs (seed 000, 'Self-attention'); demos/causal_self_attention.py"),
    ("kv_cache", "what must a decoding step remember of the tokens before it, and along which axis does it "
                 "grow?; models/attention.py"),
    ("demo_kv_cache", "the numbers one token adds to the cache in each layer, for each way of sharing key and "
                      "value heads (seed 001, 'The KV cache'); demos/kv_cache.py"),
]
TASK_NAMES = [name for name, _ in TASKS]
HINTS = dict(TASKS)
POINTS_PER_TASK = 10.0

MARKED_FOLDERS = ("minitensor", "models", "demos")
BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?: (?P<task>\S+))?\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
SKIP = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", "notebooks", "quick"}
IMPORTS = "import minitensor, models.attention, models.layernorm, models.transformer, models.recurrent, demos"
STUDENT_README = "README.student.md"  # becomes the copy's README.md; the teacher's README is not copied
STUDENT_MARK = ".minitensor-student"  # written by strip: which tasks the copy is missing
EXPECTED_FILES = ("minitensor/__init__.py", "models/__init__.py", "demos/__init__.py")
HERE = pathlib.Path(__file__).resolve().parent
SOLUTION_ROOT = HERE.parent  # the teacher's repository (or, in an autograder bundle, its source folder)

# What the student copy leaves out: paths or fnmatch patterns relative to the repository root
# (/ as separator; `*` also matches across folders), each a file that states a task's answer
# outside any solution region and that the copy needs neither to import nor to run its tests
# and demos.
NOT_IN_STUDENT_COPY = [
    "benchmarks/block.py",  # a hand-written block: head split/merge, linear and attention backward, pre-norm
    "benchmarks/kernels.py",  # the materialised attention backward, product by product
    "tests/test_benchmark_block.py",  # tests benchmarks/block.py, which is not in the copy
    "tests/test_homework_leaks.py",  # the leak test: its patterns spell out the answers it looks for
    "demos/figures/attention_cost.png",  # the solved demo tasks' figures: each plots the task's answer
    "demos/figures/scaling.png",
    "demos/figures/stacking.png",
    "demos/figures/multihead.png",
    "demos/figures/causal_self_attention.png",
    "demos/figures/kv_cache.png",
    "docs/backward_page.png",  # a screenshot whose panel title is the attention backward's dS formula
]


def kept_out(name):
    """Whether `name` (a path relative to the repository root) stays out of the student copy."""
    name = pathlib.PurePath(name).as_posix()
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_IN_STUDENT_COPY)


class HomeworkError(ValueError):
    """Bad input to strip, grade or bundle: the message names the file (and line) and the fix."""


# ----------------------------------------------------------------------------
# Strip: the student copy
# ----------------------------------------------------------------------------


def _check_tasks(names, where):
    unknown = [name for name in names if name not in HINTS]
    if unknown:
        raise HomeworkError(f"{where}: unknown task(s) {', '.join(map(repr, unknown))}; known: {', '.join(TASK_NAMES)}")


def regions(text, where="<source>"):
    """[(task, first line, last line, [region lines])] of a file's solution regions (lines 1-based,
    the markers included); a region that does not close, nests or names no known task is an error."""
    found, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        begin = BEGIN.match(line)
        if begin:
            if current is not None:
                raise HomeworkError(f"{where}:{number}: BEGIN SOLUTION inside the region opened at line {current[1]}; "
                                    f"close that one with '# END SOLUTION' first")
            task = begin.group("task")
            if task is None:
                raise HomeworkError(f"{where}:{number}: BEGIN SOLUTION names no task; write '# BEGIN SOLUTION <task>'")
            _check_tasks([task], f"{where}:{number}")
            current = [task, number, None, []]
        elif END.match(line):
            if current is None:
                raise HomeworkError(f"{where}:{number}: END SOLUTION without a BEGIN SOLUTION before it")
            current[2] = number
            found.append(tuple(current))
            current = None
        elif current is not None:
            current[3].append(line)
    if current is not None:
        raise HomeworkError(f"{where}:{current[1]}: the region of task {current[0]!r} is never closed; "
                            f"add '# END SOLUTION' after its last line")
    return found


def _stub(task, indent, body):
    """What a region becomes in the student copy. Inside a function: a raise with the hint. At
    module level (a fast kernel, its wrapper, a kernel's source): the functions it defined, each
    raising, and nothing else."""
    hint = HINTS[task]
    if not any(line.strip() and not line.strip().startswith("#") for line in body):  # a derivation in comments
        return [f"{indent}# Task {task}: (a derivation was here; it goes with the task)\n"]
    if indent:
        return [f"{indent}raise NotImplementedError({f'Task {task}: {hint}'!r})\n"]
    names = [match.group(1) for match in (re.match(r"def (\w+)", line) for line in body) if match]
    message = (f"Task {task}: this fast kernel is part of the task, so the student copy does not have it; "
               f"use the numpy backend (mt.set_backend('numpy')), where you write the task. Hint: {hint}")
    out = [f"# Task {task}: a solved kernel was here; it is removed from the student copy\n"]
    for number, name in enumerate(names):
        out += ["\n\n"] if number else []
        out += [f"def {name}(*args, **kwargs):\n", f"    raise NotImplementedError({message!r})\n"]
    return out


def strip_source(text, keep=(), where="<source>"):
    """The text with every solution region (except those of tasks in `keep`) replaced by its stub."""
    found = {first: (task, last, lines) for task, first, last, lines in regions(text, where)}
    out, skip_until = [], 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if number <= skip_until:
            continue
        if number in found:
            task, last, body = found[number]
            if task in keep:
                out.extend(text.splitlines(keepends=True)[number - 1 : last])
            else:
                out.extend(_stub(task, BEGIN.match(line).group("indent"), body))
            skip_until = last
            continue
        out.append(line)
    return "".join(out)


def marked_files(root):
    root = pathlib.Path(root)
    for folder in MARKED_FOLDERS:
        yield from sorted(p for p in (root / folder).rglob("*.py") if p.resolve() != pathlib.Path(__file__).resolve()
                          and p.name != "homework.py")


def tasks_in(root):
    """{task: number of regions} found under root."""
    counts = {}
    for path in marked_files(root):
        for task, *_ in regions(path.read_text(), str(path)):
            counts[task] = counts.get(task, 0) + 1
    return counts


def _files_to_copy(root):
    """The repository's files, as git sees them (tracked, or new and not ignored); without git,
    every file outside the usual build and cache folders."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"],
                                capture_output=True, check=True).stdout.decode()
        names = [name for name in listed.split("\0") if name]
        return [name for name in names if (root / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
                and not (set(p.relative_to(root).parts) & SKIP) and not p.name.endswith((".pyc", ".egg-info"))]


def strip(out, root=None, keep=()):
    """Write a student copy of the repository at `root` into `out`: each solution region of a task
    not in `keep` becomes its stub, README.student.md becomes README.md, and the teacher's README
    stays behind. Then check that the copy still imports. The repository at `root` is only read."""
    root = pathlib.Path(root or SOLUTION_ROOT).resolve()
    out = pathlib.Path(out)
    _check_tasks(keep, "strip --keep")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HomeworkError(f"strip: {out} exists and is not an empty folder; choose a new folder for the copy")
    files = [name for name in _files_to_copy(root) if not kept_out(name)]
    sources = {name: (root / name).read_text() for name in files
               if name.endswith(".py") and name.split("/")[0] in MARKED_FOLDERS and not name.endswith("homework.py")}
    stripped = {name: strip_source(text, keep, where=name) for name, text in sources.items()
                if "BEGIN SOLUTION" in text}
    for name in files:  # every region is checked before anything is written
        if name in ("README.md", STUDENT_README):
            continue
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in stripped:
            target.write_text(stripped[name])
        else:
            shutil.copy2(root / name, target)
    if (root / STUDENT_README).exists():
        shutil.copy2(root / STUDENT_README, out / "README.md")
    missing = [name for name in TASK_NAMES if name not in keep]
    (out / STUDENT_MARK).write_text(json.dumps({"tasks_to_do": missing}, indent=1) + "\n")
    check = subprocess.run([sys.executable, "-c", IMPORTS], cwd=out, env=_env_for(out), capture_output=True, text=True)
    if check.returncode:
        raise HomeworkError(f"strip: the student copy in {out} does not import: {_import_failure(check.stderr, out)}")
    return out


def _env_for(*paths):
    """Run with `paths` first on sys.path (so the copy's minitensor, not an installed one, is
    imported), writing no bytecode or Numba cache into them."""
    env = dict(os.environ)
    first = [str(pathlib.Path(p).resolve()) for p in paths]
    env["PYTHONPATH"] = os.pathsep.join(first + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NUMBA_CACHE_DIR"] = str(pathlib.Path(tempfile.gettempdir()) / "minitensor-grader-numba")
    env["MPLBACKEND"] = "Agg"
    for name in ("MINITENSOR_BACKEND", "MINITENSOR_QUICK", "MINITENSOR_DEMO_RECORD"):
        env.pop(name, None)
    return env


def _import_failure(stderr, root):
    """One line from a traceback: the copy's file and line that failed, and the error."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    error = lines[-1].strip() if lines else "(no message)"
    where = None
    root = str(pathlib.Path(root).resolve())
    for line in lines:
        match = re.match(r'\s*File "(.+)", line (\d+)', line)
        if match and match.group(1).startswith(root):
            where = f"{os.path.relpath(match.group(1), root)}, line {match.group(2)}"
    return f"{where}: {error}" if where else error


# ----------------------------------------------------------------------------
# Grade: the teacher's tests on the copy, in a scratch folder
# ----------------------------------------------------------------------------


class Row(NamedTuple):
    task: str
    passed: int
    total: int
    points: float
    status: str  # "passed", "failed", "blocked by TASK", "no tests", "does not import", "not collected"


def find_copy(path):
    """The folder that holds the copy: `path` itself, or the one folder inside it that does (an
    upload that kept its top folder). A missing folder or file is a HomeworkError that names it."""
    path = pathlib.Path(path)
    if not path.is_dir():
        raise HomeworkError(f"grade: {path} is not a folder; "
                            f"give the folder of a student copy (the one with minitensor/)")
    candidates = [path] + sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    for candidate in candidates:
        if all((candidate / name).is_file() for name in EXPECTED_FILES):
            return candidate.resolve()
    missing = [name for name in EXPECTED_FILES if not (path / name).is_file()]
    raise HomeworkError(f"grade: {path} is not a student copy: {', '.join(missing)} missing; "
                        f"hand in the whole copy (the folder with minitensor/, models/ and demos/)")


def _pytest_ini(tests):
    """The teacher's pytest settings that matter for grading (markers, warnings as errors)."""
    ini = configparser.ConfigParser()
    for source in (tests.parent / "setup.cfg", tests / "pytest.ini"):
        if source.exists():
            ini.read(source)
    section = (ini["tool:pytest"] if ini.has_section("tool:pytest")
               else (ini["pytest"] if ini.has_section("pytest") else {}))
    lines = ["[pytest]", "markers =", "    task(name): the homework task a test grades"]
    if "filterwarnings" in section:
        lines += ["filterwarnings ="] + [f"    {line.strip()}"
                                         for line in section["filterwarnings"].strip().splitlines()]
    return "\n".join(lines) + "\n"


GRADED = re.compile(r"^\s*(@pytest\.mark\.task\(|task = pytest\.mark\.task\b)|marks=pytest\.mark\.task\(", re.M)
PACKAGES = ("minitensor", "models", "demos", "benchmarks")  # what a graded copy may contribute to sys.path


def _graded_files(folder):
    """The test files with task-marked tests."""
    return sorted(p for p in pathlib.Path(folder).rglob("test_*.py") if GRADED.search(p.read_text()))


def _packages_of(copy, folder):
    """Copy the copy's packages (and nothing else: no conftest.py, sitecustomize.py or module
    named like a library) into `folder`, which goes on sys.path instead of the copy."""
    folder.mkdir()
    for name in PACKAGES:
        if (copy / name).is_dir():
            shutil.copytree(copy / name, folder / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def run_tests(copy, tests, extra=None, tasks=(), timeout=60.0):
    """Run the task-marked tests of `tests` (and `extra`, hidden) on `copy`; return the plugin's
    results with each test's "hidden" flag, or a dict with "error" when the copy does not import."""
    with tempfile.TemporaryDirectory(prefix="minitensor-grade-") as scratch:
        scratch = pathlib.Path(scratch)
        code = _packages_of(copy, scratch / "code")
        preflight = subprocess.run([sys.executable, "-c", IMPORTS], cwd=scratch, env=_env_for(code),
                                   capture_output=True, text=True)
        if preflight.returncode:
            return {"error": f"the copy does not import: {_import_failure(preflight.stderr, code)}", "tests": {}}
        shutil.copytree(tests, scratch / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        args = [str(p) for p in _graded_files(scratch / "tests")]
        if extra:
            shutil.copytree(extra, scratch / "hidden", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            args += [str(p) for p in _graded_files(scratch / "hidden")]
        shutil.copy2(HERE / "homework_plugin.py", scratch / "_minitensor_grader.py")
        (scratch / "pytest.ini").write_text(_pytest_ini(pathlib.Path(tests)))
        results_file = scratch / "results.json"
        env = _env_for(scratch, code)
        env.update(MINITENSOR_GRADER_RESULTS=str(results_file), MINITENSOR_GRADER_TASKS=",".join(tasks),
                   MINITENSOR_GRADER_TIMEOUT=str(timeout))
        command = [sys.executable, "-m", "pytest", *args, "-p", "_minitensor_grader", "-c", str(scratch / "pytest.ini"),
                   "--rootdir", str(scratch), "-q", "-p", "no:cacheprovider", "--no-header", "-rN"]
        try:
            run = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True,
                                 timeout=timeout * 20 + 120)
        except subprocess.TimeoutExpired:
            return {"error": f"the tests did not finish within {timeout * 20 + 120:g} s "
                             f"(a hang no per-test limit could stop)", "tests": {}}
        if not results_file.exists():
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-5:])
            return {"error": f"the tests could not run on the copy:\n{tail}", "tests": {}}
        results = json.loads(results_file.read_text())
    for nodeid, entry in results["tests"].items():
        entry["hidden"] = nodeid.startswith("hidden/")
    return results


def _rows(results, names):
    per_task = {name: [] for name in names}
    for entry in results["tests"].values():
        per_task.setdefault(entry["task"], []).append(entry)
    rows = []
    for name, entries in per_task.items():
        passed, total = sum(e["outcome"] == "passed" for e in entries), len(entries)
        if results.get("error"):
            status = "does not import"
        elif not total:
            status = "not collected" if results.get("collect_errors") else "no tests"
        elif passed == total:
            status = "passed"
        else:
            blockers = {e["blocked_by"] for e in entries if e["outcome"] != "passed"}
            earlier = [b for b in blockers if b in TASK_NAMES and b != name
                       and (name not in TASK_NAMES or TASK_NAMES.index(b) < TASK_NAMES.index(name))]
            status = f"blocked by {earlier[0]}" if len(blockers) == 1 and earlier else "failed"
        points = POINTS_PER_TASK * passed / total if total else 0.0
        rows.append(Row(name, passed, total, points, status))
    return rows


def _summary(rows, results, hidden_exist):
    if results.get("error"):
        return results["error"]
    if results.get("collect_errors"):
        first = results["collect_errors"][0]
        return f"some tests could not be collected ({first['where']}):\n{first['message']}"
    if all(row.status == "passed" for row in rows):
        return "public tests passed" if hidden_exist else "all tests passed"
    return f"{sum(row.status == 'passed' for row in rows)} of {len(rows)} tasks passed"


def grade(path=".", task=None, extra=None, stream=None, tests=None, tasks=None, timeout=60.0,
          gradescope=None, verbose=False, hidden_exist=None):
    """Grade the copy at `path` with the teacher's tests; print a table; return (ok, rows).

    task / tasks    one task, or the tasks of an assignment (default: every task in TASKS)
    extra           a folder of hidden tests (task-marked like the others)
    tests           the teacher's tests folder (default: this repository's tests/)
    timeout         seconds per test; a test past it fails with "timed out after N s"
    gradescope      write Gradescope's results.json here
    hidden_exist    whether hidden tests exist that this run does not show (default: `extra` was given,
                    or the copy is a student copy); then a full pass reads "public tests passed"
    """
    stream = stream or sys.stdout
    start = time.perf_counter()
    names = [task] if task else list(tasks or TASK_NAMES)
    _check_tasks(names, "grade --task" if task else "grade --tasks")
    tests = pathlib.Path(tests or SOLUTION_ROOT / "tests")
    if not tests.is_dir() or not _graded_files(tests):
        raise HomeworkError(f"grade: {tests} holds no task-marked tests (test_*.py with @pytest.mark.task)")
    if extra is not None:
        extra = pathlib.Path(extra)
        if not extra.is_dir():
            raise HomeworkError(f"grade --extra: {extra} is not a folder of tests")
        if not _graded_files(extra):
            raise HomeworkError(f"grade --extra: {extra} holds no test_*.py file with @pytest.mark.task tests")
    if gradescope is not None and not pathlib.Path(gradescope).parent.is_dir():
        raise HomeworkError(f"grade --gradescope: the folder of {gradescope} does not exist")
    try:
        copy = find_copy(path)
    except HomeworkError as error:
        if gradescope is None:
            raise
        results, copy = {"error": str(error).removeprefix("grade: "), "tests": {}}, pathlib.Path(path)
    else:
        results = run_tests(copy, tests, extra, names, timeout)
    if hidden_exist is None:
        hidden_exist = extra is not None or (copy / STUDENT_MARK).exists()
    rows = _rows(results, names)
    summary = _summary(rows, results, hidden_exist)
    shown = path if pathlib.Path(path).resolve() == pathlib.Path(copy).resolve() else copy  # as the user wrote it
    _print_table(rows, summary, results, shown, verbose, stream)
    if gradescope is not None:
        write_gradescope(gradescope, results, rows, time.perf_counter() - start, hidden_exist)
    ok = not results.get("error") and all(row.status == "passed" for row in rows)
    return ok, rows


def _print_table(rows, summary, results, copy, verbose, stream):
    print(f"{'#':>3}  {'task':30}{'tests':>9}{'points':>9}  status", file=stream)
    for number, row in enumerate(rows, 1):
        print(f"{number:>3}  {row.task:30}{row.passed:>5}/{row.total:<3}{row.points:>9.1f}  {row.status}", file=stream)
    earned = sum(row.points for row in rows)
    print(f"{'':>3}  {'total':30}{'':>9}{earned:>9.1f} / {POINTS_PER_TASK * len(rows):g}", file=stream)
    print(summary, file=stream)
    failing = next((row for row in rows if row.status != "passed"), None)
    if verbose:
        for nodeid, entry in results["tests"].items():
            if entry["outcome"] != "passed":
                print(f"\n--- {entry['task']}: {nodeid}\n{entry['message']}", file=stream)
    elif failing is not None and not results.get("error"):
        print(f"to see why: python -m minitensor.homework grade {copy} --task {failing.task} -v", file=stream)


def _test_name(nodeid, entry):
    return f"{entry['task']}: {nodeid.split('::', 1)[-1]}" + (" (hidden)" if entry["hidden"] else "")


def write_gradescope(path, results, rows, seconds, hidden_exist=True):
    """Gradescope's autograder results.json: one entry per test, hidden tests shown only after
    the grades are published (and their output with them)."""
    per_test = {row.task: POINTS_PER_TASK / row.total for row in rows if row.total}
    entries = []
    for nodeid, entry in results["tests"].items():
        max_score = per_test.get(entry["task"], 0.0)
        passed = entry["outcome"] == "passed"
        if entry["hidden"]:  # shown after the grades are published, and even then without its message
            output = "passed" if passed else "failed (a hidden test: its feedback is not shown)"
        elif entry["blocked_by"] and not passed:
            output = (f"blocked: task {entry['blocked_by']} is not solved yet, and this test needs it.\n"
                      f"{entry['message']}")
        else:
            output = "passed" if passed else entry["message"]
        entries.append({
            "name": _test_name(nodeid, entry),
            "score": round(max_score if passed else 0.0, 4),
            "max_score": round(max_score, 4),
            "output": output,
            "visibility": "after_published" if entry["hidden"] else "visible",
        })
    # what students read before the grades are published: the public tests alone
    public = dict(results, tests={n: e for n, e in results["tests"].items() if not e["hidden"]})
    public_rows = _rows(public, [row.task for row in rows])
    summary = _summary(public_rows, public,
                       hidden_exist=any(e["hidden"] for e in results["tests"].values()) or hidden_exist)
    table = "\n".join(f"{row.task}: {row.passed}/{row.total} public tests passed, {row.status}" for row in public_rows)
    document = {
        "score": round(sum(e["score"] for e in entries), 4),
        "execution_time": round(seconds, 1),
        "output": f"{summary}\n\n{table}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": entries,
    }
    pathlib.Path(path).write_text(json.dumps(document, indent=1) + "\n")
    return document


# ----------------------------------------------------------------------------
# Bundle: the autograder zip for Gradescope (or any CI)
# ----------------------------------------------------------------------------

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image.
set -euo pipefail
apt-get install -y python3 python3-pip python3-venv >/dev/null 2>&1 || true
python3 -m pip install -r /autograder/source/requirements.txt
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for every submission: the student's files are in $ROOT/submission, the
# results go to $ROOT/results/results.json. AUTOGRADER_ROOT lets a test lay the folders out elsewhere.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
mkdir -p "$ROOT/results"
cd "$ROOT/source"
PYTHON="${{PYTHON:-python3}}"
"$PYTHON" grader/homework.py grade "$ROOT/submission" --tests tests {extra}--tasks {tasks} \\
    --timeout {timeout:g} --gradescope "$ROOT/results/results.json"
exit 0  # a failed task is a grade, not an autograder failure
"""


GRADING_NEEDS_NOT = ("jupytext", "nbclient", "nbformat", "ipykernel", "ruff", "playwright")  # test tools only


def _requirements(root):
    """What the autograder installs: setup.cfg's runtime and test requirements (less the tools
    grading never runs), each at the exact version constraints.txt locks, so Gradescope grades
    with the packages the teacher's solution was tested with."""
    ini = configparser.ConfigParser()
    ini.read(root / "setup.cfg")
    wanted = ini.get("options", "install_requires", fallback="").split()
    wanted += [line for line in ini.get("options.extras_require", "test", fallback="").split()
               if not line.startswith(GRADING_NEEDS_NOT)]
    locked = {}
    constraints = root / "constraints.txt"
    if constraints.is_file():
        for line in constraints.read_text().splitlines():
            if "==" in line and not line.lstrip().startswith("#"):
                name = line.split("==")[0].strip().lower()
                locked[name] = line.strip()
    lines = []
    for requirement in wanted:
        name = re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()
        lines.append(locked.get(name, requirement))
    return "\n".join(lines) + "\n"


def bundle(out, tasks=None, extra=None, timeout=60.0, root=None):
    """Write the autograder zip for an assignment (a subset of TASKS, in course order): setup.sh,
    run_autograder, requirements.txt, the grader (this file and its plugin) and the teacher's tests."""
    root = pathlib.Path(root or SOLUTION_ROOT)
    tasks = list(tasks or TASK_NAMES)
    _check_tasks(tasks, "bundle --tasks")
    tasks = [name for name in TASK_NAMES if name in tasks]
    if extra is not None and (not pathlib.Path(extra).is_dir() or not _graded_files(pathlib.Path(extra))):
        raise HomeworkError(f"bundle --extra: {extra} is not a folder with test_*.py files of @pytest.mark.task tests")
    out = pathlib.Path(out)
    if not out.parent.is_dir():
        raise HomeworkError(f"bundle: the folder of {out} does not exist")
    members = {
        "setup.sh": SETUP_SH,
        "run_autograder": RUN_AUTOGRADER.format(tasks=" ".join(tasks), timeout=timeout,
                                                extra="--extra hidden " if extra else ""),
        "requirements.txt": _requirements(root),
        "grader/homework.py": (HERE / "homework.py").read_text(),
        "grader/homework_plugin.py": (HERE / "homework_plugin.py").read_text(),
        "assignment.json": json.dumps({"tasks": tasks, "timeout": timeout, "hidden_tests": extra is not None},
                                      indent=1) + "\n",
    }
    for folder, prefix in [(root / "tests", "tests/")] + ([(pathlib.Path(extra), "hidden/")] if extra else []):
        for path in sorted(folder.rglob("*")):
            helper = not path.name.startswith("test_")  # conftest.py, strategies, reference models
            if (path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".cfg", ".ini", ".json")
                    and (helper or GRADED.search(path.read_text()))):
                members[prefix + str(path.relative_to(folder))] = path.read_text()
    members["tests/pytest.ini"] = _pytest_ini(root / "tests")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    return out


# ----------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------


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
    grade_parser.add_argument("--tasks", nargs="*", metavar="TASK", help="the tasks of an assignment (default: all)")
    grade_parser.add_argument("--extra", help="a folder of extra (hidden) tests to add")
    grade_parser.add_argument("--tests", help="the teacher's tests folder (default: the solution's tests/)")
    grade_parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    grade_parser.add_argument("--gradescope", metavar="PATH", help="also write Gradescope's results.json here")
    grade_parser.add_argument("-v", "--verbose", action="store_true", help="print each failing test's feedback")
    bundle_parser = commands.add_parser("bundle", help="write a Gradescope autograder zip for an assignment")
    bundle_parser.add_argument("out")
    bundle_parser.add_argument("--tasks", nargs="*", metavar="TASK", help="the assignment's tasks (default: all)")
    bundle_parser.add_argument("--extra", help="a folder of hidden tests to include")
    bundle_parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    args = parser.parse_args(argv)
    try:
        if args.command == "strip":
            out = strip(args.out, keep=args.keep)
            print(f"student copy written to {out}: {len(TASKS) - len(args.keep)} tasks to do")
            return 0
        if args.command == "bundle":
            out = bundle(args.out, tasks=args.tasks, extra=args.extra, timeout=args.timeout)
            print(f"autograder written to {out}: upload it as the assignment's autograder (zip)")
            return 0
        ok, _ = grade(args.path, task=args.task, tasks=args.tasks, extra=args.extra, tests=args.tests,
                      timeout=args.timeout, gradescope=args.gradescope, verbose=args.verbose)
        return 0 if ok else 1
    except HomeworkError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
