"""The homework round trip: strip a student copy, check it gives nothing away, grade it (and
copies that cheat, break or hang) with the teacher's tests, and bundle a Gradescope autograder.

Grading runs pytest in a subprocess, so these tests grade whole copies only where they must (the
stripped copy, the solution) and one or two tasks elsewhere."""

import io
import json
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from minitensor import homework
from minitensor.homework import testwriting
from minitensor.homework.grade import result_summary
from minitensor.homework.strip import copy_environment
from minitensor.homework.tasks import TEST_WRITING

ROOT = pathlib.Path(__file__).resolve().parent.parent


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
    assert len([name for name in homework.TASK_NAMES if name.startswith("demo_")]) >= 6
    graded_tests_of_tests = (ROOT / "tests" / "test_testwriting_graded.py").read_text()
    for name in homework.TASK_NAMES:
        if name in TEST_WRITING:  # graded by the chaffs the student's tests catch (one test per chaff)
            assert "testwriting.task_of(op)" in graded_tests_of_tests and TEST_WRITING[name] in testwriting.TARGETS
        else:
            assert f'@task("{name}")' in tests, name


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
    _commit_all(repo)
    with pytest.raises(homework.HomeworkError, match=r"minitensor/broken\.py:2: the region of task 'kv_cache' is never closed"):
        homework.strip(tmp_path / "out2", root=repo)
    assert not (tmp_path / "out2").exists()
    result = subprocess.run([sys.executable, "-m", "minitensor.homework", "strip", str(tmp_path / "o3"), "--keep", "no_such_task"],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "unknown task(s) 'no_such_task'" in result.stderr and "Traceback" not in result.stderr


def _commit_all(repo):
    for command in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course"]):
        subprocess.run(["git", "-C", str(repo), *command], check=True, capture_output=True)


def test_strip_copies_what_git_tracks_and_never_into_the_repository(tmp_path):
    repo = tmp_path / "repo"
    for name in ("minitensor", "models", "demos"):
        (repo / name).mkdir(parents=True)
        (repo / name / "__init__.py").write_text("")
    (repo / "minitensor" / "ops.py").write_text("def f():\n    # BEGIN SOLUTION kv_cache\n    return 1\n    # END SOLUTION\n")
    for name in ("attention", "layernorm", "transformer", "recurrent"):  # what strip checks imports
        (repo / "models" / f"{name}.py").write_text("")
    _commit_all(repo)
    (repo / "hidden").mkdir()  # what a teacher keeps beside the course, untracked
    (repo / "hidden" / "test_secret.py").write_text("SECRET")
    (repo / "autograder.zip").write_bytes(b"PK")
    (repo / "student").mkdir()
    (repo / "student" / "old.txt").write_text("an earlier copy")
    copy = homework.strip(tmp_path / "copy", root=repo)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file()) == [
        ".minitensor-student", "demos/__init__.py", "minitensor/__init__.py", "minitensor/ops.py", "models/__init__.py",
        "models/attention.py", "models/layernorm.py", "models/recurrent.py", "models/transformer.py"]
    assert "return 1" not in (copy / "minitensor" / "ops.py").read_text()
    with pytest.raises(homework.HomeworkError, match=r"is inside the repository .*; write the copy outside it"):
        homework.strip(repo / "student2", root=repo)
    assert not (repo / "student2").exists()
    (repo / ".git").rename(tmp_path / "git")  # not a repository: a manifest says what to copy
    with pytest.raises(homework.HomeworkError, match="is not a git repository.*--manifest FILE"):
        homework.strip(tmp_path / "copy2", root=repo)
    manifest = tmp_path / "manifest.txt"
    listed = ["minitensor/__init__.py", "demos/__init__.py"] + [str(p.relative_to(repo)) for p in (repo / "models").glob("*.py")]
    manifest.write_text("# the course\n" + "\n".join(listed) + "\n")
    copy = homework.strip(tmp_path / "copy3", root=repo, manifest=manifest)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*.py")) == sorted(listed)


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
    for path in (ROOT / "minitensor" / "homework").glob("*.py"):  # the grader, whole: students grade themselves
        assert (student / "minitensor" / "homework" / path.name).read_text() == path.read_text()
    assert not list(student.rglob("*.egg-info")) and not (student / "demos" / "figures" / "quick").exists()
    assert json.loads((student / homework.STUDENT_MARK).read_text())["tasks_to_do"] == homework.TASK_NAMES
    numba_source = (student / "minitensor" / "backends" / "numba_backend" / "softmax_rows.py").read_text()
    assert "def _softmax_backward_rows(*args, **kwargs):" in numba_source and "use the numpy backend" in numba_source
    assert "x_hat_i x_hat_j" not in (student / "minitensor" / "ops" / "normalization.py").read_text()  # the derivation
    assert "delta_ij - y_j" not in (student / "minitensor" / "ops" / "softmax.py").read_text()  # went with each task
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
    assert all(row.total >= 1 for row in rows) and "all tests passed" in table


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
    result = subprocess.run([sys.executable, "-m", "minitensor.homework", "grade", str(tmp_path / "no_such_folder")],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "is not a folder" in result.stderr and "Traceback" not in result.stderr


# ----------------------------------------------------------------------------
# Gradescope: hidden tests, time limits, the autograder bundle
# ----------------------------------------------------------------------------


HIDDEN = (
    "import pytest\n\n"
    "def probe_spin():\n"
    "    while True:\n"
    "        pass\n\n"
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


@pytest.fixture
def hidden(tmp_path):
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "test_hidden.py").write_text(HIDDEN)
    return folder


def test_a_gradescope_autograder_run_writes_a_valid_results_file(hidden, tmp_path, worker_python):
    """bundle's run_autograder, in a folder laid out as Gradescope lays it out; the teacher's
    repository is not changed by strip, grade or bundle."""
    before = _snapshot(ROOT)
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["kv_cache", "softmax_backward"], extra=hidden, timeout=20)
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
        zipped.extractall(root / "source")
    assert {"setup.sh", "run_autograder", "requirements-grader.txt", "requirements-student.txt",
            "grader/minitensor_grader/plugin.py", "grader/minitensor_grader/worker.py", "tests/test_homework_tasks.py",
            "tests/_grading.py", "hidden/test_hidden.py"} <= set(names)
    assert "torch==" in (root / "source" / "requirements-grader.txt").read_text()
    assert "torch" not in (root / "source" / "requirements-student.txt").read_text()
    (root / "submission").symlink_to(ROOT)  # a student who solved everything
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, WORKER_PYTHON=worker_python)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]  # a busy machine
    try:
        subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, check=True,
                       timeout=600)
    finally:
        for process in busy:
            process.kill()
            process.wait()
    document = json.loads((root / "results" / "results.json").read_text())
    # a correct solution loses nothing to a busy machine (each test's clock starts when its worker is ready)
    public = [test for test in document["tests"] if test["visibility"] == "visible"]
    assert all(test["score"] == test["max_score"] for test in public), [t for t in public if t["score"] < t["max_score"]]

    assert {"score", "execution_time", "output", "visibility", "stdout_visibility", "tests"} <= set(document)
    for test in document["tests"]:
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test)
    by_name = {test["name"].split(": ", 1)[1]: test for test in document["tests"]}
    hidden_tests = [test for test in document["tests"] if test["visibility"] == "after_published"]
    assert len(hidden_tests) == 3 and all(test["name"].endswith("(hidden)") for test in hidden_tests)
    assert all("secret" not in test["output"] for test in document["tests"])  # hidden output is withheld
    assert by_name["test_a_student_loop_that_never_ends (hidden)"]["score"] == 0
    assert by_name["test_kv_cache_generation_equals_full_attention"]["score"] > 0  # graded despite the hang
    assert by_name["test_softmax_backward[-1]"]["visibility"] == "visible"
    assert document["score"] == round(sum(test["score"] for test in document["tests"]), 4) < 20
    assert round(sum(test["max_score"] for test in document["tests"]), 4) == 20.0
    assert document["output"].startswith("public tests passed\n")  # before publication: nothing of the hidden ones
    assert "kv_cache: 1/1 public tests passed" in document["output"]

    # the teacher sees why each hidden test failed; the hang failed alone, after 5 s
    ok, rows, table = grade(ROOT, tasks=["kv_cache"], extra=hidden, timeout=5, verbose=True)
    assert rows[0].passed == 2 and rows[0].total == 4
    assert re.search(r"test_a_student_loop_that_never_ends\ntimed out after 5 s\n", table)
    assert "the secret the student must not read early" in table
    assert _snapshot(ROOT) == before


