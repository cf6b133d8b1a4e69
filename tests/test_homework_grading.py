"""Grading whole copies: the stripped copy fails every task and says what blocks what; the solution
passes every task. Each grades every task (a grading run per test), so this file holds these two alone."""


import pytest
from round_trip import ROOT, grade, levels_here, passed_tasks

from minitensor import homework


@pytest.fixture(scope="module")
def student_grade(stripped_copy):
    return grade(stripped_copy)


def test_the_stripped_copy_fails_every_task_and_says_what_blocks_what(student_grade):
    ok, rows, table = student_grade
    assert not ok and passed_tasks(rows) == [] and [row.task for row in rows] == homework.TASK_NAMES
    statuses = {row.task: row.status for row in rows}
    assert statuses["topological_order"] == "failed" and statuses["elementwise_backward"] == "blocked by topological_order"
    assert "to see why: python -m minitensor.homework grade" in table and "--task topological_order -v" in table


def test_the_solution_passes_every_task_including_every_demo_check():
    ok, rows, table = grade(ROOT)
    assert ok and passed_tasks(rows) == homework.TASK_NAMES, table
    assert all(row.total >= 1 for row in rows) and "all tests passed" in table


@pytest.mark.parametrize("level", [level for level in levels_here() if getattr(level, "values", [level])[0] != "bubblewrap"])
def test_the_solution_gets_full_marks_at_every_weaker_level_too(level, monkeypatch):
    """Honest work gets full marks wherever the grader runs it: at Landlock (the autograder's
    default floor, where the namespaces of bubblewrap are refused, as in Docker) and at a dropped
    uid, the grader's own code needing no path the sandbox denies. (bubblewrap: the test above.)"""
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    ok, rows, table = grade(ROOT)
    assert ok and passed_tasks(rows) == homework.TASK_NAMES, table
    assert f"student code ran at isolation level {level}" in table, table
