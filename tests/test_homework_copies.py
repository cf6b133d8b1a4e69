"""Grading copies that are partly solved, edited, broken or not copies at all: each gets the grade its
code earns, and what went wrong is said in words (the worst element, the file and line), never a
traceback."""

import io
import json
import re
import subprocess
import sys

import pytest
from round_trip import ROOT, copy_of, grade, passed_tasks

import homework
from homework.strip import copy_environment


@pytest.fixture(scope="module")
def student(stripped_copy):
    return stripped_copy


def test_solving_the_first_k_tasks_passes_exactly_those(tmp_path, k=3):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES[:k])
    ok, rows, _ = grade(copy, tasks=homework.TASK_NAMES[: k + 2])
    assert not ok and passed_tasks(rows) == homework.TASK_NAMES[:k]


def test_a_copy_whose_tests_and_conftest_were_edited_gets_the_grade_its_code_earns(student, tmp_path):
    copy = copy_of(student, tmp_path)
    (copy / "tests" / "conftest.py").write_text(
        "import pytest\n\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    report = outcome.get_result()\n"
        "    report.outcome = 'passed'\n"
    )
    tasks_file = copy / "tests" / "test_homework_tasks.py"
    tasks_file.write_text(re.sub(r"(def test_\w+\(.*\):\n)", r"\1    return\n", tasks_file.read_text()))
    (copy / "conftest.py").write_text((copy / "tests" / "conftest.py").read_text())
    ok, rows, _ = grade(copy, tasks=["topological_order", "softmax_backward"])
    assert not ok and passed_tasks(rows) == []
    assert subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tasks_file)],
                          cwd=copy, env=copy_environment(copy), capture_output=True).returncode == 0  # the edits do fool pytest


def test_a_copy_with_a_syntax_error_is_reported_as_such(student, tmp_path):
    copy = copy_of(student, tmp_path)
    reduce = copy / "minitensor" / "ops" / "reduce.py"
    lines = reduce.read_text().splitlines()
    lines[19] = "    def oops(:"
    reduce.write_text("\n".join(lines) + "\n")
    results = tmp_path / "results.json"
    ok, rows, table = grade(copy, gradescope=results)
    assert not ok and {row.status for row in rows} == {"does not import"}
    assert "the copy does not import: minitensor/ops/reduce.py, line 20: SyntaxError" in table
    document = json.loads(results.read_text())
    assert document["score"] == 0 and "minitensor/ops/reduce.py, line 20: SyntaxError" in document["output"]


def _replace_region(path, task, new_lines):
    """Replace the solved lines of `task`'s first region in `path` (a copy with the task kept)."""
    text = path.read_text()
    _, first, last, _ = next(r for r in homework.regions(text, str(path)) if r[0] == task)
    lines = text.splitlines(keepends=True)
    indent = re.match(r"\s*", lines[first - 1]).group(0)
    path.write_text("".join(lines[:first - 1] + [indent + line + "\n" for line in new_lines] + lines[last:]))


def test_a_failed_backward_task_names_the_worst_element_not_a_traceback(tmp_path):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES)
    _replace_region(copy / "minitensor" / "ops" / "softmax.py", "softmax_backward", ["(y,) = ctx.saved_tensors",
                                                                                      "dx = y * grad"])
    ok, rows, table = grade(copy, task="softmax_backward", verbose=True)  # what "to see why" prints
    assert not ok and [row.task for row in rows] == ["softmax_backward"] and rows[0].total == 4
    assert rows[0].status == "failed"
    assert "--- softmax_backward: tests/test_homework_tasks.py::test_softmax_backward_at_a_large_size" in table
    assert re.search(r"dx: \d+ of \d+ elements differ from PyTorch's; worst dx\[\d+, \d+\]: yours .*, PyTorch's ", table)
    assert "not counted: this task's work test failed (test_softmax_backward_at_a_large_size: dx:" in table
    assert "Traceback" not in table and 'File "' not in table


def test_grade_rejects_bad_input_with_the_librarys_error(tmp_path):
    with pytest.raises(homework.HomeworkError, match="no_such_folder is not a folder"):
        homework.grade(tmp_path / "no_such_folder", stream=io.StringIO())
    (tmp_path / "upload" / "minitensor").mkdir(parents=True)
    with pytest.raises(homework.HomeworkError, match=r"is not a student copy: .*models/__init__\.py.* missing"):
        homework.grade(tmp_path / "upload", stream=io.StringIO())
    with pytest.raises(homework.HomeworkError, match="grade --extra: .*missing is not a folder"):
        homework.grade(ROOT, extra=tmp_path / "missing", stream=io.StringIO())
    with pytest.raises(homework.HomeworkError, match=r"unknown task\(s\) 'nope'"):
        homework.grade(ROOT, task="nope", stream=io.StringIO())
    result = subprocess.run([sys.executable, "-m", "homework", "grade", str(tmp_path / "no_such_folder")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "is not a folder" in result.stderr and "Traceback" not in result.stderr
