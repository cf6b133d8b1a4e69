"""Gradescope: the autograder bundle's run_autograder in a folder laid out as Gradescope lays it out
(on a busy machine), hidden tests and their time limits, results files for submissions that are not
copies, and setup.sh as far as this machine allows."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from round_trip import ROOT, grade

import homework
from homework.grade import result_summary


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
