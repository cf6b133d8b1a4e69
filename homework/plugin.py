"""The pytest plugin of the grader: the teacher's tests run here, student code never does.

`grade` starts pytest with this plugin (`-p minitensor_grader.plugin`) in a process that holds
the teacher's tests, PyTorch and the comparisons, and never imports the copy. A graded test asks
for the `student` fixture and calls the student's code through it: `student.call(probe, *args)`
runs the probe here, each of its uses of the copy a request to the task's worker process
(student.py, remote.py, sandbox.py), and gets plain values back, which the test compares with its
reference here. Once a task's work test fails, its other tests are not counted. The plugin keeps the
task-marked tests (public ones first, then hidden ones, each group in course order), gives each
test a time limit, starts one worker per task (a fresh one for the hidden tests, after every
public test has run), kills every worker before it writes one JSON file:

    {"tests": {nodeid: {"task", "outcome", "message", "blocked_by", "seconds"}},
     "collect_errors": [{"where", "message"}]}

Settings come from the environment: MINITENSOR_GRADER_RESULTS (the file to write),
MINITENSOR_GRADER_TASKS (comma-separated, in course order; empty: all),
MINITENSOR_GRADER_TIMEOUT (seconds per test), MINITENSOR_GRADER_COPY (the copy's folder),
MINITENSOR_GRADER_PYTHON (the interpreter workers run), MINITENSOR_GRADER_LOG (the workers' output),
MINITENSOR_GRADER_ISOLATION (the weakest isolation level accepted), MINITENSOR_GRADER_SENSITIVE (paths
no worker may read, os.pathsep-separated), MINITENSOR_GRADER_STUDENT_TESTS (the submission's
tests/student/, copied: the test-writing tasks' files), MINITENSOR_GRADER_UID (as root: the
submission's user id, which the workers use once the file MINITENSOR_GRADER_UID_FREE exists). The
results file also says which level the workers ran at ("isolation"), what a worker could see there
("worker_could_see", Sandbox.could_see) and the grader's own peak memory ("grader_max_rss_mb").
A test's clock starts when its worker is ready (its start-up is not the student's time).
"""

import json
import os
import re
import resource
import signal
import time

import pytest

from .sandbox import (IsolationError, Sandbox, StudentError, WorkerDied, WorkerTimedOut, become_subreaper,
                      kill_descendants)
from .student import WorkerStudent

UNSOLVED = re.compile(r"Task (\w+):")
RESULTS = os.environ["MINITENSOR_GRADER_RESULTS"]
ONLY = [t for t in os.environ.get("MINITENSOR_GRADER_TASKS", "").split(",") if t]
TIMEOUT = float(os.environ.get("MINITENSOR_GRADER_TIMEOUT", "60"))
COPY = os.environ.get("MINITENSOR_GRADER_COPY")
PYTHON = os.environ.get("MINITENSOR_GRADER_PYTHON")
LOG = os.environ.get("MINITENSOR_GRADER_LOG")
ISOLATION = os.environ.get("MINITENSOR_GRADER_ISOLATION", "none")
SENSITIVE = [path for path in os.environ.get("MINITENSOR_GRADER_SENSITIVE", "").split(os.pathsep) if path]
STUDENT_TESTS = os.environ.get("MINITENSOR_GRADER_STUDENT_TESTS")
_tests, _collect_errors, _session = {}, [], {"isolation": None, "error": None, "worker_could_see": None}
become_subreaper()


def _task_of(item):
    marker = item.get_closest_marker("task")
    return marker.args[0] if marker and marker.args else None


def _hidden(item):
    """A test of the hidden folder, or one marked hidden (a hidden chaff of a test-writing task)."""
    return item.nodeid.startswith("hidden/") or item.get_closest_marker("hidden") is not None


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        task = _task_of(item)
        if task is None or (ONLY and task not in ONLY):
            dropped.append(item)
        else:
            _tests[item.nodeid] = {"task": task, "outcome": "failed", "message": "did not run", "blocked_by": None,
                                   "seconds": 0.0, "hidden": _hidden(item)}
            kept.append(item)
    order = {task: number for number, task in enumerate(ONLY)}
    # a task's work tests (a function marked `work = True`: timed, off the forward's image) first,
    # whichever file holds them: once one fails, the task's other tests are not counted
    kept.sort(key=lambda item: (_hidden(item), order.get(_task_of(item), len(order)),
                                not getattr(getattr(item, "function", None), "work", False)))  # stable otherwise
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


def pytest_collectreport(report):
    if report.failed:
        text = report.longreprtext.strip().splitlines()
        _collect_errors.append({"where": report.nodeid or ".", "message": "\n".join(text[-12:])})


class _Workers:
    """One worker per (task, hidden): the one in use is stopped before the next one starts."""

    def __init__(self):
        self.sandbox, self.key, self.worker = None, None, None

    def for_item(self, item):
        key = (_task_of(item), _hidden(item))
        if key != self.key:
            self.stop()
            self.key, self.worker = key, self.made_sandbox().worker(key[0], log=LOG)
        return self.worker

    def made_sandbox(self):
        if self.sandbox is None:
            uid = _submission_uid()
            self.sandbox = Sandbox(COPY, python=PYTHON, isolation_at_least=ISOLATION, sensitive=SENSITIVE, uid=uid)
            _session["isolation"], _session["worker_could_see"] = self.sandbox.level, self.sandbox.could_see
        return self.sandbox

    def stop(self):
        if self.worker is not None:
            self.worker.stop()
        self.key = self.worker = None

    def close(self):
        self.stop()
        if self.sandbox is not None:
            self.sandbox.close()
        kill_descendants()  # what a worker detached came back to this process (a subreaper)


