"""The README's Python blocks run as shown, and every command it prints works as printed."""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(python_blocks()) >= 2


def test_readme_python_blocks_run(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the examples write files
    for block in python_blocks():
        exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    assert "(4, 3) (3, 2)" in printed
    assert printed.count("True") >= 2
    assert "Add culprit" in printed and "['culprit', 'inherited', 'inherited']" in printed  # mt.debug.compare
    assert "[('', 'culprit'), ('fc1', 'inherited'), ('fc2', 'inherited')]" in printed  # compare against torch
    assert "Mul forward" in printed
    assert "loss 0.00" in printed and "[[0 1 2 3 4 5 6 7 0 1]]" in printed
    assert (tmp_path / "tiny_gpt.npz").exists()
    assert (tmp_path / "backward.html").read_text().startswith("<!DOCTYPE html>")


# Every command the README prints, and how this file makes sure it works as printed (after the
# two set-up commands, `make demo` and `source .venv/bin/activate`). A command the README gains
# fails test_every_readme_command_is_known until it is added here.
RUN = [  # run as printed, in the activated environment (quick mode keeps the demo short)
    "python -m demos scaling",
    "python examples/two_layer.py",
    'python -c "import minitensor as mt; x = mt.randn(3, 4, requires_grad=True); print(mt.gradcheck(lambda x: x.tanh().sum(), x))"',
    "python examples/backward_page.py out/block_backward.html",
]
DRY_RUN = ["make demo", "make demo QUICK=1", 'make demo NAMES="scaling kv_cache"', "make test"]  # make -n: too long to run here
ELSEWHERE = {  # run by another test, or on Gradescope
    "source .venv/bin/activate": "test_source_activate_gives_the_environments_python",
    "python -m pdb examples/debug_attention.py": "tests/test_debug.py::test_the_readme_pdb_session replays the session",
    "python -m homework strip ../student": "tests/test_homework.py",
    "python -m homework grade ../student": "tests/test_homework_grading.py",
    "python -m homework bundle autograder.zip --tasks softmax_backward layer_norm_backward kv_cache --extra hidden/":
        "tests/test_homework_gradescope.py",
    "python -m homework check-task softmax_backward":
        "tests/test_homework_isolation.py::test_check_task_lists_what_a_new_task_still_lacks",
    "python -m homework rehearse autograder.zip ../student":
        "tests/test_homework_isolation.py::test_rehearse_runs_the_autograder_as_gradescope_would",
    "bash /autograder/source/run_autograder": "runs on Gradescope; tests/test_homework_gradescope.py runs the bundle's run_autograder",
    "cat /autograder/results/results.json": "on Gradescope",
    "python -m homework practice --op add":
        "tests/test_testwriting.py::test_the_copy_has_starters_and_no_wheat_or_hidden_chaff_and_practice_runs_there",
}


def shell_commands():
    """The lines of the README's ```sh blocks and the `$ ` lines of its transcripts, comments cut."""
    text = README.read_text()
    lines = [line for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S) for line in block.splitlines()]
    lines += [line[2:] for block in re.findall(r"```\n(.*?)```", text, flags=re.S)
              for line in block.splitlines() if line.startswith("$ ")]
    return [line.split("  #")[0].strip() for line in lines if line.strip()]


def activated_env():
    """The environment `source .venv/bin/activate` gives: this interpreter's bin/ first on PATH."""
    bin_dir = pathlib.Path(sys.executable).parent
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(bin_dir.parent),
                MINITENSOR_QUICK="1")


def test_every_readme_command_is_known():
    commands = shell_commands()
    assert "source .venv/bin/activate" in commands and "python examples/two_layer.py" in commands
    unknown = [c for c in commands if c not in RUN and c not in DRY_RUN and c not in ELSEWHERE]
    assert not unknown, f"README commands no test runs: {unknown}; add each to RUN, DRY_RUN or ELSEWHERE here"
    assert set(RUN) | set(DRY_RUN) <= set(commands), "a command listed here is no longer in the README"