def test_the_readmes_hidden_test_grades_as_shown(tmp_path, worker_python):
    readme = (ROOT / "README.md").read_text()
    example = next(block for block in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "probe_cache_length" in block)
    (tmp_path / "hidden").mkdir()
    (tmp_path / "hidden" / "test_readme_example.py").write_text(example)
    ok, rows, table = grade(ROOT, tasks=["kv_cache"], extra=tmp_path / "hidden", python=worker_python, verbose=True)
    assert ok and rows[0].total == 2 and rows[0].passed == 2, table


def test_a_full_pass_reads_public_tests_passed_when_hidden_tests_exist():
    solved_rows = [homework.Row("kv_cache", 1, 1, 10.0, "passed")]
    assert result_summary(solved_rows, {"tests": {}}, hidden_exist=True) == "public tests passed"
    assert result_summary(solved_rows, {"tests": {}}, hidden_exist=False) == "all tests passed"


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


# ----------------------------------------------------------------------------
# Cheats: each planted in a copy must score exactly what the copy earns without it
# ----------------------------------------------------------------------------


CHEAT_TASKS = ["topological_order", "softmax_backward", "demo_multihead"]  # one solved, two where cheats aim

CHEATS = {
    # the grader's own pytest, made to pass every test, from the package's __init__
    "patch pytest": "import sys\ntry:\n    import _pytest.python\n    _pytest.python.Function.runtest = lambda self: None\n"
                    "except ImportError:\n    pass\n",
    # every comparison helper made to pass
    "patch numpy and the helpers": "import numpy\nnumpy.allclose = lambda *a, **k: True\n"
                                   "numpy.testing.assert_allclose = lambda *a, **k: None\n"
                                   "numpy.array_equal = lambda *a, **k: True\n",
    # results files rewritten when the process ends, and by a process that outlives the grader
    "atexit and detached rewrites": (
        "import atexit, json, os, time\n"
        "def _forge():\n"
        "    for top in ('/tmp', os.environ.get('MINITENSOR_FORGE', '/tmp')):\n"
        "        for folder, _, names in os.walk(top):\n"
        "            for name in names:\n"
        "                if name == 'results.json':\n"
        "                    try:\n"
        "                        open(os.path.join(folder, name), 'w').write(json.dumps({'score': 190, 'tests': []}))\n"
        "                    except OSError:\n"
        "                        pass\n"
        "atexit.register(_forge)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(8)\n"
        "        _forge()\n"
        "    os._exit(0)\n"),
    # the grader's files read from the worker: the tests, hidden ones and results, into feedback
    "read the grader's files": (
        "import os\n"
        "def _loot():\n"
        "    found = []\n"
        "    for folder, folders, names in os.walk('/tmp'):\n"
        "        folders[:] = [f for f in folders if f not in ('.venv', '.git', 'site-packages', '__pycache__')]\n"
        "        found += [os.path.join(folder, n) for n in names if n.startswith('test_') or n == 'results.json']\n"
        "    texts = []\n"
        "    for path in found:\n"
        "        try:\n"
        "            texts.append(open(path, errors='replace').read())\n"
        "        except Exception:\n"
        "            pass\n"
        "    return texts\n"
        "_LOOT = _loot()\n"
        "if any('SECRET_MARK' in text for text in _LOOT):\n"
        "    raise RuntimeError('SECRET_MARK leaked')\n"),
    # a lying ndarray subclass as every tensor's data
    "a lying ndarray subclass": (
        "import numpy as _np\n"
        "class _Liar(_np.ndarray):\n"
        "    def __eq__(self, other):\n        return _np.ones(self.shape, bool)\n"
        "    def __array_ufunc__(self, *args, **kwargs):\n        return _np.zeros(()).view(_Liar)\n"
        "from minitensor.ops import Softmax as _Softmax\n"
        "_Softmax.backward = staticmethod(lambda ctx, grad: _np.zeros_like(grad).view(_Liar))\n"),
    # PyTorch's autograd doing the student's backward
    "torch in student code": (
        "def _torch_softmax_backward(y, dy, axis=-1):\n"
        "    import torch\n"
        "    t = torch.tensor(y).log().requires_grad_()\n"
        "    torch.softmax(t, axis).backward(torch.tensor(dy))\n"
        "    return t.grad.numpy()\n"
        "from minitensor.ops import Softmax as _Softmax\n"
        "_Softmax.backward = staticmethod(lambda ctx, grad: _torch_softmax_backward(ctx.saved_tensors[0], grad, ctx.axis))\n"),
    # the process ended from inside one task
    "os._exit in a task": "import os\nfrom minitensor.ops import Softmax as _Softmax\n"
                          "_Softmax.backward = staticmethod(lambda *a, **k: os._exit(0))\n",
    # the grader killed from the worker, before it can write a result
    "kill the grader": "import os, signal\n"
                       "try:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n",
    # answers forged on the wire: a frame saying 'passed' written to every descriptor, ahead of any request
    "forge the wire": (
        "import os, struct, numpy as _np\n"
        "def _frame():\n"
        "    import json\n"
        "    header = json.dumps({'d': {'value': {'d': {'out': {'v': 0.0}}}}}).encode()\n"
        "    body = struct.pack('<QI', len(header), 0) + header\n"
        "    return struct.pack('<Q', len(body)) + body\n"
        "for _fd in range(3, 64):\n"
        "    try:\n        os.write(_fd, _frame() * 4)\n    except OSError:\n        pass\n"),
    # a solved checkout found on the disk (the editable install's metadata names one; a walk finds others),
    # its softmax backward taken from there
    "a solved checkout on the disk": (
        "import ast as _ast, json as _json, os as _os\n"
        "def _solved_file():\n"
        "    roots = []\n"
        "    try:\n"
        "        import importlib.metadata as _m\n"
        "        roots.append(_json.loads(_m.distribution('minitensor').read_text('direct_url.json'))['url'][7:])\n"
        "    except Exception:\n"
        "        pass\n"
        "    for root in roots + ['/work', '/home', '/root', '/opt', '/srv', '/tmp']:\n"
        "        for folder, folders, names in _os.walk(root):\n"
        "            folders[:] = [f for f in folders if f not in ('.git', 'site-packages', '__pycache__', 'proc')]\n"
        "            if 'softmax.py' in names:\n"
        "                try:\n"
        "                    text = open(_os.path.join(folder, 'softmax.py')).read()\n"
        "                except OSError:\n"
        "                    continue\n"
        "                if 'BEGIN SOLUTION softmax_backward' in text:\n"
        "                    return text\n"
        "_text = _solved_file()\n"
        "if _text:\n"
        "    import numpy as _np\n"
        "    from minitensor import backends as _backends\n"
        "    from minitensor.ops import Softmax as _Softmax\n"
        "    _tree = _ast.parse(_text)\n"
        "    _class = next(n for n in _tree.body if isinstance(n, _ast.ClassDef) and n.name == 'Softmax')\n"
        "    _def = [n for n in _class.body if isinstance(n, _ast.FunctionDef) and n.name == 'backward']\n"
        "    _def[0].decorator_list = []\n"
        "    _space = {'np': _np, 'backends': _backends}\n"
        "    exec(compile(_ast.Module(body=_def, type_ignores=[]), 'solved', 'exec'), _space)\n"
        "    _Softmax.backward = staticmethod(_space['backward'])\n"),
    # the grader's own copy of the comparisons rewritten, wherever a worker can reach it
    "rewrite the grader's comparisons": (
        "import os as _os\n"
        "for _top in ('/tmp', '/var/tmp', '/autograder'):\n"
        "    for _folder, _folders, _names in _os.walk(_top):\n"
        "        if '_grading.py' in _names:\n"
        "            try:\n"
        "                open(_os.path.join(_folder, '_grading.py'), 'a').write(\n"
        "                    '\\ndef assert_close(*a, **k):\\n    pass\\ndef assert_matches(*a, **k):\\n    pass\\n')\n"
        "            except OSError:\n"
        "                pass\n"),
    # PyTorch found through another process's command line, the import guard taken out
    "PyTorch through /proc": (
        "import os as _os, sys as _sys\n"
        "_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != '_Refuse']\n"
        "try:\n"
        "    _pids = [p for p in _os.listdir('/proc') if p.isdigit()]\n"
        "except OSError:\n"
        "    _pids = []\n"
        "for _pid in _pids:\n"
        "    try:\n"
        "        _exe = open(f'/proc/{_pid}/cmdline', 'rb').read().split(b'\\0')[0].decode()\n"
        "    except OSError:\n"
        "        continue\n"
        "    _site = _os.path.join(_os.path.dirname(_os.path.dirname(_exe)), 'lib', 'python3.11', 'site-packages')\n"
        "    if _os.path.isdir(_os.path.join(_site, 'torch')) and _site not in _sys.path:\n"
        "        _sys.path.append(_site)\n"
        "def _by_torch(y, dy, axis=-1):\n"
        "    import torch\n"
        "    t = torch.tensor(y).log().requires_grad_()\n"
        "    torch.softmax(t, axis).backward(torch.tensor(dy))\n"
        "    return t.grad.numpy()\n"
        "from minitensor.ops import Softmax as _Softmax\n"
        "_Softmax.backward = staticmethod(lambda ctx, grad: _by_torch(ctx.saved_tensors[0], grad, ctx.axis))\n"),
}


