"""Grade: the teacher's tests, in a grader process of their own, on a copy whose code runs only in
worker processes (sandbox.py)."""

import configparser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from . import isolation
from .sandbox import (PACKAGES, IsolationError, Sandbox, StudentError, WorkerDied, WorkerTimedOut, become_subreaper,
                      kill_descendants, release, unused_uid)
from .strip import EXPECTED_FILES, SOLUTION_ROOT, STUDENT_MARK
from .submission import copy_submission, find_plain_copy
from .worker import Handle
from .tasks import POINTS_PER_TASK, TASK_NAMES, TEST_WRITING, HomeworkError, check_task_names

def _split_points(count, points):
    """`points` split among `count` tests in steps of 0.0001, summing exactly to `points`."""
    units = round(points * 10_000)
    return [(units // count + (i < units % count)) / 10_000 for i in range(count)]


class Row(NamedTuple):
    task: str
    passed: int
    total: int
    points: float
    status: str  # "passed", "failed", "blocked by TASK", "no tests", "does not import", "not collected"


def find_copy(path):
    """The folder that holds the copy: `path` itself, or the one folder inside it that does (an
    upload that kept its top folder), found without following a link inside the submission. A
    missing folder or file is a HomeworkError that names it."""
    path = pathlib.Path(path)
    if not path.is_dir():
        raise HomeworkError(f"grade: {path} is not a folder; "
                            f"give the folder of a student copy (the one with minitensor/)")
    found = find_plain_copy(path.resolve(), EXPECTED_FILES)
    if found is not None:
        return found
    missing = [name for name in EXPECTED_FILES if not (path / name).is_file()]
    raise HomeworkError(f"grade: {path} is not a student copy: {', '.join(missing) or 'its files are links'} missing; "
                        f"hand in the whole copy (the folder with minitensor/, models/ and demos/)")


def pytest_ini(tests):
    """The teacher's pytest settings that matter for grading (markers, warnings as errors)."""
    ini = configparser.ConfigParser()
    for source in (tests.parent / "setup.cfg", tests / "pytest.ini"):
        if source.exists():
            ini.read(source)
    section = (ini["tool:pytest"] if ini.has_section("tool:pytest")
               else (ini["pytest"] if ini.has_section("pytest") else {}))
    lines = ["[pytest]", "markers =", "    task(name): the homework task a test grades",
             "    hidden: a hidden test in the public folder (a test-writing task's hidden chaff)"]
    if "filterwarnings" in section:
        lines += ["filterwarnings ="] + [f"    {line.strip()}"
                                         for line in section["filterwarnings"].strip().splitlines()]
    return "\n".join(lines) + "\n"


GRADED = re.compile(r"^\s*(@pytest\.mark\.task\(|task = pytest\.mark\.task\b)|marks=pytest\.mark\.task\(", re.M)


def graded_files(folder):
    """The test files with task-marked tests."""
    return sorted(p for p in pathlib.Path(folder).rglob("test_*.py") if GRADED.search(p.read_text()))


IMPORTED = ("minitensor", "models.attention", "models.layernorm", "models.recurrent", "models.transformer", "demos")


def _sensitive(tests, extra):
    """What no worker may read: the teacher's repository (when the grader runs from one), the
    tests (public and hidden) and the grader's own packages (PyTorch among them)."""
    import sysconfig

    paths = [tests] + ([extra] if extra else []) + [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if (SOLUTION_ROOT / "tests").is_dir():
        paths.append(SOLUTION_ROOT)
    return [str(pathlib.Path(path).resolve()) for path in paths]


def _why_copy_does_not_import(copy, python, seconds, isolation_at_least, sensitive=(), uid=None, seen=None):
    """(None if the copy imports in a worker, else what stops it: file, line and error). A sandbox
    that cannot be made (no user to run the Python, a level below the one asked) is a
    HomeworkError that says why, not a copy that "does not import". `uid`: the submission's user
    id (as root); `seen`, a dict, gets what a worker could see (Sandbox.could_see)."""
    try:
        sandbox = Sandbox(copy, python=python, isolation_at_least=isolation_at_least, sensitive=sensitive, uid=uid)
    except IsolationError as error:
        raise HomeworkError(f"grade: {error}") from None
    if seen is not None:
        seen["worker_could_see"] = sandbox.could_see
    worker = sandbox.worker("import")
    deadline = time.monotonic() + seconds
    try:
        for module in IMPORTED:
            worker.ask({"do": "import", "module": module}, Handle, seconds=max(deadline - time.monotonic(), 0.001))
    except StudentError as error:
        details = error.args[0]
        where = f"{details['where']}: " if details.get("where") else ""
        return f"{where}{details['type']}: {details['message']}"
    except (WorkerDied, WorkerTimedOut) as error:
        return str(error) or f"importing it took more than {seconds:g} s"
    finally:
        worker.stop()
        sandbox.close()
    return None


GRADER_PACKAGE = "minitensor_grader"  # this package, as the grader process imports it


def run_tests(copy, tests, extra=None, tasks=(), timeout=60.0, python=None, isolation_at_least="none"):
    """Run the task-marked tests of `tests` (and `extra`, hidden) on `copy`; return the plugin's
    results with each test's "hidden" flag and the isolation level the workers ran at, or a dict
    with "error" when the submission is refused or the copy does not import.

    The submission's packages are copied first, never followed (submission.py); the tests run in
    a grader process (pytest with plugin.py) that never imports the copy; the copy's code runs in
    worker processes under `python` (default: this interpreter), fenced in at the strongest level
    the machine allows and at least `isolation_at_least` (isolation.py). As root, the submission
    gets a fresh user id (uids.py), which the import check and then the tests' workers use, and
    everything it owns is removed at the end."""
    become_subreaper()
    python = python or os.environ.get("MINITENSOR_WORKER_PYTHON") or sys.executable
    isolation.rank(isolation_at_least)
    try:
        uid = unused_uid() if os.geteuid() == 0 else None
    except IsolationError as error:
        raise HomeworkError(f"grade: {error}") from None
    try:
        return _run_tests(copy, tests, extra, tasks, timeout, python, isolation_at_least, uid)
    finally:
        if uid is not None:
            release(uid)


def _run_tests(copy, tests, extra, tasks, timeout, python, isolation_at_least, uid):
    with tempfile.TemporaryDirectory(prefix="minitensor-grade-") as scratch:  # 0700: no worker reads it
        scratch = pathlib.Path(scratch)
        try:
            copy_submission(copy, scratch / "copy", PACKAGES)
            student_tests = _copy_student_tests(pathlib.Path(copy), scratch / "student-tests")
        except HomeworkError as error:
            return {"error": f"the submission was refused: {error}", "tests": {}}
        copy = scratch / "copy"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(tests, scratch / "tests", ignore=ignore)
        args = [str(p) for p in graded_files(scratch / "tests")]
        if extra:
            shutil.copytree(extra, scratch / "hidden", ignore=ignore)
            args += [str(p) for p in graded_files(scratch / "hidden")]
        shutil.copytree(pathlib.Path(__file__).resolve().parent, scratch / "grader" / GRADER_PACKAGE, ignore=ignore)
        (scratch / "pytest.ini").write_text(pytest_ini(pathlib.Path(tests)))
        results_file = scratch / "results.json"
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("PYTHON", "MINITENSOR_", "PYTEST_"))}
        env.update(PYTHONPATH=str(scratch / "grader"), PYTHONDONTWRITEBYTECODE="1", MINITENSOR_GRADER="1",
                   MINITENSOR_GRADER_RESULTS=str(results_file), MINITENSOR_GRADER_TASKS=",".join(tasks),
                   MINITENSOR_GRADER_TIMEOUT=str(timeout), MINITENSOR_GRADER_COPY=str(copy),
                   MINITENSOR_GRADER_PYTHON=python, MINITENSOR_GRADER_LOG=str(scratch / "workers.log"),
                   MINITENSOR_GRADER_ISOLATION=isolation_at_least, MINITENSOR_GRADER_STUDENT_TESTS=str(student_tests),
                   MINITENSOR_GRADER_SENSITIVE=os.pathsep.join(_sensitive(tests, extra)))
        uid_free = scratch / "uid-free"  # made once the import check's workers are gone: the tests' may start
        if uid is not None:
            env.update(MINITENSOR_GRADER_UID=str(uid), MINITENSOR_GRADER_UID_FREE=str(uid_free))
        if os.environ.get("MINITENSOR_ISOLATION_ONLY"):
            env["MINITENSOR_ISOLATION_ONLY"] = os.environ["MINITENSOR_ISOLATION_ONLY"]
        command = [sys.executable, "-m", "pytest", *args, "-p", f"{GRADER_PACKAGE}.plugin", "-c",
                   str(scratch / "pytest.ini"), "--rootdir", str(scratch), "-q", "-p", "no:cacheprovider",
                   "--no-header", "-rN"]
        limit = timeout * 20 + 120
        output = scratch / "pytest.log"
        with open(output, "w") as log:  # the grader starts (PyTorch loads) while the import check runs
            run = subprocess.Popen(command, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT)
        seen = {}
        try:
            try:
                failure = _why_copy_does_not_import(copy, python, max(timeout, 60.0), isolation_at_least,
                                                    _sensitive(tests, extra), uid=uid, seen=seen)
            finally:
                uid_free.write_text("")
            if failure:
                return {"error": f"the copy does not import: {failure}", "tests": {}, **seen}
            run.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return {"error": f"the tests did not finish within {limit:g} s (a hang no per-test limit could stop)",
                    "tests": {}}
        finally:
            kill_descendants()
        if not results_file.exists():
            tail = "\n".join(output.read_text().strip().splitlines()[-5:])
            return {"error": f"the tests could not run on the copy:\n{tail}", "tests": {}}
        results = json.loads(results_file.read_text())
        if results.get("worker_could_see") is None and seen.get("worker_could_see") is not None:
            results["worker_could_see"] = seen["worker_could_see"]
        if results.get("error"):  # the grader could not fence the workers in: nothing was graded
            raise HomeworkError(f"grade: {results['error']}")
    for nodeid, entry in results["tests"].items():
        entry["hidden"] = bool(entry.get("hidden")) or nodeid.startswith("hidden/")
    return results


def _copy_student_tests(copy, target):
    """The submission's tests/student/ (the test-writing tasks' files), copied as its packages are
    (never followed); returns the folder that holds them (empty when there are none)."""
    import stat

    tests = copy / "tests"
    try:
        info = os.lstat(tests)
    except FileNotFoundError:
        target.mkdir()
        return target / "student"
    if not stat.S_ISDIR(info.st_mode):
        raise HomeworkError("the submission's tests is not a folder (a link or a file): hand in the folder itself")
    copy_submission(tests, target, ["student"])
    return target / "student"


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
            status = ("not collected" if results.get("collect_errors")
                      else "no tests here: try `practice`" if name in TEST_WRITING  # graded by the teacher only
                      else "no tests")
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


def result_summary(rows, results, hidden_exist):
    """The one line (or two) the table ends with: an error, tests that could not be collected, or how the tests went."""
    if results.get("error"):
        return results["error"]
    if results.get("collect_errors"):
        first = results["collect_errors"][0]
        return f"some tests could not be collected ({first['where']}):\n{first['message']}"
    if all(row.status == "passed" for row in rows):
        return "public tests passed" if hidden_exist else "all tests passed"
    return f"{sum(row.status == 'passed' for row in rows)} of {len(rows)} tasks passed"


def grade(path=".", task=None, extra=None, stream=None, tests=None, tasks=None, timeout=60.0,
          gradescope=None, verbose=False, hidden_exist=None, python=None, isolation_at_least="none"):
    """Grade the copy at `path` with the teacher's tests; print a table; return (ok, rows).

    task / tasks    one task, or the tasks of an assignment (default: every task in TASKS)
    extra           a folder of hidden tests (task-marked like the others)
    tests           the teacher's tests folder (default: this repository's tests/)
    timeout         seconds per test; a test past it fails with "timed out after N s"
    gradescope      write Gradescope's results.json here
    python          the interpreter student code runs under (default: $MINITENSOR_WORKER_PYTHON, else this one)
    isolation_at_least  the weakest isolation accepted ("none", "uid", "landlock", "bubblewrap"): grading
                    refuses, saying why, rather than run student code less fenced in (isolation.py)
    hidden_exist    whether hidden tests exist that this run does not show (default: `extra` was given,
                    or the copy is a student copy); then a full pass reads "public tests passed"
    """
    stream = stream or sys.stdout
    start = time.perf_counter()
    names = [task] if task else list(tasks or TASK_NAMES)
    check_task_names(names, "grade --task" if task else "grade --tasks")
    if isolation_at_least not in isolation.LEVELS:
        raise HomeworkError(f"grade --isolation: {isolation_at_least!r} is not a level; choose one of "
                            f"{', '.join(isolation.LEVELS)}")
    tests = pathlib.Path(tests or SOLUTION_ROOT / "tests")
    if not tests.is_dir() or not graded_files(tests):
        raise HomeworkError(f"grade: {tests} holds no task-marked tests (test_*.py with @pytest.mark.task)")
    if extra is not None:
        extra = pathlib.Path(extra)
        if not extra.is_dir():
            raise HomeworkError(f"grade --extra: {extra} is not a folder of tests")
        if not graded_files(extra):
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
        try:
            results = run_tests(copy, tests, extra, names, timeout, python, isolation_at_least)
        except HomeworkError as error:
            if gradescope is None:
                raise
            results = {"error": f"the autograder could not grade: {str(error).removeprefix('grade: ')}", "tests": {}}
    if hidden_exist is None:
        hidden_exist = extra is not None or (copy / STUDENT_MARK).exists()
    rows = _rows(results, names)
    summary = result_summary(rows, results, hidden_exist)
    shown = path if pathlib.Path(path).resolve() == pathlib.Path(copy).resolve() else copy  # as the user wrote it
    if gradescope is not None:  # first: whatever the table holds, the results file is written
        write_gradescope(gradescope, results, rows, time.perf_counter() - start, hidden_exist)
    _print_table(rows, summary, results, shown, verbose, stream)
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
        print(f"to see why: python -m homework grade {copy} --task {failing.task} -v", file=stream)
    if results.get("isolation"):
        print(f"student code ran at isolation level {isolation.describe(results['isolation'])}", file=stream)


def _test_name(nodeid, entry):
    return f"{entry['task']}: {nodeid.split('::', 1)[-1]}" + (" (hidden)" if entry["hidden"] else "")


def write_gradescope(path, results, rows, seconds, hidden_exist=True):
    """Gradescope's autograder results.json: one entry per test, hidden tests shown only after
    the grades are published (and their output with them)."""
    shares = {row.task: _split_points(row.total, POINTS_PER_TASK) for row in rows if row.total}
    entries = []
    for nodeid, entry in results["tests"].items():
        max_score = shares[entry["task"]].pop() if shares.get(entry["task"]) else 0.0
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
    summary = result_summary(public_rows, public,
                       hidden_exist=any(e["hidden"] for e in results["tests"].values()) or hidden_exist)
    table = "\n".join(f"{row.task}: {row.passed}/{row.total} public tests passed, {row.status}" for row in public_rows)
    document = {
        "score": round(sum(e["score"] for e in entries), 4),
        "execution_time": round(seconds, 1),
        "output": f"{summary}\n\n{table}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "extra_data": {"isolation": results.get("isolation"), "worker_could_see": results.get("worker_could_see")},
        "tests": entries,
    }
    pathlib.Path(path).write_text(json.dumps(document, indent=1) + "\n")
    return document

