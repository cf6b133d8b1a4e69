"""Test-writing tasks: the student writes the tests (tests/student/test_<op>.py) and is graded by the
buggy implementations they catch, as in Brown's Examplar.

    targets.py        the ops under test and where the stand-in goes (the op's Function class)
    wheats.py         correct implementations, several per op (grader side only)
    public_chaffs.py  buggy ones students practise on, each with a hint (shipped in the copy)
    hidden_chaffs.py  buggy ones for the grade (grader side only)
    oracle.py         runs an implementation in the grader, answering the worker's stand-in
    runner.py         the worker's side: a fresh process per run, the stand-in, the tests
    judge.py          the runs, validity, "caught N of M", the hints

The graded tests (tests/test_testwriting_graded.py) ask the `written_tests` fixture of the grader's
plugin for a verdict; `python -m homework practice` runs the same judge on the student's
machine against the public chaffs and the copy's own ops."""

import pathlib
import sys

from .catalogue import CONDITIONS, Implementation, has_wheats, implementations
from .judge import SEEDS, Verdict, judge
from .targets import TARGETS, Target, task_of, test_file

__all__ = ["CONDITIONS", "Implementation", "SEEDS", "TARGETS", "Target", "Verdict", "has_wheats", "implementations",
           "judge", "practice", "task_of", "test_file"]


def practice(copy=".", ops=None, stream=None, python=None):
    """Run the copy's tests/student/test_<op>.py against the public chaffs (and, as the one correct
    implementation there is, the copy's own op: solve its task first) and print what they catch.
    Returns {op: Verdict}."""
    from ..sandbox import Sandbox

    stream = stream or sys.stdout
    copy = pathlib.Path(copy).resolve()
    sandbox = Sandbox(copy, python=python)
    kill_all = sandbox.level == "bubblewrap" or sandbox.uid is not None
    own = Implementation(None, "your own copy's op", "wheat")
    verdicts = {}
    try:
        for op in ops or TARGETS:
            path = copy / test_file(op)
            if not path.is_file():
                print(f"{op}: no {test_file(op)}", file=stream)
                continue
            verdict = judge(op, path.read_text(), lambda: sandbox.worker(task_of(op)), kill_all,
                            include=("public",), extra_wheats=(own,))
            verdicts[op] = verdict
            print(f"{op}: {verdict.summary()}", file=stream)
    finally:
        sandbox.close()
    return verdicts
