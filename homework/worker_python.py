"""The interpreter student code runs under, when the command line names none.

As root, student code runs as a fresh user id, which must be able to start the worker's Python.
An interpreter under /root (pyenv's, conda's) cannot be started by another user. Then the command
line makes one that can: the system's python3.X of the same version, in a virtual environment of
its own (no pip, made in a moment) whose path holds this environment's packages through a `.pth`
file, in a temporary folder every user can read, removed when the command ends. The sandbox still
shows a worker only the run-time packages of that path (never PyTorch or pytest), at bubblewrap
and Landlock. Where no such system Python exists, it refuses with the commands that make one.
"""

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from .isolation import IsolationError

ANOTHER_USER = 61999  # only asked whether it can start an interpreter; it owns nothing


def _another_user_can_run(python, code="pass", flags=("-I", "-S")):
    def drop():
        os.setgroups([])
        os.setgid(ANOTHER_USER)
        os.setuid(ANOTHER_USER)

    try:
        return subprocess.run([python, *flags, "-c", code], preexec_fn=drop, cwd="/", capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _packages_readable_by_others():
    return _another_user_can_run(sys.executable if _another_user_can_run(sys.executable) else "/usr/bin/python3",
                                 f"import os, sys; sys.exit(not os.access({str(_packages())!r}, os.R_OK | os.X_OK))")


def _packages():
    import numpy

    return pathlib.Path(numpy.__file__).resolve().parent.parent


def commands_that_make_one(folder="/opt/minitensor-worker", packages_readable=None):
    """The commands that make a worker Python: one whose path holds this environment's packages
    where other users can read them, else one with the run-time packages installed in it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    readable = _packages_readable_by_others() if packages_readable is None else packages_readable
    make = (f"{version} -m venv --without-pip {folder} && echo {_packages()} > "
            f"{folder}/lib/{version}/site-packages/grader-packages.pth" if readable else
            f"{version} -m venv --without-pip {folder} && {sys.executable} -m pip --python {folder}/bin/python "
            f"install numpy scipy numba matplotlib tqdm threadpoolctl (this environment's packages, {_packages()}, "
            f"are closed to other users)")
    return (f"{make} (as root, with a {version} that every user can read, such as Debian's /usr/bin/{version}), "
            f"then --worker-python {folder}/bin/python")


@contextlib.contextmanager
def chosen(python=None, stream=sys.stderr):
    """`python`, else $MINITENSOR_WORKER_PYTHON, else this interpreter where the worker's user can start
    it, else one made for the length of the `with` (see the module's docstring)."""
    python = python or os.environ.get("MINITENSOR_WORKER_PYTHON")
    if python or os.geteuid() != 0 or _another_user_can_run(sys.executable):
        yield python or sys.executable
        return
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path="/usr/bin:/usr/local/bin")
    readable = _packages_readable_by_others()
    if system is None or not _another_user_can_run(system) or not readable:
        why = "" if readable else f", nor read this environment's packages ({_packages()})"
        commands = commands_that_make_one(packages_readable=readable)
        raise IsolationError(f"student code never runs as root, and another user cannot run {sys.executable}"
                             f"{why}; make a Python every user can run: {commands}")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="minitensor-worker-python-"))
    try:
        folder.chmod(0o755)
        venv = folder / "venv"
        subprocess.run([system, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
        (venv / "lib" / version / "site-packages" / "grader-packages.pth").write_text(f"{_packages()}\n")
        print(f"student code runs under {system} in a virtual environment made for this run, with this one's "
              f"packages (another user cannot run {sys.executable}; --worker-python chooses one)", file=stream)
        yield str(venv / "bin" / "python")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
