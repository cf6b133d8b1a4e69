"""What the course site gives students to type works in a student copy (python -m homework
strip): the guide's pages and the students' page (README.student.md, the tasks' pages). The
teacher's "Your first session" (make demo, which runs demos whose tasks are not done yet) is not
part of the students' guide."""

import configparser
import re
import shlex
import subprocess
import sys

import pytest

pytest.importorskip("yaml", reason="the docs extra: pip install -e '.[test,docs]'")

import homework  # noqa: E402
from sitebuild import build as sitebuild  # noqa: E402

if not sitebuild.LEAK_TEST.is_file():
    pytest.skip("a teacher's test: the site is built from the solved repository", allow_module_level=True)


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    return homework.strip(tmp_path_factory.mktemp("copy") / "student")


@pytest.fixture(scope="module")
def docs(student, tmp_path_factory):
    """The pages of the guide and of the students' part of the site, as the site build writes them."""
    docs = tmp_path_factory.mktemp("docs")
    sitebuild.guide_pages(docs)
    sitebuild.task_pages(student, docs)
    return docs


def commands(docs):
    """Every shell command the students' pages show: the lines of their sh/bash blocks, the `$ `
    lines of transcripts, and the lines of plain blocks that start with a command; comments cut."""
    found = set()
    for page in list((docs / "guide").glob("*.md")) + list((docs / "tasks").glob("*.md")):
        for language, block in re.findall(r"^```(\w*)\n(.*?)^```$", page.read_text(), flags=re.S | re.M):
            for line in block.splitlines():
                if line.startswith("$ "):
                    line = line[2:]
                elif language not in ("sh", "bash") and not re.match(r"(python|pip|source|make) ", line):
                    continue
                line = line.split("  #")[0].strip()
                if line:
                    found.add(line)
    return sorted(found)


def test_the_students_guide_leaves_out_the_teachers_first_session(docs):
    assert not (docs / "guide" / f"{sitebuild.slug('Your first session')}.md").exists()
    shown = [line for line in commands(docs) if line.startswith("make ")]
    assert not shown, f"make commands in the students' pages: {shown}"


def test_the_students_install_uses_the_constraints_and_says_what_it_installs(docs, student):
    installs = [line for line in commands(docs) if line.startswith("pip install")]
    assert installs == ["pip install -c constraints.txt -e '.[test]'"], installs
    assert (student / "constraints.txt").is_file()
    setup = configparser.ConfigParser()
    setup.read(student / "setup.cfg")
    assert "test" in setup["options.extras_require"]
    readme = (student / "README.md").read_text()
    assert "CPU PyTorch" not in readme and "torch (CPU)" not in readme  # pip's default PyTorch wheel is not CPU-only
    pinned = {line.split("==")[0].lower() for line in (student / "constraints.txt").read_text().splitlines()
              if "==" in line}
    for package in ("numpy", "scipy", "numba", "matplotlib", "tqdm", "threadpoolctl", "pytest", "hypothesis", "torch"):
        assert package in pinned, package


def test_every_command_of_the_students_guide_works_in_the_student_copy(docs, student):
    """Each command as printed, run in the stripped copy (python is this interpreter); the
    install is checked above rather than run (it downloads PyTorch)."""
    shown = commands(docs)
    assert "python -m venv .venv" in shown and "source .venv/bin/activate" in shown
    checked = []
    for command in shown:
        words = shlex.split(command)
        if command.startswith("pip install"):
            continue  # test_the_students_install_uses_the_constraints_and_says_what_it_installs
        if command == "source .venv/bin/activate":
            assert (student / ".venv" / "bin" / "activate").is_file(), "python -m venv .venv runs first"
            continue
        if command == "python -m homework grade .":
            continue  # every task graded: tests/test_homework_grading.py::test_the_stripped_copy_fails_every_task_...
        if re.fullmatch(r"python -m homework grade \. --task \w+( -v)?", command) and \
                "softmax_backward" not in command:
            continue  # each task's page prints the same two commands: README.student.md's (softmax_backward) are run
        assert words[0] == "python", f"a command in the students' guide that no test runs: {command}"
        result = subprocess.run([sys.executable, *words[1:]], cwd=student, capture_output=True, text=True, timeout=600)
        printed = result.stdout + result.stderr
        assert "Traceback" not in printed, f"{command}\n{printed}"
        if words[1:4] == ["-m", "homework", "grade"]:
            task = words[words.index("--task") + 1]
            assert result.returncode in (0, 1) and task in printed and "tasks passed" in printed, f"{command}\n{printed}"
        elif words[1:4] == ["-m", "homework", "practice"]:  # 1: not every buggy op caught (the starter file)
            assert result.returncode in (0, 1) and "caught" in printed, f"{command}\n{printed}"
        else:
            assert result.returncode == 0, f"{command}\n{printed}"
        checked.append(command)
    assert "python -m venv .venv" in checked and any("grade . --task" in c for c in checked)
