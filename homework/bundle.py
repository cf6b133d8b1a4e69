"""Bundle: the autograder zip for Gradescope (or any CI)."""

import configparser
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

from .grade import GRADED, GRADER_PACKAGE, graded_files, pytest_ini
from .strip import SOLUTION_ROOT
from .isolation import LEVELS
from .tasks import TASK_NAMES, HomeworkError, check_task_names

HERE = pathlib.Path(__file__).resolve().parent

GRADER_NEEDS = ("numpy", "torch", "pytest", "hypothesis")  # what the grader's process imports: no minitensor
AUTOGRADER = HERE / "autograder"  # setup.sh and run_autograder


def _locked(root):
    """{package: 'package==version'} from constraints.txt."""
    locked = {}
    constraints = root / "constraints.txt"
    if constraints.is_file():
        for line in constraints.read_text().splitlines():
            if "==" in line and not line.lstrip().startswith("#"):
                locked[line.split("==")[0].strip().lower()] = line.strip()
    return locked


def _requirements(root):
    """(the grader's requirements, the student environment's): the grader gets what its tests
    import (PyTorch among them), student code gets minitensor's runtime requirements and no
    PyTorch; each at the exact version constraints.txt locks, so Gradescope grades with the
    packages the teacher's solution was tested with."""
    ini = configparser.ConfigParser()
    ini.read(root / "setup.cfg")
    runtime = ini.get("options", "install_requires", fallback="").split()
    test = ini.get("options.extras_require", "test", fallback="").split()
    locked = _locked(root)

    def pinned(requirements):
        lines = [locked.get(re.split(r"[<>=!~ ]", r, maxsplit=1)[0].lower(), r) for r in requirements]
        return "\n".join(lines) + "\n"

    grader = [r for r in runtime + test if re.split(r"[<>=!~ ]", r, maxsplit=1)[0].lower() in GRADER_NEEDS]
    return pinned(grader), pinned(runtime)


def bundle(out, tasks=None, extra=None, timeout=60.0, root=None, isolation_at_least="landlock"):
    """Write the autograder zip for an assignment (a subset of TASKS, in course order): setup.sh,
    run_autograder, the two requirements files, the grader (this package) and the teacher's tests.
    The autograder refuses to grade with student code isolated less than `isolation_at_least`."""
    root = pathlib.Path(root or SOLUTION_ROOT)
    tasks = list(tasks or TASK_NAMES)
    check_task_names(tasks, "bundle --tasks")
    if isolation_at_least not in LEVELS:
        raise HomeworkError(f"bundle --isolation: {isolation_at_least!r} is not a level; "
                            f"choose one of {', '.join(LEVELS)}")
    tasks = [name for name in TASK_NAMES if name in tasks]
    if extra is not None and (not pathlib.Path(extra).is_dir() or not graded_files(pathlib.Path(extra))):
        raise HomeworkError(f"bundle --extra: {extra} is not a folder with test_*.py files of @pytest.mark.task tests")
    out = pathlib.Path(out)
    if not out.parent.is_dir():
        raise HomeworkError(f"bundle: the folder of {out} does not exist")
    grader_requirements, student_requirements = _requirements(root)
    run = (AUTOGRADER / "run_autograder").read_text()
    run = run.replace("__EXTRA__", "--extra hidden " if extra else "").replace("__TASKS__", " ".join(tasks))
    members = {
        "setup.sh": (AUTOGRADER / "setup.sh").read_text(),
        "run_autograder": run.replace("__TIMEOUT__", f"{timeout:g}").replace("__ISOLATION__", isolation_at_least),
        "requirements-grader.txt": grader_requirements,
        "requirements-student.txt": student_requirements,
        "assignment.json": json.dumps({"tasks": tasks, "timeout": timeout, "hidden_tests": extra is not None,
                                       "isolation_at_least": isolation_at_least}, indent=1) + "\n",
    }
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.parent != AUTOGRADER:
            members[f"grader/{GRADER_PACKAGE}/{path.relative_to(HERE).as_posix()}"] = path.read_text()
    for folder, prefix in [(root / "tests", "tests/")] + ([(pathlib.Path(extra), "hidden/")] if extra else []):
        for path in sorted(folder.rglob("*")):
            helper = not path.name.startswith("test_")  # conftest.py, _grading.py
            if (path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".cfg", ".ini", ".json")
                    and (helper or GRADED.search(path.read_text()))):
                members[prefix + str(path.relative_to(folder))] = path.read_text()
    members["tests/pytest.ini"] = pytest_ini(root / "tests")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
    return out


def rehearse(archive, submission, python=None, keep=None):
    """Run the autograder `archive` on `submission` here, laid out as Gradescope lays it out
    (source/, submission/, results/ under one root), with this interpreter as the grader's and
    `python` as the student environment's; return the results.json it wrote."""
    archive, submission = pathlib.Path(archive), pathlib.Path(submission)
    if not zipfile.is_zipfile(archive):
        raise HomeworkError(f"rehearse: {archive} is not an autograder zip (write one with `bundle`)")
    if not submission.is_dir():
        raise HomeworkError(f"rehearse: {submission} is not a folder")
    if keep is not None and pathlib.Path(keep).exists():
        raise HomeworkError(f"rehearse --keep: {keep} exists; give a new folder")
    root = pathlib.Path(keep) if keep else pathlib.Path(tempfile.mkdtemp(prefix="minitensor-rehearsal-"))
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(root / "source")
        shutil.copytree(submission, root / "submission", symlinks=True)  # links stay links: the grader refuses them
        (root / "source" / "run_autograder").chmod(0o755)
        worker = python or os.environ.get("MINITENSOR_WORKER_PYTHON") or sys.executable
        env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, WORKER_PYTHON=worker)
        # what the grader prints names the rehearsal's copy of the submission (`to see why: python -m
        # homework grade ...`), which is gone once this returns: each line names the one given instead
        laid_out, given = str(root / "submission"), str(submission)
        with subprocess.Popen(["bash", str(root / "source" / "run_autograder")], env=env, stdout=subprocess.PIPE,
                              text=True) as run:
            for line in run.stdout:
                print(line.replace(laid_out, given), end="", flush=True)
        if run.returncode:
            raise subprocess.CalledProcessError(run.returncode, "run_autograder")
        document = json.loads((root / "results" / "results.json").read_text())
        document["output"] = document.get("output", "").replace(laid_out, given)
        for test in document.get("tests", []):
            test["output"] = test.get("output", "").replace(laid_out, given)
        return document
    finally:
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