# The hidden tests' secret: drawn per run, so only the hidden test file holds it (a copy of this
# repository lying readable on the machine, this file included, does not).
SECRET = f"secret-{secrets.token_hex(8)}"


def _plant(copy, name):
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n# a cheat\n" + CHEATS[name].replace("SECRET_MARK", SECRET))
    # the copy's own references and demo code edited too: neither is what judges
    (copy / "tests" / "_grading.py").write_text("def assert_close(*a, **k):\n    pass\n")
    demo = copy / "demos" / "multihead.py"
    demo.write_text(demo.read_text().replace("checks(", "(lambda *a: True)("))
    stub = [line for line in demo.read_text().splitlines() if "NotImplementedError" in line]
    if stub:
        demo.write_text(demo.read_text().replace(stub[0], "    return 1088"))  # the seed's number, for d = 16


@pytest.fixture(scope="module")
def cheat_base(tmp_path_factory, worker_python):
    """A copy with the first task solved, and what it earns on three tasks."""
    copy = homework.strip(tmp_path_factory.mktemp("base") / "student", keep=CHEAT_TASKS[:1])
    ok, rows, table = grade(copy, tasks=CHEAT_TASKS, python=worker_python)
    assert [row.points for row in rows] == [10.0, 0.0, 0.0], table
    return copy, rows


