"""The pytest plugin `grade` loads into the process that runs the teacher's tests on a copy.

It is written to the grader's scratch folder and loaded from there (`-p _minitensor_grader`),
never from the copy being graded, and it imports nothing of minitensor, so a copy cannot change
how it is graded. It keeps the task-marked tests (`@pytest.mark.task("name")`, optionally only
some tasks), gives each test a time limit, and writes one JSON file:

    {"tests": {nodeid: {"task", "outcome", "message", "blocked_by", "seconds"}},
     "collect_errors": [{"where", "message"}]}

Settings come from the environment: MINITENSOR_GRADER_RESULTS (the file to write),
MINITENSOR_GRADER_TASKS (comma-separated; empty: all), MINITENSOR_GRADER_TIMEOUT (seconds).
"""

import json
import os
import re
import signal
import time

import pytest

UNSOLVED = re.compile(r"Task (\w+):")


class TestTimedOut(BaseException):
    """Raised inside a test that ran past its time limit. A BaseException, so that a student's
    `except Exception:` cannot swallow it."""


def _settings():
    tasks = [t for t in os.environ.get("MINITENSOR_GRADER_TASKS", "").split(",") if t]
    return os.environ["MINITENSOR_GRADER_RESULTS"], set(tasks), float(os.environ.get("MINITENSOR_GRADER_TIMEOUT", "60"))


RESULTS, ONLY, TIMEOUT = _settings()
_tests, _collect_errors = {}, []


def _task_of(item):
    marker = item.get_closest_marker("task")
    return marker.args[0] if marker and marker.args else None


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        task = _task_of(item)
        if task is None or (ONLY and task not in ONLY):
            dropped.append(item)
        else:
            _tests[item.nodeid] = {"task": task, "outcome": "failed", "message": "did not run", "blocked_by": None,
                                   "seconds": 0.0}
            kept.append(item)
    items[:] = kept
    config.hook.pytest_deselected(items=dropped)


def pytest_collectreport(report):
    if report.failed:
        text = report.longreprtext.strip().splitlines()
        _collect_errors.append({"where": report.nodeid or ".", "message": "\n".join(text[-12:])})


def _on_alarm(signum, frame):
    raise TestTimedOut(f"timed out after {TIMEOUT:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unsolved_task(error):
    """The task whose NotImplementedError (from a stripped region) this error is, or comes from."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, NotImplementedError):
            match = UNSOLVED.match(str(error))
            if match:
                return match.group(1)
        error = error.__cause__ or error.__context__
    return None


def _feedback(excinfo):
    """What the student reads: the error's own message, not a traceback through the engine (a
    GradcheckError's message is its report: input, worst element, analytic against numeric)."""
    error = excinfo.value
    if isinstance(error, TestTimedOut):
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
        entry.update(outcome="failed", message=_feedback(error) if error else report.longreprtext[-2000:],
                     blocked_by=_unsolved_task(error.value) if error else None)
    elif report.skipped and call.when in ("setup", "call"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        entry.update(outcome="failed", message="skipped: " + str(reason))


def pytest_sessionfinish(session):
    with open(RESULTS, "w") as file:
        json.dump({"tests": _tests, "collect_errors": _collect_errors, "finished": time.time()}, file)
