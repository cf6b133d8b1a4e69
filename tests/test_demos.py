"""Every demo is a notebook written as a script: jupytext turns it into an .ipynb, a Jupyter
kernel executes it in quick mode, and every check it prints is true. `python -m demos` runs demos
as scripts, each in its own process, and sums up their checks.

One kernel executes all the notebooks (starting one per demo would cost more than most demos);
each notebook gets a first cell that points the check record at its own file."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import demos
from demos._record import read_record

ROOT = pathlib.Path(__file__).resolve().parent.parent
jupytext = pytest.importorskip("jupytext")
nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    env = dict(os.environ, MINITENSOR_QUICK="1", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("MPLBACKEND", None)
    manager.start_kernel(env=env, cwd=str(ROOT / "demos"))  # where Jupyter starts a notebook opened from demos/
    yield manager
    manager.shutdown_kernel(now=True)


def test_every_demo_is_a_notebook_of_top_level_cells():
    for name in demos.DEMOS:
        source = (ROOT / "demos" / f"{name}.py").read_text()
        assert source.startswith("# %% [markdown]\n# # ") and "seed" in source.split("\n\n")[0], name  # says what it reproduces
        assert "from ." not in source and "def main(" not in source, name  # absolute imports; no experiment in a function
        assert source.count("# %% [markdown]") >= 1 and source.count("\n# %%\n") >= 2, name
        assert not re.search(r"^[ \t]+# %%", source, re.M), f"{name}: a cell marker inside a block"


@pytest.mark.parametrize("name", demos.DEMOS)
def test_the_demo_notebook_runs_and_every_check_is_true(name, kernel, tmp_path):
    notebook = jupytext.read(ROOT / "demos" / f"{name}.py")
    record = tmp_path / "record.jsonl"
    setup = f"import os\nos.environ['MINITENSOR_DEMO_RECORD'] = {str(record)!r}"
    notebook.cells.insert(0, nbformat.v4.new_code_cell(setup))
    client = nbclient.NotebookClient(notebook, km=kernel, timeout=300)
    client.execute()
    checks, figure = read_record(record)
    printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    failed = [label for label, passed in checks.items() if not passed]
    assert checks and not failed, f"{name}: failed checks {failed}"
    for label in checks:
        assert f"{label}: True" in printed  # printed the seed's way, in the notebook's outputs
    assert figure and pathlib.Path(figure).stat().st_size > 10_000
    assert pathlib.Path(figure).parent == ROOT / "out" / "quick"  # run output, outside what git tracks
    shown = [output["data"].get("text/plain", "") for cell in notebook.cells for output in cell.get("outputs", [])
             if output.get("output_type") == "execute_result"]
    stray = [text for text in shown if text in ("True", "False") or text.startswith(("PosixPath", "None"))]
    assert not stray, f"{name}: stray cell outputs {stray}"
    assert any(output.get("output_type") == "display_data" for cell in notebook.cells for output in cell.get("outputs", []))


def test_a_demo_runs_as_a_script_and_the_runner_sums_up_its_checks():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-m", "demos", "--quick", "stacking", "scaling"], cwd=ROOT / "demos",
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"stacking\s+2/2 ", result.stdout) and re.search(r"scaling\s+6/6 ", result.stdout)
    assert "all 8 checks passed" in result.stdout and "demos:" in result.stderr  # the progress bar
    assert re.search(r"total time: \d+ min \d\d s for 2 demos \(quick\)", result.stdout)


@pytest.mark.parametrize("quick", ["0", "1"])
def test_a_run_writes_its_figures_where_git_ignores_them(quick):
    """`make demo` must leave `git status` clean: a run's figures go to the ignored out/ folder, never
    over the reference figures in demos/figures/ that the README shows."""
    code = "from demos._common import FIGURES, REFERENCE_FIGURES; print(FIGURES); print(REFERENCE_FIGURES)"
    env = dict(os.environ, MINITENSOR_QUICK=quick, PYTHONPATH=str(ROOT))
    figures, reference = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                        check=True).stdout.split()
    assert figures != reference and pathlib.Path(reference) == ROOT / "demos" / "figures"
    if shutil.which("git") and (ROOT / ".git").exists():
        for name in demos.DEMOS:
            ignored = subprocess.run(["git", "check-ignore", "-q", str(pathlib.Path(figures) / f"{name}.png")], cwd=ROOT)
            assert ignored.returncode == 0, f"{figures}/{name}.png is not ignored by git"


def test_the_runner_reports_a_demo_that_stops_with_an_error(tmp_path, monkeypatch):
    from demos import __main__ as runner

    broken = tmp_path / "demos"
    broken.mkdir()
    (broken / "stacking.py").write_text("from demos._common import Checks\nChecks()('first', True)\nraise RuntimeError('boom')\n")
    monkeypatch.setattr(runner, "FOLDER", broken)
    assert runner.main(["stacking"]) == 1


def test_runner_lists_and_rejects(capsys):
    from demos.__main__ import main

    with pytest.raises(SystemExit):
        main(["no_such_demo"])
    assert "unknown demo" in capsys.readouterr().err


def test_an_attention_memory_point_counts_the_kernel_not_the_compiler(tmp_path):
    """efficient_attention measures each point in a fresh process. With an empty Numba cache the
    fused kernel compiles there; the warm-up must take every path the measurement uses (beyond
    SHORT_KEYS keys the tiled one), or the compiler's memory is reported as the kernel's: tens of
    MB, where the kernel's output is 4 MB at this length."""
    from minitensor.backends.numba_backend import SHORT_KEYS

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    code = f"from demos._attention_memory import measure; print(*measure('fused (numba)', {SHORT_KEYS + 64}, repeats=1))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600, check=True).stdout
    seconds, memory = map(float, out.split())
    assert list(tmp_path.iterdir()), "the kernels were compiled into the empty cache"
    assert memory < 15, f"peak extra memory {memory:.1f} MB at T = {SHORT_KEYS + 64}: the compiler's, not the kernel's"