@pytest.mark.parametrize("cheat", list(CHEATS))
def test_a_planted_cheat_scores_what_the_copy_earns_without_it(cheat, cheat_base, tmp_path, worker_python, hidden):
    if cheat in ("read the grader's files", "kill the grader") and os.geteuid() != 0:
        pytest.skip("without root, student code runs as the grading user and can read and signal what it can (README)")
    base, base_rows = cheat_base
    copy = copy_of(base, tmp_path)
    _plant(copy, cheat)
    (hidden / "test_hidden.py").write_text(HIDDEN.replace("the secret", SECRET))
    results = tmp_path / "results.json"
    start = time.monotonic()
    ok, rows, table = grade(copy, tasks=CHEAT_TASKS, extra=hidden, gradescope=results, python=worker_python,
                            timeout=30, verbose=True)
    document = json.loads(results.read_text())
    time.sleep(max(0.0, 9 - (time.monotonic() - start)))  # the detached process would have written by now
    assert json.loads(results.read_text()) == document
    assert [row.points for row in rows] == [row.points for row in base_rows], table
    assert SECRET not in results.read_text() and SECRET not in table
    assert document["extra_data"]["isolation"] == _levels_here()[0]  # the strongest level here, not a fallback
    if cheat == "torch in student code":
        assert "task softmax_backward: student code may not import torch while it is graded" in table
    if cheat == "os._exit in a task":
        assert "ended the grading process (exit status 0) during this test" in table


