import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# Gradient checks run many forward passes per example: no per-example deadline,
# and a modest number of examples so the suite stays a few minutes on 2 cores.
# MINITENSOR_EXAMPLES=500 explores more (derandomize off with HYPOTHESIS_RANDOM=1).
settings.register_profile(
    "minitensor",
    deadline=None,
    max_examples=int(os.environ.get("MINITENSOR_EXAMPLES", "40")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
    derandomize=not os.environ.get("HYPOTHESIS_RANDOM"),  # the same examples on every run: CI must not pass or fail by chance
)
settings.load_profile("minitensor")


# `make test` runs the files in two processes (pytest-xdist, --dist loadfile --no-loadscope-reorder):
# a process takes the next file in this order when it is free. The longest files go first, so the
# short ones fill in at the end and both processes finish close together; the rest keep the usual
# order. Seconds summed over a file's tests in one `make test` on the 2-core machine (2026-12-02,
# load average 6 to 10: each is about 1.5 times its time on a quiet machine; Numba's cache warm).
# test_backends.py first: on a fresh clone it compiles the Numba kernels (about 2.5 minutes; 10 s
# warm), which every later file then loads from the on-disk cache.
LONGEST_FIRST = [
    "test_backends.py",
    "test_demos.py",  # 173 s
    "test_homework_cheats.py",  # 171 s
    "test_homework_grading.py",  # 157 s
    "test_homework_isolation.py",  # 149 s
    "test_testwriting.py",  # 112 s
    "test_homework_gradescope.py",  # 91 s
    "test_homework_copies.py",  # 71 s
    "test_gradcheck_strict.py",  # 67 s
    "test_homework_work_cheats.py",  # 67 s
    "test_site.py",  # 66 s
    "test_homework_student_guide.py",  # 48 s
    "test_viz_html.py",  # 46 s
    "test_homework_leaks.py",  # 38 s
    "test_homework_fences.py",  # about 35 s (issue 43)
    "test_models.py",  # 35 s
    "test_graph_feedback.py",  # 31 s
    "test_ops.py",  # 27 s
]


def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker, the files of LONGEST_FIRST first (a stable sort: each file's tests
    keep their order). Run in one process, the usual order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: number for number, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


if not os.environ.get("MINITENSOR_GRADER"):  # under `grade`, the grader's plugin provides `student`

    @pytest.fixture
    def student():
        """The graded tests' way to the code under test: here, this repository's, in this process."""
        from homework.student import InProcessStudent

        return InProcessStudent()

    @pytest.fixture
    def written_tests():
        """The test-writing tasks' verdicts need the grader's sandbox (run a student's tests in fresh
        workers against implementations the grader holds): tests/test_testwriting.py grades the
        reference suites through `grade`; here their graded tests are skipped."""
        pytest.skip("a test-writing task is judged under `grade` (tests/test_testwriting.py runs it)")


CHROMIUM = "/usr/bin/chromium"
INSTALL = ("the browser tests need Debian's Chromium and Playwright: apt-get install -y chromium; "
           "pip install -e '.[test]'")


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright; the browser tests skip without it, except under
    CI=true, where they fail."""
    missing = [] if os.path.exists(CHROMIUM) else [CHROMIUM]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing.append("the playwright package")
    if missing:
        message = f"{' and '.join(missing)} not found: {INSTALL}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"under CI the browser tests must run: {message}")
        pytest.skip(message)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def python_others_can_run():
    """This interpreter, with this environment's packages, as one another user can start: this one,
    or (as root, when this one lives where other users cannot read, as pyenv's under /root does)
    Debian's python3.11 with this environment's packages on its path."""
    if os.geteuid() != 0:
        yield sys.executable
        return

    def another_user():
        os.setgroups([])
        os.setgid(61999)
        os.setuid(61999)

    try:
        if subprocess.run([sys.executable, "-I", "-c", "import numpy"], preexec_fn=another_user, cwd="/",
                          capture_output=True).returncode == 0:
            yield sys.executable
            return
    except PermissionError:
        pass
    system = shutil.which("python3.11", path="/usr/bin:/usr/local/bin")
    if system is None:
        pytest.skip("as root, no Python that another user can run (install Debian's python3.11)")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-worker-python-")) / "venv"  # pytest's folders are 0700
    folder.parent.chmod(0o755)
    subprocess.run([system, "-m", "venv", "--without-pip", str(folder)], check=True)
    import numpy

    site = pathlib.Path(numpy.__file__).resolve().parent.parent
    (folder / "lib" / "python3.11" / "site-packages" / "worker-packages.pth").write_text(f"{site}\n")
    yield str(folder / "bin" / "python")
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def worker_python(python_others_can_run):
    """The interpreter student code runs under: MINITENSOR_WORKER_PYTHON where it is set when the
    suite starts (.ci/run, as root, sets one with the run-time packages alone, so that the uid level
    can be graded), else `python_others_can_run`."""
    return PRESET_WORKER_PYTHON or python_others_can_run


PRESET_WORKER_PYTHON = os.environ.get("MINITENSOR_WORKER_PYTHON")


@pytest.fixture(autouse=True, scope="module")
def _graded_by_a_python_others_can_run(request):
    """Homework tests grade copies; as root, student code must run as a user of its own, under a
    Python that user can run (MINITENSOR_WORKER_PYTHON, which `grade` reads)."""
    if "homework" not in request.module.__name__ or os.environ.get("MINITENSOR_GRADER"):
        yield
        return
    python = request.getfixturevalue("worker_python")
    before = os.environ.get("MINITENSOR_WORKER_PYTHON")
    os.environ["MINITENSOR_WORKER_PYTHON"] = python
    yield
    if before is None:
        os.environ.pop("MINITENSOR_WORKER_PYTHON", None)
    else:
        os.environ["MINITENSOR_WORKER_PYTHON"] = before


def shared_once(tmp_path_factory, name, make):
    """`make(folder)` run once for the whole test run, its result (a path) shared by every
    pytest-xdist worker: the first worker to ask makes it under a file lock in the folder the
    workers' temporary folders share, the others wait for it and reuse it. Without xdist, made
    once in this run's temporary folder. `make` writes into the empty `folder` it is given."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = shared / f"shared-{name}", shared / f"shared-{name}.done"
    with FileLock(str(shared / f"shared-{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
            folder.mkdir()
            done.write_text(str(make(folder)))
    return pathlib.Path(done.read_text())


@pytest.fixture(scope="session")
def stripped_copy(tmp_path_factory):
    """A student copy of this repository (homework.strip), made once per run for every test file
    and worker that reads one. Read it only: a test that changes a copy copies it first
    (round_trip.copy_of)."""
    import homework

    return shared_once(tmp_path_factory, "stripped-copy", lambda folder: homework.strip(folder / "student"))


@pytest.fixture
def hidden(tmp_path):
    """A folder of hidden tests (round_trip.HIDDEN), as a teacher passes with grade --extra."""
    from round_trip import HIDDEN

    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "test_hidden.py").write_text(HIDDEN)
    return folder