def test_the_runner_runs_two_demos_side_by_side_and_prints_each_whole(tmp_path, monkeypatch, capsys):
    """Two at a time (the machine's two cores: the adding problem, started first, runs beside the
    rest), each demo's output printed in one piece when it ends, and the table in the usual order."""
    from demos import __main__ as runner

    fake = tmp_path / "demos"
    fake.mkdir()
    for name in ("adding_problem", "scaling", "stacking"):
        (fake / f"{name}.py").write_text(
            "import time\nfrom demos._common import Checks\n"
            f"log = open({str(tmp_path / 'log')!r}, 'a')\nlog.write(f'{name} start {{time.time()}}\\n'); log.flush()\n"
            f"print('{name} begins', flush=True)\ntime.sleep(3 if '{name}' == 'adding_problem' else 0.2)\n"
            f"log.write(f'{name} end {{time.time()}}\\n'); log.flush()\nChecks()('{name} ends', True)\n")
    monkeypatch.setattr(runner, "FOLDER", fake)
    started = []
    original = runner.start
    monkeypatch.setattr(runner, "start", lambda name, *args, **kwargs: started.append(name) or original(name, *args, **kwargs))
    assert runner.main(["scaling", "stacking", "adding_problem", "--jobs", "2"]) == 0
    times = {tuple(line.split()[:2]): float(line.split()[2]) for line in (tmp_path / "log").read_text().splitlines()}
    assert times["scaling", "start"] < times["adding_problem", "end"]  # side by side
    assert started[0] == "adding_problem"
    out = capsys.readouterr().out
    for name in ("adding_problem", "scaling", "stacking"):
        block = out.split(f"=== {name} ===\n", 1)[1].split("\n\n", 1)[0]
        assert block == f"{name} begins\n{name} ends: True", block
    table = out.split("figure\n", 1)[1].split("\n\n")[0].splitlines()
    assert [row.split()[0] for row in table] == ["scaling", "stacking", "adding_problem"]
    assert "2 at a time" in out


