"""The graded tests of the test-writing tasks (homework/testwriting/): one test per chaff
of each op, which passes when the student's tests/student/test_<op>.py is valid (passes every wheat
on every seed) and catches that chaff. So a task's row reads "caught N of M" (tests passed of
tests), its points are the share of chaffs caught, and hidden chaffs are hidden tests (the `hidden`
mark: their feedback is not shown). The verdict is made once per op, by the `written_tests`
fixture of the grader's plugin; this file needs a grader (`grade`), and is skipped elsewhere."""

import re

import pytest

try:  # under grade: the grader's own copy of homework
    from minitensor_grader import testwriting
except ImportError:
    from homework import testwriting

task = pytest.mark.task  # (the line grade and bundle find a graded file by)
CASES = [pytest.param(op, chaff.label, id=f"{op}-{chaff.label}".replace(" ", "-"),
                      marks=[task(testwriting.task_of(op))]
                      + ([pytest.mark.hidden] if chaff.kind == "hidden" else []))
         for op in testwriting.TARGETS for chaff in testwriting.implementations(op, include=("public", "hidden"))]


@pytest.mark.parametrize("op, label", CASES)
def test_your_tests_catch_this_buggy_implementation(written_tests, op, label):
    verdict = written_tests(op)
    reason = verdict.why_nothing()
    if reason is not None:
        unsolved = re.search(r"NotImplementedError: (Task \w+: .*)", reason)
        if unsolved:  # the copy's engine or gradcheck is a stub: say which task blocks this one
            raise NotImplementedError(unsolved.group(1)) from AssertionError(reason)
        raise AssertionError(reason)
    if not verdict.caught[label]:
        hint = dict(verdict.missed_hints()).get(label)
        said = f"; an input that would catch it: {hint}" if hint else ""
        raise AssertionError(f"{label} passed all your tests{said} ({verdict.public_summary()})")