@pytest.mark.parametrize("command", RUN)
def test_a_readme_command_runs_as_printed(command):
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, env=activated_env(), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    if "gradcheck" in command:
        assert result.stdout.strip() == "True"
    if "two_layer" in command:
        losses = [float(line.split("loss")[1].split()[0]) for line in result.stdout.splitlines()]
        assert losses[-1] < 0.5 * losses[0]
    if "demos scaling" in command:
        assert "all 6 checks passed" in result.stdout and "total time:" in result.stdout
    if "backward_page" in command:
        assert (ROOT / "out" / "block_backward.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("command", DRY_RUN)
def test_a_readme_make_command_names_a_target_that_does_what_it_says(command):
    result = subprocess.run(["bash", "-c", command.replace("make ", "make -n ", 1)], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    printed = result.stdout
    if command.startswith("make demo"):
        assert "-m demos" in printed
        assert ("--quick" in printed) == ("QUICK=1" in command)
        assert ("scaling kv_cache" in printed) == ("NAMES" in command)


def test_source_activate_gives_the_environments_python():
    activate = ROOT / ".venv" / "bin" / "activate"
    if not activate.exists():
        pytest.skip("no .venv here (the tests run in another environment)")
    result = subprocess.run(["bash", "-c", "source .venv/bin/activate && command -v python && python -c 'import tqdm'"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert pathlib.Path(result.stdout.split()[0]) == ROOT / ".venv" / "bin" / "python"


def test_the_commands_named_in_the_readmes_prose_exist():
    """`python -m MODULE`, `python PATH.py` and `make TARGET` written inline in the text."""
    text = README.read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"`make ([a-z-]+)", text)):
        assert re.search(rf"^{target}:", makefile, re.M), f"`make {target}` in the README: no such target"
    for module in set(re.findall(r"`python -m ([\w.]+)", text)):
        assert importlib.util.find_spec(module) is not None, f"`python -m {module}` in the README: no such module"
    for script in set(re.findall(r"python ([\w/]+\.py)", text)):
        assert (ROOT / script).is_file(), f"`python {script}` in the README: no such file"


def test_the_first_sessions_pdb_shortlist_runs_without_an_error():
    """Step 3 of the first session lists pdb commands to type; typed in that order into
    `python -m pdb examples/debug_attention.py`, none may answer with an error (a `p y` before
    the line that assigns y answered `*** NameError`)."""
    step = README.read_text().split("3. **Step through a backward pass**", 1)[1].split("\n4. ", 1)[0]
    commands = re.findall(r"`([^`]+)`", " ".join(step.split()))
    assert commands[:3] == ["until 11", "break mt.ops.Softmax.backward", "continue"], commands
    assert commands[-1] == "p y", commands
    result = subprocess.run([sys.executable, "-m", "pdb", "examples/debug_attention.py"],
                            input="\n".join(commands + ["quit"]) + "\n", capture_output=True, text=True, cwd=ROOT,
                            timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    errors = [line for line in result.stdout.splitlines() if "***" in line]
    assert not errors, f"pdb answered {errors} to {commands}"
    assert "array([[0.40111209" in result.stdout  # p y printed the softmax output


def test_the_line_the_pdb_walkthrough_says_runs_is_softmax_backwards_formula():
    """The prose after the pdb transcript names the line of the formula that runs without an
    accelerator; it is the line of `dx = y * (grad - ...)` in ops/softmax.py, where pdb stops."""
    lines = (ROOT / "minitensor" / "ops" / "softmax.py").read_text().splitlines()
    formula = next(number for number, line in enumerate(lines, 1) if line.strip().startswith("dx = y * (grad -"))
    said = re.findall(r"`fast` is None and line (\d+) runs", README.read_text())
    assert said == [str(formula)], (said, formula)
    assert f"softmax.py({formula})backward()\n-> dx = y * (grad" in README.read_text()