@pytest.mark.parametrize("version, brings_python", [("3.10.12", True), ("3.11.9", False)])
def test_setup_brings_a_python_of_311_or_newer_updates_apt_first_and_takes_pytorchs_cpu_wheel(
        tmp_path, version, brings_python):
    """setup.sh as far as this machine allows: on a PATH whose only python3 is a stand-in of
    Gradescope's default image (3.10) or of a newer one, with its commands printed, not run."""
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["softmax_backward"])
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(tmp_path / "source")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("dirname", "grep"):
        (tools / tool).symlink_to(shutil.which(tool))
    old = version.startswith("3.10")
    (tools / "python3").write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python {version}' && exit 0\n"
                                   f"exit {1 if old else 0}\n")
    (tools / "python3").chmod(0o755)
    run = subprocess.run(["/bin/bash", str(tmp_path / "source" / "setup.sh")], capture_output=True, text=True,
                         env={"PATH": str(tools), "MINITENSOR_SETUP_DRY_RUN": "1"}, timeout=60)
    assert run.returncode == 0, run.stderr
    commands = [line[2:] for line in run.stdout.splitlines() if line.startswith("+ ")]
    assert commands[0] == "apt-get update"  # before any install: a fresh image has no package lists
    assert ("add-apt-repository -y ppa:deadsnakes/ppa" in commands) == brings_python
    python = "python3.11" if brings_python else str(tools / "python3")
    assert f"{python} -m venv /opt/minitensor/grader" in commands and f"{python} -m venv /opt/minitensor/student" in commands
    torch_line = next(line for line in commands if "torch==" in line)
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch_line and "torch==2.13.0" in torch_line
    assert commands.index("apt-get install -y python3.11 python3.11-venv" if brings_python
                          else "apt-get install -y python3-venv") > 0
    # the grader's environment (PyTorch) readable by root alone; the student's by the worker's user
    assert "chmod -R go-rwx /opt/minitensor/grader" in commands and "chmod -R a+rX /opt/minitensor/student" in commands
    assert "chmod -R a+rX /opt/minitensor" not in commands and "apt-get install -y bubblewrap" in commands