def test_the_runner_starts_the_costliest_demos_first_and_the_short_ones_last(tmp_path, monkeypatch):
    """Side by side, the order is by cost (longest processing time first): the adding problem, then
    the other training runs, then the short demos, which fill whichever side frees up at the end.
    Every demo has a cost, so that a new one is not taken for a short one by mistake."""
    from demos import DEMOS
    from demos import __main__ as runner

    assert set(runner.COST) == set(DEMOS)
    fake = tmp_path / "demos"
    fake.mkdir()
    names = ["stacking", "scaling", "instabilities", "adding_problem", "alignment"]
    for name in names:
        (fake / f"{name}.py").write_text(f"from demos._common import Checks\nChecks()('{name} ran', True)\n")
    monkeypatch.setattr(runner, "FOLDER", fake)
    started = []
    original = runner.start
    monkeypatch.setattr(runner, "start", lambda name, *args, **kwargs: started.append(name) or original(name, *args, **kwargs))
    assert runner.main([*names, "--jobs", "2"]) == 0
    assert started == ["adding_problem", "instabilities", "alignment", "scaling", "stacking"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_runner_prints_each_demos_cpu_time_beside_its_seconds(tmp_path, monkeypatch, capsys, jobs):
    """The table's CPU column counts what a demo computed, in its own process and in the processes
    it started (efficient_attention measures in fresh ones), and not the time it waited: a demo
    that sleeps two seconds uses almost none; the line after the total sums them up, with the load."""
    from demos import __main__ as runner

    fake = tmp_path / "demos"
    fake.mkdir()
    burn = "import time\nend = time.process_time() + 1.5\nwhile time.process_time() < end: pass\n"
    (fake / "scaling.py").write_text(burn + "from demos._common import Checks\nChecks()('burned', True)\n")
    (fake / "stacking.py").write_text(
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}], check=True)\ntime.sleep(2)\n"
        "from demos._common import Checks\nChecks()('slept', True)\n")
    (fake / "soft_lookup.py").write_text("import time\ntime.sleep(2)\nfrom demos._common import Checks\nChecks()('slept', True)\n")
    monkeypatch.setattr(runner, "FOLDER", fake)
    assert runner.main(["scaling", "stacking", "soft_lookup", "--jobs", jobs]) == 0
    out = capsys.readouterr().out
    table = out.split("figure\n", 1)[1].split("\n\n")[0].splitlines()
    seconds, cpu = ({row.split()[0]: float(row.split()[i]) for row in table} for i in (2, 3))
    # all three import the same (demos._common: Matplotlib, whose import time varies by a few tenths);
    # two burn 1.5 s more, stacking in a child; the table rounds to tenths
    assert cpu["scaling"] - cpu["soft_lookup"] >= 1.0 and cpu["stacking"] - cpu["soft_lookup"] >= 1.0, cpu
    assert seconds["soft_lookup"] - cpu["soft_lookup"] >= 1.5, (cpu, seconds)  # its 2 s asleep are not counted
    line = out.split("total time:", 1)[1].splitlines()[1]
    assert line.startswith("CPU time: ") and "the costliest (" in line and "load average now: " in line, line


def test_the_runner_refuses_no_demos_at_a_time(capsys):
    from demos.__main__ import main

    with pytest.raises(SystemExit):
        main(["--jobs", "0", "scaling"])
    assert "--jobs: at least 1 demo at a time, got 0" in capsys.readouterr().err


def test_the_cpu_line_says_the_run_waited_only_when_it_did():
    from demos.__main__ import cpu_summary

    rows = [("adding_problem", 8, 8, 0.0, None, 0, 250.0), ("scaling", 2, 2, 0.0, None, 0, 4.0)]
    idle = cpu_summary(rows, 2, wall_seconds=252.0)  # on its own cores: the costliest demo's 250 s and start-up
    busy = cpu_summary(rows, 2, wall_seconds=400.0)
    assert "waiting" not in idle and "about 4 min 10 s" in idle, idle
    assert "about 2 min 30 s of the run went to waiting for cores" in busy, busy


def test_a_skipped_check_is_said_and_never_counted_as_passed(tmp_path, monkeypatch, capsys):
    """A demo that cannot make a check (PyTorch missing, as in `make demo`'s environment) says so,
    and the summary counts the checks that ran, naming the skipped ones."""
    from demos import __main__ as runner

    fake = tmp_path / "demos"
    fake.mkdir()
    (fake / "multihead.py").write_text("from demos._common import Checks\nchecks = Checks()\nchecks('ran', True)\n"
                                       "checks.skip('matches nn.MultiheadAttention', 'PyTorch is not installed')\n")
    monkeypatch.setattr(runner, "FOLDER", fake)
    assert runner.main(["multihead"]) == 0
    out = capsys.readouterr().out
    assert "1 check skipped, not counted below: multihead: matches nn.MultiheadAttention (PyTorch is not installed)" in out
    assert "all 1 checks that ran passed" in out and "on every check they state" not in out, out
    table = out.split("figure\n", 1)[1].splitlines()[0]
    assert table.split()[1] == "1/1", table


def test_a_piped_run_prints_one_progress_line_per_demo(tmp_path, monkeypatch, capsys):
    """Where stderr is no terminal (`make demo 2>&1 | cat`, a log), a line per finished demo,
    not tqdm's bar (whose last state a pipe showed twice)."""
    from demos import __main__ as runner

    fake = tmp_path / "demos"
    fake.mkdir()
    for name in ("scaling", "stacking"):
        (fake / f"{name}.py").write_text(f"from demos._common import Checks\nChecks()('{name} ran', True)\n")
    monkeypatch.setattr(runner, "FOLDER", fake)
    assert runner.main(["scaling", "stacking", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert err.count("demos: 1/2 done") == 1 and err.count("demos: 2/2 done") == 1 and "\r" not in err, err
