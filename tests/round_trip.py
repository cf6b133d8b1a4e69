"""What the homework round's test files share (test_homework*.py): grading a copy into a table, a
copy of a copy, the hidden tests a Gradescope run holds, and the isolation levels of this machine."""

import io
import os
import pathlib
import shutil

import pytest

import homework

ROOT = pathlib.Path(__file__).resolve().parent.parent


def passed_tasks(rows):
    return [row.task for row in rows if row.status == "passed"]


def grade(path, **kwargs):
    stream = io.StringIO()
    ok, rows = homework.grade(path, stream=stream, **kwargs)
    return ok, rows, stream.getvalue()


def copy_of(student, tmp_path):
    target = tmp_path / "student"
    shutil.copytree(student, target)
    return target


HIDDEN = (
    "import pytest\n\n"
    "def probe_spin(side):\n"
    "    side.module('time').sleep(10**6)  # the student's side never answers\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_an_instructors_extra_check():\n"
    "    assert False, 'the secret the student must not read early'\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_a_student_loop_that_never_ends(student):\n"
    "    student.call(probe_spin)\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_a_hidden_check_that_passes():\n"
    "    assert True\n"
)


def levels_here():
    """Every isolation level this machine can grade at, the uid floor where it can keep the
    teacher's repository out (it refuses to grade where other users can read it)."""
    from homework import isolation

    levels = [level for level, present in [("bubblewrap", isolation.bubblewrap_path()),
                                           ("landlock", isolation.landlock_abi())] if present]
    floor = "uid" if os.geteuid() == 0 else "none"
    return levels + [pytest.param(floor, marks=pytest.mark.skipif(
        floor == "uid" and os.stat(ROOT).st_mode & 0o005 != 0,
        reason="other users can read this repository, so the uid level refuses to grade here "
               "(tests/test_homework_isolation.py checks the refusal)"))]


SOLVED_REDUCE = "'BEGIN SOLUTION reductions'"
FIND_SOLVED = f"""
import os, sys
for top in sys.argv[1:]:
    for folder, folders, names in os.walk(top):
        folders[:] = [f for f in folders if f not in ('.git', 'site-packages', '__pycache__', 'node_modules')]
        if 'reduce.py' in names:
            try:
                text = open(os.path.join(folder, 'reduce.py')).read()
            except OSError:
                continue
            if {SOLVED_REDUCE} in text:
                print(folder)
"""


def solved_checkouts_others_can_read():
    """The folders of solved minitensor code (a reduce.py with its solution region) that a user with
    no rights of its own can read, outside this repository: at the `uid` level a worker reads what
    other users may read, so another solved checkout lying world-readable is the student's to find."""
    import subprocess
    import sys

    from homework.uids import drop_to

    python = shutil.which("python3", path="/usr/bin:/usr/local/bin") or sys.executable  # one every user can run
    run = subprocess.run([python, "-I", "-S", "-c",
                          FIND_SOLVED, "/work", "/home", "/root", "/opt", "/srv", "/tmp"], preexec_fn=drop_to(61999),
                         capture_output=True, text=True, cwd="/", timeout=300)
    return [line for line in run.stdout.splitlines() if not line.startswith(str(ROOT))]