def _levels_here():
    """Every isolation level this machine can grade at, the uid floor where it can keep the
    teacher's repository out (it refuses to grade where other users can read it)."""
    from minitensor.homework import isolation

    levels = [level for level, present in [("bubblewrap", isolation.bubblewrap_path()),
                                           ("landlock", isolation.landlock_abi())] if present]
    floor = "uid" if os.geteuid() == 0 else "none"
    return levels + [pytest.param(floor, marks=pytest.mark.skipif(
        floor == "uid" and os.stat(ROOT).st_mode & 0o005 != 0,
        reason="other users can read this repository, so the uid level refuses to grade here "
               "(tests/test_homework_isolation.py checks the refusal)"))]


@pytest.mark.parametrize("level", _levels_here())
def test_cheats_planted_together_score_what_the_copy_earns_through_run_autograder(level, cheat_base, tmp_path,
                                                                                    worker_python, hidden,
                                                                                    monkeypatch):
    monkeypatch.setenv("MINITENSOR_ISOLATION_ONLY", level)
    base, base_rows = cheat_base
    (hidden / "test_hidden.py").write_text(HIDDEN.replace("the secret", SECRET))
    root = tmp_path / "autograder"
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=CHEAT_TASKS, extra=hidden, timeout=30,
                              isolation_at_least="none")
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(root / "source")
    submission = copy_of(base, root)
    (submission.parent / "student").rename(root / "submission")
    for cheat in CHEATS:  # the last one to replace softmax_backward wins; each runs at import
        if cheat not in ("read the grader's files", "kill the grader") or os.geteuid() == 0:
            _plant(root / "submission", cheat)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, WORKER_PYTHON=worker_python)
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, check=True, timeout=600)
    document = json.loads((root / "results" / "results.json").read_text())
    time.sleep(9)  # the detached process would have written by now
    assert json.loads((root / "results" / "results.json").read_text()) == document
    assert document["score"] == sum(row.points for row in base_rows), document["output"]
    assert document["extra_data"]["isolation"] == level


# ----------------------------------------------------------------------------
# Cheats that get the values without doing the work (issue 30, point 6)
# ----------------------------------------------------------------------------

