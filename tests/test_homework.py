"""The homework round trip: strip a student copy, check it gives nothing away, grade it (and
copies that cheat, break or hang) with the teacher's tests, and bundle a Gradescope autograder.

Grading runs pytest in a subprocess, so these tests grade whole copies only where they must (the
stripped copy, the solution) and one or two tasks elsewhere."""

import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from minitensor import homework

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_homework_demos import DEMO_TASKS  # noqa: E402


def passed_tasks(rows):
    return [row.task for row in rows if row.status == "passed"]


def grade(path, **kwargs):
    stream = io.StringIO()
    ok, rows = homework.grade(path, stream=stream, **kwargs)
    return ok, rows, stream.getvalue()


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    return homework.strip(tmp_path_factory.mktemp("copy") / "student")


@pytest.fixture(scope="module")
def student_grade(student):
    return grade(student)


def copy_of(student, tmp_path):
    target = tmp_path / "student"
    shutil.copytree(student, target)
    return target


# ----------------------------------------------------------------------------
# Regions and strip
# ----------------------------------------------------------------------------


def test_every_task_is_marked_in_the_code_and_has_tests():
    marked = homework.tasks_in(ROOT)
    assert set(marked) == set(homework.TASK_NAMES) and len(homework.TASKS) >= 18
    tests = (ROOT / "tests" / "test_homework_tasks.py").read_text()
    demo_tasks = [name for name in homework.TASK_NAMES if name.startswith("demo_")]
    assert len(demo_tasks) >= 6 and set(demo_tasks) == set(DEMO_TASKS)
    for name in homework.TASK_NAMES:
        assert f'@task("{name}")' in tests or name in DEMO_TASKS, name


def test_hints_say_what_to_derive_not_the_result():
    for name, hint in homework.TASKS:
        assert not re.search(r"\b(dx|dA|dB|dL/d\w+)\s*=", hint), f"{name}: the hint states a result: {hint}"


SOURCE = (
    "def f(x):\n"
    "    y = 1\n"
    "    # BEGIN SOLUTION softmax_backward\n"
    "    return x + y\n"
    "    # END SOLUTION\n"
)


def test_strip_source_replaces_regions_with_the_hint():
    stripped = homework.strip_source(SOURCE)
    assert "return x + y" not in stripped and "BEGIN SOLUTION" not in stripped
    assert f"    raise NotImplementedError('Task softmax_backward: {homework.HINTS['softmax_backward']}')" in stripped
    assert homework.strip_source(SOURCE, keep=("softmax_backward",)) == SOURCE


def test_a_region_of_whole_functions_becomes_functions_that_say_which_backend_to_use():
    source = (
        "import numba\n\n\n"
        "# BEGIN SOLUTION softmax_backward\n"
        "@numba.njit(cache=True)\n"
        "def _rows(y, dy):\n"
        "    return y * dy\n\n\n"
        "def softmax_backward(y, dy, axis=-1):\n"
        "    return _rows(y, dy)\n"
        "# END SOLUTION\n\n\n"
        "KERNELS = ''\n"
        "# BEGIN SOLUTION layer_norm_backward\n"
        "KERNELS += 'dx = r * (g - g_mean)'\n"
        "# END SOLUTION\n"
    )
    stripped = homework.strip_source(source)
    namespace = {}
    exec(compile(stripped, "<stripped>", "exec"), namespace)
    assert "y * dy" not in stripped and "g_mean" not in stripped and namespace["KERNELS"] == ""
    with pytest.raises(NotImplementedError, match=r"Task softmax_backward: .*use the numpy backend"):
        namespace["softmax_backward"](1, 2)
    with pytest.raises(NotImplementedError, match="Task softmax_backward"):
        namespace["_rows"](1, 2)