_workers = _Workers()


def _submission_uid():
    """The submission's user id that `grade` reserved (MINITENSOR_GRADER_UID), once its import
    check is done with it (MINITENSOR_GRADER_UID_FREE exists); None where grade gave none."""
    uid, free = os.environ.get("MINITENSOR_GRADER_UID"), os.environ.get("MINITENSOR_GRADER_UID_FREE")
    if not uid:
        return None
    parent, deadline = os.getppid(), time.monotonic() + 900
    while not os.path.exists(free):
        if os.getppid() != parent or time.monotonic() > deadline:
            raise IsolationError("the grader's import check did not hand over the submission's user id")
        time.sleep(0.05)
    return int(uid)


@pytest.fixture
def student(request):
    """The student's code, reached through a worker process: `student.call(probe, *args)`. The
    worker is started (and ready) before the test's clock starts."""
    try:
        worker = _workers.for_item(request.node)
    except IsolationError as error:  # no worker can run here as asked: stop, grade nothing
        _session["error"] = str(error)
        request.session.shouldstop = str(error)
        raise
    if worker.process is None:
        worker.start()
    return WorkerStudent(worker, deadline=time.monotonic() + TIMEOUT)


_verdicts = {}  # op: the judge's verdict on the student's tests for it, made once for all its chaffs' tests


@pytest.fixture
def written_tests(request):
    """`written_tests(op)`: the verdict (testwriting/judge.py) on the submission's
    tests/student/test_<op>.py, judged against the op's wheats and chaffs in fresh workers of the
    sandbox, within this test's time limit. A test-writing task's graded tests each read one chaff
    of it."""
    from .testwriting import Verdict, implementations, judge, task_of, test_file

    def verdict(op):
        if op not in _verdicts:
            _workers.stop()
            try:
                sandbox = _workers.made_sandbox()
            except IsolationError as error:
                _session["error"] = str(error)
                request.session.shouldstop = str(error)
                raise
            path = os.path.join(STUDENT_TESTS or "", os.path.basename(test_file(op)))
            source = open(path, encoding="utf-8", errors="replace").read() if os.path.isfile(path) else ""
            kill_all = sandbox.level == "bubblewrap" or sandbox.uid is not None
            try:
                _verdicts[op] = judge(op, source, lambda: sandbox.worker(task_of(op), log=LOG), kill_all,
                                      budget=TIMEOUT - 2)
            except WorkerTimedOut:  # the grader's own limit: the op's other tests must not judge it again
                _verdicts[op] = Verdict(op, [i for i in implementations(op) if i.kind != "wheat"])
                _verdicts[op].too_slow = f"judging your tests took more than the {TIMEOUT:g} s a test may take"
                raise
        return _verdicts[op]

    return verdict


def _on_alarm(signum, frame):
    raise WorkerTimedOut()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """The time limit holds for the grader's side of a test too (a worker call stops its worker)."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT + 1)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unsolved_task(error):
    """The task whose stub ('Task NAME: ...') this error is, or comes from."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, NotImplementedError):
            match = UNSOLVED.match(str(error))
            if match:
                return match.group(1)
        error = error.__cause__ or error.__context__
    return None


def _feedback(error):
    """What the student reads: the comparison's report or the student's error, not a traceback."""
    if isinstance(error, WorkerTimedOut):
        return f"timed out after {TIMEOUT:g} s"
    if isinstance(error, (WorkerDied, StudentError)):
        return str(error)
    message = str(error).strip()
    name = type(error).__name__
    text = f"{name}: {message}" if message else name
    return text if len(text) < 4000 else text[:4000] + "\n..."


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    entry = _tests.get(item.nodeid)
    if entry is None:
        return
    if call.when == "call":
        entry["seconds"] = round(call.duration, 3)
    if report.passed and call.when == "call" and entry["message"] == "did not run":
        entry.update(outcome="passed", message="")
    elif report.failed:
        error = call.excinfo
        entry.update(outcome="failed", message=_feedback(error.value) if error else report.longreprtext[-2000:],
                     blocked_by=_unsolved_task(error.value) if error else None)
        if getattr(getattr(item, "function", None), "work", False) and not entry["blocked_by"]:
            _work_failed.setdefault(entry["task"], f"{item.name}: {entry['message'].splitlines()[0][:300]}"
                                    if entry["message"] else item.name)
    elif report.skipped and call.when in ("setup", "call"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        entry.update(outcome="failed", message="skipped: " + str(reason))


_work_failed = {}  # task -> the work test that failed (a backward that gets the values without the work)


def _void_the_tasks_whose_work_failed():
    """A task whose work test failed earns nothing: its tests that passed (public, teacher-only or
    hidden, before the work test or after it) fail with the work test's reason."""
    for entry in _tests.values():
        failed = _work_failed.get(entry["task"])
        if failed and entry["outcome"] == "passed":
            entry.update(outcome="failed", message=f"not counted: this task's work test failed ({failed})")


def pytest_sessionfinish(session):
    _workers.close()  # no student process is left when the results are written
    _void_the_tasks_whose_work_failed()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux
    with open(RESULTS, "w") as file:
        json.dump({"tests": _tests, "collect_errors": _collect_errors, "finished": time.time(),
                   "isolation": _session["isolation"], "error": _session["error"],
                   "worker_could_see": _session["worker_could_see"],
                   "grader_max_rss_mb": round(peak, 1)}, file)