# Every backward of an op taken by central differences of the op's own forward, one input
# element at a time (what a student who skipped the derivation writes); exact enough for every
# value test, and O(size^2).
NUMERICAL_BACKWARD = '''
import numpy as _np
from minitensor import autograd as _ag
from minitensor.ops import elementwise as _el, linalg as _la, reduce as _re, softmax as _sm
from models import layernorm as _ln

_plain_apply = _ag.Function.__dict__["apply"].__func__


def _remembering_apply(cls, *inputs, **options):
    out = _plain_apply(cls, *inputs, **options)
    if out.grad_fn is not None and cls in _NUMERICAL:
        out.grad_fn.__dict__["_inputs"] = ([_np.array(t.data, copy=True) for t in inputs], options)
    return out


_ag.Function.apply = classmethod(_remembering_apply)


def _numerical(cls):
    def backward(ctx, grad):
        arrays, options = ctx.__dict__["_inputs"]

        def f(values):
            return _np.asarray(cls.forward(_ag.Context(cls, ctx.needs_input_grad), *values, **options))

        grads = []
        for i, a in enumerate(arrays):
            if not ctx.needs_input_grad[i] or a.dtype.kind != "f":
                grads.append(None)
                continue
            g = _np.zeros_like(a)
            for j in range(a.size):
                h = 1e-6 * max(1.0, abs(float(a.flat[j])))
                plus, minus = [v.copy() for v in arrays], [v.copy() for v in arrays]
                plus[i].flat[j] += h
                minus[i].flat[j] -= h
                g.flat[j] = _np.sum((f(plus) - f(minus)) * grad) / (2 * h)
            grads.append(g)
        return tuple(grads) if len(grads) > 1 else grads[0]

    cls.backward = staticmethod(backward)


_NUMERICAL = (_el.Mul, _el.Div, _el.Exp, _el.Tanh, _la.MatMul, _re.Sum, _re.Mean, _re.Var, _re.Max, _re.Min,
              _sm.Softmax, _ln.LayerNormFunction)
for _cls in _NUMERICAL:
    _numerical(_cls)
'''

# Softmax's and layer norm's backward through the engine's autograd of the composed forward (the
# kernels too, rebuilding the input from what they are given); attention materialised, (T, T)
# scores and all, its backward through the engine; the demo's counts stored for the seed's model.
ENGINE_BACKWARD = '''
import numpy as _np
import minitensor as _mt
from minitensor.ops import attention as _at
from minitensor.ops import normalization as _lnf
from minitensor.ops import softmax as _sm


def _softmax_grad(y, dy, axis):
    with _mt.enable_grad():
        x = _mt.tensor(_np.log(y), requires_grad=True)
        e = x.exp()
        (e / e.sum(axis=axis, keepdims=True)).backward(dy)
    return x.grad


_sm.Softmax.backward = staticmethod(lambda ctx, grad: _softmax_grad(ctx.saved_tensors[0], grad, ctx.axis))


def _layer_norm_grad(dy, x, weight, mean, rstd):
    from models import layernorm as _ln

    eps = float(_np.mean(1 / rstd**2 - x.var(axis=-1, keepdims=True)))
    with _mt.enable_grad():
        tensors = [_mt.tensor(a, requires_grad=True) for a in (x, weight, _np.zeros_like(weight))]
        _ln.layer_norm_composed(*tensors, eps=eps).backward(dy)
    return tensors[0].grad, tensors[1].grad, tensors[2].grad


def _layer_norm_backward(ctx, grad):
    x, weight, mean, rstd = ctx.saved_tensors
    dx, dweight, dbias = _layer_norm_grad(grad, x, weight, mean, rstd)
    return dx if weight is None else (dx, dweight, dbias)


_lnf.LayerNormFunction.backward = staticmethod(_layer_norm_backward)


def _scores(q, k, mask, scale, is_causal):
    scale = 1 / _np.sqrt(q.shape[-1]) if scale is None else scale
    hidden = _np.zeros((q.shape[-2], k.shape[-2]), bool) if mask is None else _np.asarray(mask, bool)
    if is_causal:
        hidden = hidden | (_np.arange(k.shape[-2])[None, :] - _np.arange(q.shape[-2])[:, None]
                           > k.shape[-2] - q.shape[-2])
    return scale, hidden


def _full_attention(q, k, v, mask=None, scale=None, is_causal=False):
    scale, hidden = _scores(q, k, mask, scale, is_causal)
    s = _np.where(hidden, -_np.inf, q @ k.swapaxes(-1, -2) * scale)
    m = s.max(axis=-1)
    w = _np.exp(s - m[..., None])
    return (w / w.sum(axis=-1, keepdims=True)) @ v, (m, w.sum(axis=-1))


def _full_attention_backward(q, k, v, out, stats, dout, mask=None, scale=None, is_causal=False):
    scale, hidden = _scores(q, k, mask, scale, is_causal)
    with _mt.enable_grad():
        tq, tk, tv = (_mt.tensor(a, requires_grad=True) for a in (q, k, v))
        weights = ((tq @ tk.swapaxes(-1, -2)) * scale).softmax(axis=-1, mask=_np.broadcast_to(hidden, q.shape[:-1] + k.shape[-2:-1]))
        (weights @ tv).backward(dout)
    return tq.grad, tk.grad, tv.grad


def _attention_forward(ctx, q, k, v, mask=None, scale=None, is_causal=False):
    out, stats = _full_attention(q, k, v, mask, scale, is_causal)
    ctx.save_for_backward(q, k, v, out, stats)
    ctx.mask, ctx.scale, ctx.is_causal = mask, scale, is_causal
    return out


def _attention_backward(ctx, grad):
    q, k, v, out, stats = ctx.saved_tensors
    return _full_attention_backward(q, k, v, out, stats, grad, ctx.mask, ctx.scale, ctx.is_causal)


_at.Attention.forward, _at.Attention.backward = staticmethod(_attention_forward), staticmethod(_attention_backward)
'''

