"""Grading whole copies: the stripped copy fails every task and says what blocks what; the solution
passes every task, at every isolation level this machine has, graded by root and by another user.
Each grades every task (a grading run per test), so this file holds these alone."""


import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
from round_trip import ROOT, grade, levels_here, passed_tasks

import homework


@pytest.fixture(scope="module")
def student_grade(stripped_copy):
    return grade(stripped_copy)


def test_the_stripped_copy_fails_every_task_and_says_what_blocks_what(student_grade):
    ok, rows, table = student_grade
    assert not ok and passed_tasks(rows) == [] and [row.task for row in rows] == homework.TASK_NAMES
    statuses = {row.task: row.status for row in rows}
    assert statuses["topological_order"] == "failed" and statuses["elementwise_backward"] == "blocked by topological_order"
    assert "to see why: python -m homework grade" in table and "--task topological_order -v" in table


def test_the_teachers_guide_prints_the_untouched_copys_table_as_grade_prints_it(student_grade, stripped_copy):
    """README's teacher round shows `strip` and `grade` on the untouched copy: the same counts, rows
    and totals this grade printed (the copy's path written ../student), so no number drifts."""
    ok, rows, table = student_grade
    readme = (ROOT / "README.md").read_text()
    assert f"student copy written to ../student: {len(homework.TASKS)} tasks to do" in readme
    shown = readme.split("$ python -m homework grade ../student\n", 1)[1].split("student code ran at", 1)[0]
    printed = table.split("student code ran at", 1)[0].replace(str(stripped_copy), "../student")
    assert shown == printed, (shown, printed)


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the tests above already grade as a user other than root")
@pytest.mark.skipif(os.stat(ROOT).st_mode & 0o055 == 0, reason="no user but root can read this repository")
@pytest.mark.parametrize("level", [level for level in levels_here() if getattr(level, "values", [level])[0] != "uid"]
                         + ["none"])
def test_the_solution_gets_full_marks_graded_by_a_user_other_than_root(level, python_others_can_run):
    """A teacher who grades as an ordinary user (no uid to drop to: the worker runs as the teacher)
    gets full marks for honest work at every level an ordinary user has here: bubblewrap without
    privileges, Landlock, and none. The grader runs as a fresh uid whose home and caches are a
    temporary folder, and who can write nothing in the repository. Where the repository is closed to
    other users (.ci/run: 0750, so that the uid level can grade), the teacher is in its group."""
    from homework import uids

    uid = uids.unused_uid()

    def as_teacher():
        os.setgroups([os.stat(ROOT).st_gid])
        os.setgid(uid)
        os.setuid(uid)

    try:
        home = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-teacher-"))  # pytest's folders are root's, 0700
        os.chown(home, uid, uid)
        environment = {key: value for key, value in os.environ.items() if not key.startswith("MINITENSOR_")}
        environment.update(HOME=str(home), TMPDIR=str(home), PYTHONDONTWRITEBYTECODE="1",
                           NUMBA_CACHE_DIR=str(home / "numba"), MINITENSOR_ISOLATION_ONLY=level)
        run = subprocess.run([python_others_can_run, "-m", "homework", "grade", str(ROOT)], cwd=ROOT,
                             env=environment, preexec_fn=as_teacher, capture_output=True, text=True,
                             timeout=600)
    finally:
        uids.release(uid)  # its processes, IPC objects and files in /tmp (its home among them)
        shutil.rmtree(home, ignore_errors=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "250.0 / 250" in run.stdout and "all tests passed" in run.stdout, run.stdout
    assert f"student code ran at isolation level {level}" in run.stdout, run.stdout
