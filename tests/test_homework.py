"""The homework round trip: strip a student copy, grade it, fill tasks back in one by one."""

import io
import pathlib
import subprocess
import sys

import pytest

from minitensor import homework

ROOT = pathlib.Path(__file__).resolve().parent.parent


def passed_tasks(rows):
    return [name for name, passed, total, _ in rows if total and passed == total]


def test_every_task_is_marked_in_the_code_and_has_tests():
    marked = homework.tasks_in(ROOT)
    assert set(marked) == set(homework.TASK_NAMES) and len(homework.TASKS) >= 12
    tests = (ROOT / "tests" / "test_homework_tasks.py").read_text()
    for name in homework.TASK_NAMES:
        assert f'@task("{name}")' in tests


def test_strip_source_replaces_regions_with_the_hint():
    source = (
        "def f(x):\n"
        "    y = 1\n"
        "    # BEGIN SOLUTION softmax_backward\n"
        "    return x + y\n"
        "    # END SOLUTION\n"
    )
    stripped = homework.strip_source(source)
    assert "return x + y" not in stripped and "BEGIN SOLUTION" not in stripped
    assert '    raise NotImplementedError("Task softmax_backward: dx = y * (dy' in stripped
    assert homework.strip_source(source, keep=("softmax_backward",)) == source
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        homework.strip_source(source.replace("softmax_backward", "nope"))
    with pytest.raises(ValueError, match="never closed"):
        homework.strip_source(source.replace("    # END SOLUTION\n", ""))


def grade(path, **kwargs):
    ok, rows = homework.grade(path, stream=io.StringIO(), **kwargs)
    return ok, rows


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    return homework.strip(tmp_path_factory.mktemp("copy") / "student")


def test_the_student_copy_has_no_solution_left_and_fails_every_task(student):
    for path in homework.marked_files(student):
        for line in path.read_text().splitlines():
            assert not homework.BEGIN.match(line) and not homework.END.match(line), path
    autograd_source = (student / "minitensor" / "autograd.py").read_text()
    assert "finished.reverse()" not in autograd_source  # the topological sort's solution
    assert 'raise NotImplementedError("Task topological_order:' in autograd_source
    ok, rows = grade(student)
    assert not ok and passed_tasks(rows) == []
    result = subprocess.run([sys.executable, "-m", "minitensor.homework", "grade", str(student)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and "total" in result.stdout


def test_the_solution_passes_every_task():
    ok, rows = grade(ROOT)
    assert ok and passed_tasks(rows) == homework.TASK_NAMES


@pytest.mark.parametrize("k", [1, 3])
def test_solving_the_first_k_tasks_passes_exactly_those(k, tmp_path):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES[:k])
    ok, rows = grade(copy)
    assert not ok and passed_tasks(rows) == homework.TASK_NAMES[:k]


def test_all_tasks_filled_back_in_pass_and_one_task_can_be_graded(tmp_path):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES)
    ok, rows = grade(copy)
    assert ok and passed_tasks(rows) == homework.TASK_NAMES
    ok, rows = grade(copy, task="softmax_backward")
    assert ok and [r[0] for r in rows] == ["softmax_backward"]


def test_extra_hidden_tests_are_added(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "test_hidden.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.task('kv_cache')\n"
        "def test_an_instructors_extra_check():\n"
        "    assert False, 'hidden test'\n"
    )
    ok, rows = grade(ROOT, task="kv_cache", extra=hidden)
    assert not ok and rows == [("kv_cache", 1, 2, 5.0)]
