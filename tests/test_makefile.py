"""The Makefile's newcomer targets, run (or dry-run) as a newcomer would: `make notebooks` keeps a
student's edits, `make lab` starts as root, `make demo` installs only what the demos need and
prints its time."""

import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make(*args, cwd=ROOT):
    result = subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"make {' '.join(args)}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@needs_make
@pytest.mark.parametrize("user_id, allowed", [("0", True), ("1000", False)])
def test_lab_passes_allow_root_only_as_root(user_id, allowed):
    """Jupyter refuses to start as root without --allow-root (Docker, Codespaces); elsewhere the
    flag is not passed."""
    printed = make("-n", "lab", f"USER_ID={user_id}")
    line = next(line for line in printed.splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in line) == allowed, line


@needs_make
def test_lab_reads_the_user_id_itself():
    line = next(line for line in make("-n", "lab").splitlines() if "jupyter lab" in line)
    assert ("--allow-root" in line) == (os.getuid() == 0), line


@needs_make
def test_notebooks_keeps_a_students_edits(tmp_path):
    """A notebook is written when missing or older than its demo; an edited one stays as the
    student left it, until `make notebooks FORCE=1`."""
    if not (BIN / "jupytext").exists():
        pytest.skip("jupytext is not installed beside this interpreter (the test extra)")
    shutil.copy(ROOT / "Makefile", tmp_path)
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "__init__.py").write_text('DEMOS = ["first", "second"]\n')
    for name in ("first", "second"):
        (tmp_path / "demos" / f"{name}.py").write_text(f"# %% [markdown]\n# # {name}\n\n# %%\nprint({name!r})\n")
    for name in ("setup.cfg", "pyproject.toml", "constraints.txt"):
        (tmp_path / name).write_text("")
    past = time.time() - 100
    for path in tmp_path.rglob("*"):
        os.utime(path, (past, past))
    stamp = tmp_path / "installed"
    stamp.write_text("")  # the install is done (newer than setup.cfg and the rest)
    settings = [f"VENV={BIN.parent}", f"STAMP={stamp}", f"PYTHON={sys.executable}"]
    first, second = tmp_path / "notebooks" / "first.ipynb", tmp_path / "notebooks" / "second.ipynb"

    make("notebooks", *settings, cwd=tmp_path)
    assert "print('first')" in first.read_text() and "print('second')" in second.read_text()
    edited = first.read_text().replace("print('first')", "print('my own edit')")
    first.write_text(edited)

    printed = make("notebooks", *settings, cwd=tmp_path)
    assert first.read_text() == edited, "make notebooks wrote over a student's edited notebook"
    assert "jupytext" not in printed

    (tmp_path / "demos" / "second.py").write_text("# %% [markdown]\n# # second\n\n# %%\nprint('changed')\n")
    make("notebooks", *settings, cwd=tmp_path)
    assert "print('changed')" in second.read_text(), "a demo newer than its notebook is written again"
    assert first.read_text() == edited

    make("notebooks", "FORCE=1", *settings, cwd=tmp_path)
    assert "print('first')" in first.read_text() and "my own edit" not in first.read_text()
    backup = tmp_path / "notebooks" / "first.ipynb.bak"  # the edited one, kept (a blind review lost its edit)
    assert backup.read_text() == edited


@needs_make
def test_demo_installs_the_runtime_packages_only_and_prints_its_time(tmp_path):
    """`make demo` in a fresh clone: the runtime install (no test extra: no PyTorch, Playwright or
    pytest to download), then the demos, then the time since make started."""
    venv = tmp_path / "venv"
    printed = make("-n", "demo", f"VENV={venv}")
    install = next(line for line in printed.splitlines() if "pip install" in line)
    assert install.endswith("pip install --no-compile -c constraints.txt -e ."), install
    assert "-m demos" in printed
    assert "min" in printed and "set-up of .venv included" in printed
    # `make test` installs the rest, and its stamp stands for the runtime set too
    printed = make("-n", "test", f"VENV={venv}")
    assert "-e '.[test,docs]'" in printed and ".installed-runtime" in printed