@pytest.mark.parametrize("source, message", [
    (SOURCE.replace("softmax_backward", "nope"), r"a\.py:3: unknown task\(s\) 'nope'"),
    (SOURCE.replace("    # END SOLUTION\n", ""), r"a\.py:3: the region of task 'softmax_backward' is never closed"),
    (SOURCE.replace("    y = 1\n", "    # END SOLUTION\n"), r"a\.py:2: END SOLUTION without a BEGIN"),
    (SOURCE.replace("    return x + y\n", "    # BEGIN SOLUTION kv_cache\n"), r"a\.py:4: BEGIN SOLUTION inside the region opened at line 3"),
])
def test_bad_regions_name_the_file_and_line(source, message):
    with pytest.raises(homework.HomeworkError, match=message):
        homework.strip_source(source, where="a.py")


def test_strip_refuses_bad_input_before_writing_anything(tmp_path):
    with pytest.raises(homework.HomeworkError, match=r"strip --keep: unknown task\(s\) 'no_such_task'"):
        homework.strip(tmp_path / "out", keep=["no_such_task"])
    assert not (tmp_path / "out").exists()
    repo = tmp_path / "repo"
    (repo / "minitensor").mkdir(parents=True)
    (repo / "minitensor" / "broken.py").write_text("def f():\n    # BEGIN SOLUTION kv_cache\n    return 1\n")
    with pytest.raises(homework.HomeworkError, match=r"minitensor/broken\.py:2: the region of task 'kv_cache' is never closed"):
        homework.strip(tmp_path / "out2", root=repo)
    assert not (tmp_path / "out2").exists()
    result = subprocess.run([sys.executable, "-m", "minitensor.homework", "strip", str(tmp_path / "o3"), "--keep", "no_such_task"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "unknown task(s) 'no_such_task'" in result.stderr and "Traceback" not in result.stderr


def _normalised(line):
    return " ".join(line.split())


TRIVIAL = re.compile(r"^(return \w+|return|pass|else:|for \w+ in [\w.]+:|\)|\]|}|\"\"\"|(\w+, )*\w+ = ctx\.saved_tensors|\(\w+,\) = ctx\.saved_tensors|#.*)$")


def solution_lines(root):
    """{task: the lines of its solution regions, whitespace normalised}, leaving out trivial lines
    and lines the library has outside every region too (`if mask is not None:` is no answer)."""
    public, lines = set(), {}
    for path in [*homework.marked_files(root), *(root / "benchmarks").rglob("*.py"), *(root / "examples").rglob("*.py")]:
        text = path.read_text()
        inside = {number for _, first, last, _ in homework.regions(text, str(path)) for number in range(first, last + 1)}
        public |= {_normalised(line) for number, line in enumerate(text.splitlines(), 1) if number not in inside}
        for task, _, _, body in homework.regions(text, str(path)):
            for line in body:
                line = _normalised(line)
                if len(line) > 12 and not TRIVIAL.match(line):
                    lines.setdefault(task, set()).add(line)
    return {task: found - public for task, found in lines.items()}


def leaks(copy):
    """[(task, solved line, file)] for each solution line found in a text file of the copy."""
    files = {}
    for path in copy.rglob("*"):
        if path.is_file():
            try:
                files[path.relative_to(copy)] = {_normalised(line) for line in path.read_text().splitlines()}
            except UnicodeDecodeError:
                continue  # figures
    assert pathlib.Path("README.md") in files and len(files) > 50
    return [(task, line, str(name)) for task, lines in solution_lines(ROOT).items() for line in lines
            for name, contents in files.items() if line in contents]


def test_no_line_of_a_solution_appears_anywhere_in_the_student_copy(student):
    found = leaks(student)
    assert not found, found[:5]


def test_the_leak_test_finds_a_solved_line_pasted_into_the_readme(student, tmp_path):
    copy = copy_of(student, tmp_path)
    line = sorted(solution_lines(ROOT)["layer_norm_backward"])[0]
    with open(copy / "README.md", "a") as readme:
        readme.write(f"\n    {line}   \n")
    assert [(task, name) for task, _, name in leaks(copy)] == [("layer_norm_backward", "README.md")]


def test_the_student_copy_is_what_a_student_needs(student):
    assert (student / "README.md").read_text() == (ROOT / homework.STUDENT_README).read_text()
    assert not (student / homework.STUDENT_README).exists()
    assert (student / "minitensor" / "homework.py").read_text() == (ROOT / "minitensor" / "homework.py").read_text()
    assert not list(student.rglob("*.egg-info")) and not (student / "demos" / "figures" / "quick").exists()
    assert json.loads((student / homework.STUDENT_MARK).read_text())["tasks_to_do"] == homework.TASK_NAMES
    numba_source = (student / "minitensor" / "backends" / "numba_backend.py").read_text()
    assert "def _softmax_backward_rows(*args, **kwargs):" in numba_source and "use the numpy backend" in numba_source
    assert "x_hat_i x_hat_j" not in (student / "models" / "layernorm.py").read_text()  # the derivation went too
    for path in homework.marked_files(student):
        for line in path.read_text().splitlines():
            assert not homework.BEGIN.match(line) and not homework.END.match(line), path


# ----------------------------------------------------------------------------
# Grading
# ----------------------------------------------------------------------------


def test_the_stripped_copy_fails_every_task_and_says_what_blocks_what(student_grade):
    ok, rows, table = student_grade
    assert not ok and passed_tasks(rows) == [] and [row.task for row in rows] == homework.TASK_NAMES
    statuses = {row.task: row.status for row in rows}
    assert statuses["topological_order"] == "failed" and statuses["elementwise_backward"] == "blocked by topological_order"
    assert "to see why: python -m minitensor.homework grade" in table and "--task topological_order -v" in table


def test_the_solution_passes_every_task_including_every_demo_check():
    ok, rows, table = grade(ROOT)
    assert ok and passed_tasks(rows) == homework.TASK_NAMES, table
    for task, (_, labels) in DEMO_TASKS.items():
        assert next(row for row in rows if row.task == task).total == len(labels)
    assert "all tests passed" in table


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
                          cwd=copy, env=homework._env_for(copy), capture_output=True).returncode == 0  # the edits do fool pytest


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


def test_a_failed_backward_task_shows_the_gradcheck_report_not_a_traceback(tmp_path):
    copy = homework.strip(tmp_path / "student", keep=homework.TASK_NAMES)
    backend = copy / "minitensor" / "backends" / "numpy_backend.py"
    source = backend.read_text()
    right = "    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))\n"
    assert right in source
    backend.write_text(source.replace(right, "    return y * dy\n"))
    ok, rows, table = grade(copy, task="softmax_backward", verbose=True)  # what "to see why" prints
    assert not ok and [row.task for row in rows] == ["softmax_backward"] and rows[0].total == 1 and rows[0].status == "failed"
    assert "--- softmax_backward: tests/test_homework_tasks.py::test_softmax_backward" in table
    assert "GradcheckError: gradcheck failed for input 0" in table and "analytic (backward)" in table
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
    result = subprocess.run([sys.executable, "-m", "minitensor.homework", "grade", str(tmp_path / "no_such_folder")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "is not a folder" in result.stderr and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------
# Gradescope: hidden tests, time limits, the autograder bundle
# ----------------------------------------------------------------------------


HIDDEN = (
    "import pytest\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_an_instructors_extra_check():\n"
    "    assert False, 'the secret the student must not read early'\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_a_student_loop_that_never_ends():\n"
    "    while True:\n"
    "        pass\n\n"
    "@pytest.mark.task('kv_cache')\n"
    "def test_a_hidden_check_that_passes():\n"
    "    assert True\n"
)


@pytest.fixture
def hidden(tmp_path):
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "test_hidden.py").write_text(HIDDEN)
    return folder


def test_a_gradescope_autograder_run_writes_a_valid_results_file(hidden, tmp_path):
    """bundle's run_autograder, in a folder laid out as Gradescope lays it out; the teacher's
    repository is not changed by strip, grade or bundle."""
    before = _snapshot(ROOT)
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["kv_cache", "softmax_backward"], extra=hidden, timeout=5)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(root / "source")
    assert {"setup.sh", "run_autograder", "requirements.txt", "grader/homework.py", "tests/test_homework_tasks.py",
            "hidden/test_hidden.py"} <= set(names)
    assert "torch==" in (root / "source" / "requirements.txt").read_text()
    (root / "submission").symlink_to(ROOT)  # a student who solved everything
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable)
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, check=True, timeout=600)
    document = json.loads((root / "results" / "results.json").read_text())

    assert {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests"} <= set(document)
    for test in document["tests"]:
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
    by_name = {test["name"].split(": ", 1)[1]: test for test in document["tests"]}
    hidden_tests = [test for test in document["tests"] if test["visibility"] == "after_published"]
    assert len(hidden_tests) == 3 and all(test["name"].endswith("(hidden)") for test in hidden_tests)
    assert all("secret" not in test["output"] for test in document["tests"])  # hidden output is withheld
    assert by_name["test_a_student_loop_that_never_ends (hidden)"]["score"] == 0
    assert by_name["test_kv_cache_generation_equals_full_attention"]["score"] > 0  # graded despite the hang
    assert by_name["test_softmax_backward"]["visibility"] == "visible"
    assert document["score"] == sum(test["score"] for test in document["tests"]) < 20
    assert document["output"].startswith("public tests passed\n")  # before publication: nothing of the hidden ones
    assert "kv_cache: 1/1 public tests passed" in document["output"]

    # the teacher sees why each hidden test failed; the hang failed alone, after 5 s
    ok, rows, table = grade(ROOT, tasks=["kv_cache"], extra=hidden, timeout=5, verbose=True)
    assert rows[0].passed == 2 and rows[0].total == 4
    assert re.search(r"test_a_student_loop_that_never_ends\ntimed out after 5 s\n", table)
    assert "the secret the student must not read early" in table
    assert _snapshot(ROOT) == before


def test_a_full_pass_reads_public_tests_passed_when_hidden_tests_exist():
    solved_rows = [homework.Row("kv_cache", 1, 1, 10.0, "passed")]
    assert homework._summary(solved_rows, {"tests": {}}, hidden_exist=True) == "public tests passed"
    assert homework._summary(solved_rows, {"tests": {}}, hidden_exist=False) == "all tests passed"


def test_a_submission_without_the_expected_files_gets_a_results_file_that_says_so(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "notes.txt").write_text("I forgot the code")
    results = tmp_path / "results.json"
    ok, rows, table = grade(tmp_path / "submission", gradescope=results, tasks=["kv_cache"])
    document = json.loads(results.read_text())
    assert not ok and document["score"] == 0 and "minitensor/__init__.py" in document["output"]


def _snapshot(root):
    """Every file of the repository (outside caches) with its size and modification time."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file() and not {".git", "__pycache__", ".hypothesis", "quick", ".venv"} & set(p.relative_to(root).parts)}


def _cuda_kernels(source):
    """The __global__ kernels the CuPy backend compiles, from its source (no GPU needed): run
    only the statements that build _ROW_KERNELS and the regex that lists them."""
    import ast

    tree = ast.parse(source)
    kept = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AugAssign))
            and "_ROW_KERNELS" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)]
    namespace = {}
    exec(compile(ast.Module(body=kept, type_ignores=[]), "<cupy_backend>", "exec"), namespace)
    return re.findall(r"__global__ void (\w+)", namespace["_ROW_KERNELS"])


def test_the_cupy_backend_compiles_the_backward_kernels_only_where_their_tasks_are_solved():
    source = (ROOT / "minitensor" / "backends" / "cupy_backend.py").read_text()
    assert _cuda_kernels(source) == ["softmax_rows", "layer_norm_rows", "softmax_backward_rows", "layer_norm_backward_rows"]
    stripped = homework.strip_source(source, where="cupy_backend.py")
    assert _cuda_kernels(stripped) == ["softmax_rows", "layer_norm_rows"]
    assert "g_xhat_mean" not in stripped and "def layer_norm_backward(*args, **kwargs):" in stripped
    assert 're.findall(r"__global__ void (\\w+)", _ROW_KERNELS)' in source  # the names compiled follow the source
