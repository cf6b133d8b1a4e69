"""The homework's regions and the student copy: strip a copy and check it gives nothing away (no
line of a solution anywhere in it, the grader whole, the stubs where the solutions were).

Grading is in test_homework_grading.py (the stripped copy and the solution, every task),
test_homework_copies.py (copies broken or edited), test_homework_gradescope.py (the autograder
bundle and hidden tests), test_homework_cheats.py (cheats planted in a copy) and
test_homework_work_cheats.py (values got without doing the work): one job per file, so that the
suite's two processes share them."""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest
from round_trip import ROOT, copy_of

import homework
from homework import testwriting
from homework.tasks import TEST_WRITING


@pytest.fixture(scope="module")
def student(stripped_copy):
    return stripped_copy


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
    assert namespace["softmax_backward"].stripped_task == "softmax_backward"  # backends.accelerator_for passes it by


def test_a_stripped_kernel_leaves_the_op_its_own_code_and_says_so_once(tmp_path):
    """A copy whose student solved every task still has no fast kernels (they go with their tasks):
    under the numba backend, attention runs the op's own code (the student's), with one line that
    says why, instead of stopping at the kernel's stub."""
    keep = [task for task in homework.TASK_NAMES if task != "tiled_attention"]
    copy = homework.strip(tmp_path / "student", keep=keep)
    solved = "minitensor/ops/attention.py"  # the student's own tiled attention: the solution's file
    (copy / solved).write_text((ROOT / solved).read_text())
    script = ("import numpy as np\nimport minitensor as mt\n"
              "q = mt.tensor(np.random.default_rng(0).standard_normal((2, 5, 4)), requires_grad=True)\n"
              "with mt.use_backend('numba'):\n"
              "    for _ in range(3):\n"
              "        mt.ops.Attention.apply(q, q, q, is_causal=True).sum().backward()\n"
              "print('finite', bool(np.isfinite(q.grad).all()))\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=copy, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "finite True" in run.stdout, run.stderr
    for kernel in ("attention", "attention_backward"):
        line = f"the numba backend's {kernel} kernel is part of the homework task tiled_attention"
        assert run.stderr.count(line) == 1, run.stderr


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
    result = subprocess.run([sys.executable, "-m", "homework", "strip", str(tmp_path / "o3"), "--keep", "no_such_task"],
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
    for path in (ROOT / "homework").glob("*.py"):  # the grader, whole: students grade themselves
        assert (student / "homework" / path.name).read_text() == path.read_text()
    assert not list(student.rglob("*.egg-info")) and not (student / "demos" / "figures" / "quick").exists()
    assert json.loads((student / homework.STUDENT_MARK).read_text())["tasks_to_do"] == homework.TASK_NAMES
    numba_source = (student / "minitensor" / "backends" / "numba_backend" / "softmax_rows.py").read_text()
    assert "def _softmax_backward_rows(*args, **kwargs):" in numba_source and "use the numpy backend" in numba_source
    assert "x_hat_i x_hat_j" not in (student / "minitensor" / "ops" / "normalization.py").read_text()  # the derivation
    assert "delta_ij - y_j" not in (student / "minitensor" / "ops" / "softmax.py").read_text()  # went with each task
    for path in homework.marked_files(student):
        for line in path.read_text().splitlines():
            assert not homework.BEGIN.match(line) and not homework.END.match(line), path


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
# The worker's Python, as root
# ----------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="as another user, student code runs as that user")
def test_grade_as_root_runs_as_printed_with_no_worker_python_named(tmp_path):
    """As root under an interpreter another user cannot start (pyenv's under /root), `grade` makes a
    worker Python of its own for the run, says so, and removes it; nothing to set up first. Where
    other users cannot read this environment's packages either, it refuses with the commands that
    install them in a worker Python of its own."""
    from homework import worker_python

    environment = {key: value for key, value in os.environ.items() if key != "MINITENSOR_WORKER_PYTHON"}
    before = set(pathlib.Path(tempfile.gettempdir()).glob("minitensor-worker-python-*"))
    run = subprocess.run([sys.executable, "-m", "homework", "grade", str(ROOT), "--task", "topological_order"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=environment)
    if not worker_python._packages_readable_by_others():  # .ci/run closes the checkout, .venv in it, to others
        assert run.returncode == 2, run.stdout + run.stderr
        assert "nor read this environment's packages" in run.stderr and "-m pip --python " in run.stderr, run.stderr
        return
    assert run.returncode == 0 and "10.0 / 10" in run.stdout, run.stdout + run.stderr
    made = not worker_python._another_user_can_run(sys.executable)
    assert ("a virtual environment made for this run" in run.stderr) == made, run.stderr
    assert set(pathlib.Path(tempfile.gettempdir()).glob("minitensor-worker-python-*")) <= before


def test_with_no_python_another_user_can_run_the_refusal_prints_the_commands_that_make_one(monkeypatch):
    from homework import worker_python
    from homework.isolation import IsolationError

    monkeypatch.delenv("MINITENSOR_WORKER_PYTHON", raising=False)
    monkeypatch.setattr(worker_python.os, "geteuid", lambda: 0)
    monkeypatch.setattr(worker_python, "_another_user_can_run", lambda python, *code: False)
    monkeypatch.setattr(worker_python, "_packages_readable_by_others", lambda: True)
    with pytest.raises(IsolationError) as raised, worker_python.chosen():
        pass
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert f"{version} -m venv --without-pip /opt/minitensor-worker && echo " in str(raised.value)
    assert "--worker-python /opt/minitensor-worker/bin/python" in str(raised.value)
    monkeypatch.setattr(worker_python, "_packages_readable_by_others", lambda: False)  # .venv under a closed folder
    with pytest.raises(IsolationError) as raised, worker_python.chosen():
        pass
    assert "nor read this environment's packages" in str(raised.value)
    assert (f"{version} -m venv --without-pip /opt/minitensor-worker && {sys.executable} -m pip --python "
            f"/opt/minitensor-worker/bin/python install numpy scipy numba matplotlib tqdm threadpoolctl") in str(raised.value)
    with worker_python.chosen("/usr/bin/python3") as python:  # a Python named is used as it is
        assert python == "/usr/bin/python3"


def test_strip_keep_counts_a_task_named_twice_once(tmp_path):
    run = subprocess.run([sys.executable, "-m", "homework", "strip", str(tmp_path / "copy"), "--keep",
                          "topological_order", "topological_order"], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert f": {len(homework.TASKS) - 1} tasks to do" in run.stdout, run.stdout