STORED_COUNTS = ("    return {f'multi-head ({heads} KV heads)': 2621440, 'grouped-query (8 KV heads)': 327680, "
                 "'multi-query (1 KV head)': 40960, 'latent (512 + 64 numbers, MLA)': 92160}")


def _plant_code(copy, code):
    init = copy / "minitensor" / "__init__.py"
    init.write_text(init.read_text() + "\n# a cheat\n" + code)


def test_backwards_taken_numerically_earn_nothing(tmp_path, worker_python):
    """Five backward tasks by central differences of each op's own forward: the copy's score
    without them (each task's work test stops the call at its budget, and the task's other
    tests do not count)."""
    tasks = ["topological_order", "elementwise_backward", "matmul_backward", "reductions", "softmax_backward",
             "layer_norm_backward"]
    copy = homework.strip(tmp_path / "student", keep=tasks[:1])
    _plant_code(copy, NUMERICAL_BACKWARD)
    ok, rows, table = grade(copy, tasks=tasks, python=worker_python, timeout=30,
                            verbose=True)
    assert [row.points for row in rows] == [10.0] + [0.0] * 5, table
    assert "the budget of this call" in table and "not counted: this task's work test failed" in table


def test_backwards_through_the_engine_full_attention_and_stored_counts_earn_nothing(tmp_path, worker_python):
    """Softmax's and layer norm's backward through the engine's autograd of their composed
    forward, attention with its (T, T) scores, and the seed's counts stored: the score of the copy
    without them (the earlier tasks the cheats lean on solved)."""
    solved = ["topological_order", "elementwise_backward", "unbroadcast", "matmul_backward", "reductions"]
    tasks = solved + ["softmax_backward", "layer_norm_backward", "tiled_attention", "demo_kv_cache"]
    copy = homework.strip(tmp_path / "student", keep=solved)
    _plant_code(copy, ENGINE_BACKWARD)
    demo = copy / "demos" / "kv_cache.py"
    stub = next(line for line in demo.read_text().splitlines() if "NotImplementedError" in line)
    demo.write_text(demo.read_text().replace(stub, STORED_COUNTS))  # the seed's numbers, whatever the model
    ok, rows, table = grade(copy, tasks=tasks, python=worker_python, timeout=30,
                            verbose=True)
    assert [row.points for row in rows] == [10.0] * 5 + [0.0] * 4, table
    assert "ran the engine's ops" in table and "MemoryError" in table
