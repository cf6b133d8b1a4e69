"""Strip: the student copy. Each solution region of a task becomes its stub; the files copied
are the ones git tracks (or a listed manifest), never untracked or ignored ones."""

import fnmatch
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from .tasks import HINTS, TASK_NAMES, TEST_WRITING, HomeworkError, check_task_names

MARKED_FOLDERS = ("minitensor", "models", "demos", "tests/student")  # tests/student: the test-writing tasks' files
BEGIN = re.compile(r"^(?P<indent>\s*)# BEGIN SOLUTION(?: (?P<task>\S+))?\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
GRADER = "homework/"  # the grader itself: its docstrings show the markers, it holds no region
IMPORTS = "import minitensor, models.attention, models.layernorm, models.transformer, models.recurrent, demos"
STUDENT_README = "README.student.md"  # becomes the copy's README.md; the teacher's README is not copied
STUDENT_MARK = ".minitensor-student"  # written by strip: which tasks the copy is missing
EXPECTED_FILES = ("minitensor/__init__.py", "models/__init__.py", "demos/__init__.py")
HERE = pathlib.Path(__file__).resolve().parent
SOLUTION_ROOT = HERE.parent  # the teacher's repository


def regions(text, where="<source>"):
    """[(task, first line, last line, [region lines])] of a file's solution regions (lines 1-based,
    the markers included); a region that does not close, nests or names no known task is an error."""
    found, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        begin = BEGIN.match(line)
        if begin:
            if current is not None:
                raise HomeworkError(f"{where}:{number}: BEGIN SOLUTION inside the region opened at line {current[1]}; "
                                    f"close that one with '# END SOLUTION' first")
            task = begin.group("task")
            if task is None:
                raise HomeworkError(f"{where}:{number}: BEGIN SOLUTION names no task; write '# BEGIN SOLUTION <task>'")
            check_task_names([task], f"{where}:{number}")
            current = [task, number, None, []]
        elif END.match(line):
            if current is None:
                raise HomeworkError(f"{where}:{number}: END SOLUTION without a BEGIN SOLUTION before it")
            current[2] = number
            found.append(tuple(current))
            current = None
        elif current is not None:
            current[3].append(line)
    if current is not None:
        raise HomeworkError(f"{where}:{current[1]}: the region of task {current[0]!r} is never closed; "
                            f"add '# END SOLUTION' after its last line")
    return found


def _stub(task, indent, body):
    """What a region becomes in the student copy. Inside a function: a raise with the hint. At
    module level (a fast kernel, its wrapper, a kernel's source): the functions it defined, each
    raising, and nothing else."""
    hint = HINTS[task]
    if task in TEST_WRITING:  # the student's tests go here: the copy has none of the teacher's
        return [f"{indent}# Task {task}: {hint}\n"]
    if not any(line.strip() and not line.strip().startswith("#") for line in body):  # a derivation in comments
        return [f"{indent}# Task {task}: (a derivation was here; it goes with the task)\n"]
    if indent:
        return [f"{indent}raise NotImplementedError({f'Task {task}: {hint}'!r})\n"]
    names = [match.group(1) for match in (re.match(r"def (\w+)", line) for line in body) if match]
    message = (f"Task {task}: this fast kernel is part of the task, so the student copy does not have it; "
               f"use the numpy backend (mt.set_backend('numpy')), where you write the task. Hint: {hint}")
    out = [f"# Task {task}: a solved kernel was here; it is removed from the student copy\n"]
    for number, name in enumerate(names):
        out += ["\n\n"] if number else []
        out += [f"def {name}(*args, **kwargs):\n", f"    raise NotImplementedError({message!r})\n\n\n",
                f"{name}.stripped_task = {task!r}  # an op falls back to its own code (backends.accelerator_for)\n"]
    return out


def strip_source(text, keep=(), where="<source>"):
    """The text with every solution region (except those of tasks in `keep`) replaced by its stub."""
    found = {first: (task, last, lines) for task, first, last, lines in regions(text, where)}
    out, skip_until = [], 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if number <= skip_until:
            continue
        if number in found:
            task, last, body = found[number]
            if task in keep:
                out.extend(text.splitlines(keepends=True)[number - 1 : last])
            else:
                out.extend(_stub(task, BEGIN.match(line).group("indent"), body))
            skip_until = last
            continue
        out.append(line)
    return "".join(out)


def marked_files(root):
    root = pathlib.Path(root)
    for folder in MARKED_FOLDERS:
        yield from sorted(p for p in (root / folder).rglob("*.py")
                          if not p.relative_to(root).as_posix().startswith(GRADER))


def tasks_in(root):
    """{task: number of regions} found under root."""
    counts = {}
    for path in marked_files(root):
        for task, *_ in regions(path.read_text(), str(path)):
            counts[task] = counts.get(task, 0) + 1
    return counts


# What the student copy leaves out: paths or fnmatch patterns relative to the repository root
# (/ as separator; `*` also matches across folders), each a file that states a task's answer
# outside any solution region, or checks the teacher's round, and that the copy needs neither
# to import nor to run its tests and demos.
NOT_IN_STUDENT_COPY = [
    "benchmarks/block.py",  # a hand-written block: head split/merge, linear and attention backward, pre-norm
    "benchmarks/kernels.py",  # the materialised attention backward, product by product
    "tests/test_benchmark_block.py",  # tests benchmarks/block.py, which is not in the copy
    "tests/test_homework_leaks.py",  # the leak test: its patterns spell out the answers it looks for
    "tests/test_homework.py",  # the round itself: strips copies; the files below grade copies and plant cheats
    "tests/test_homework_grading.py",  # ... in files of one job each, so the suite's two processes share them
    "tests/test_homework_copies.py",
    "tests/test_homework_gradescope.py",
    "tests/test_homework_cheats.py",
    "tests/test_homework_work_cheats.py",
    "tests/test_homework_teacher.py",  # graded tests whose references state an answer (a mask's offset)
    "homework/testwriting/wheats.py",  # correct ops of the test-writing tasks: backward answers
    "homework/testwriting/hidden_chaffs.py",  # the buggy ops that grade them, never shown
    "tests/test_testwriting_graded.py",  # grades tests/student/ (students practise with `practice` instead)
    "tests/test_testwriting.py",  # plants cheats against the hidden chaffs
    "sitebuild/*",  # the course site's builder: runs the solved demos, reads the leak test's patterns
    "tests/test_site.py",  # builds that site
    "tests/compare_blocks.py",  # mt.debug.compare's planted bugs: a pre-norm block written out, and backwards
    "tests/test_compare.py",  # ... and the tests that import it
    "tests/test_viz_compare.py",
    "tests/test_graph_feedback.py",  # the grader's feedback: the same bugs, planted beside the right code
    "tests/test_sitebuild_pages.py",  # tests that builder's pages
    "tests/test_homework_student_guide.py",  # builds that site's students' pages, and strips a copy
    "demos/figures/attention_cost.png",  # the solved demo tasks' figures: each plots the task's answer
    "demos/figures/scaling.png",
    "demos/figures/stacking.png",
    "demos/figures/multihead.png",
    "demos/figures/causal_self_attention.png",
    "demos/figures/kv_cache.png",
]


def kept_out(name):
    """Whether `name` (a path relative to the repository root) stays out of the student copy."""
    name = pathlib.PurePath(name).as_posix()
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_IN_STUDENT_COPY)


def _files_to_copy(root, manifest=None):
    """The files git tracks in `root` (never untracked or ignored ones: a teacher's hidden tests,
    an autograder zip, an earlier copy), or the files a manifest lists, one path a line."""
    if manifest is not None:
        names = [line.strip() for line in pathlib.Path(manifest).read_text().splitlines()
                 if line.strip() and not line.lstrip().startswith("#")]
        missing = [name for name in names if not (root / name).is_file()]
        if missing:
            raise HomeworkError(f"strip --manifest: {', '.join(missing[:5])} not found in {root}")
    else:
        try:
            listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached"],
                                    capture_output=True, check=True).stdout.decode()
        except (OSError, subprocess.CalledProcessError):
            raise HomeworkError(f"strip: {root} is not a git repository, so which files are the course's is not "
                                f"known; commit them, or list them in a file and pass --manifest FILE") from None
        names = [name for name in listed.split("\0") if name and (root / name).is_file()]
    return [name for name in names if not kept_out(name)]


def strip(out, root=None, keep=(), manifest=None):
    """Write a student copy of the repository at `root` into `out`: each solution region of a task
    not in `keep` becomes its stub, README.student.md becomes README.md, and the teacher's README
    stays behind. Then check that the copy still imports. The repository at `root` is only read."""
    root = pathlib.Path(root or SOLUTION_ROOT).resolve()
    out = pathlib.Path(out)
    check_task_names(keep, "strip --keep")
    if out.resolve() == root or root in out.resolve().parents:
        raise HomeworkError(f"strip: {out} is inside the repository {root}; write the copy outside it "
                            f"(a copy inside would be copied into the next one, and could be committed)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HomeworkError(f"strip: {out} exists and is not an empty folder; choose a new folder for the copy")
    files = _files_to_copy(root, manifest)
    sources = {name: (root / name).read_text() for name in files
               if name.endswith(".py") and name.startswith(tuple(f"{folder}/" for folder in MARKED_FOLDERS))
               and not name.startswith(GRADER)}
    stripped = {name: strip_source(text, keep, where=name) for name, text in sources.items()
                if "BEGIN SOLUTION" in text}
    for name in files:  # every region is checked before anything is written
        if name in ("README.md", STUDENT_README):
            continue
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in stripped:
            target.write_text(stripped[name])
        else:
            shutil.copy2(root / name, target)
    if (root / STUDENT_README).exists():
        shutil.copy2(root / STUDENT_README, out / "README.md")
    missing = [name for name in TASK_NAMES if name not in keep]
    (out / STUDENT_MARK).write_text(json.dumps({"tasks_to_do": missing}, indent=1) + "\n")
    check = subprocess.run([sys.executable, "-c", IMPORTS], cwd=out, env=copy_environment(out), capture_output=True,
                           text=True)
    if check.returncode:
        raise HomeworkError(f"strip: the student copy in {out} does not import: {_failing_line(check.stderr, out)}")
    return out


def copy_environment(*paths):
    """Run with `paths` first on sys.path (so the copy's minitensor, not an installed one, is
    imported), writing no bytecode or Numba cache into them."""
    env = dict(os.environ)
    first = [str(pathlib.Path(p).resolve()) for p in paths]
    env["PYTHONPATH"] = os.pathsep.join(first + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["NUMBA_CACHE_DIR"] = str(pathlib.Path(tempfile.gettempdir()) / "minitensor-grader-numba")
    env["MPLBACKEND"] = "Agg"
    for name in ("MINITENSOR_BACKEND", "MINITENSOR_QUICK", "MINITENSOR_DEMO_RECORD"):
        env.pop(name, None)
    return env


def _failing_line(stderr, root):
    """One line from a traceback: the copy's file and line that failed, and the error."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    error = lines[-1].strip() if lines else "(no message)"
    where = None
    root = str(pathlib.Path(root).resolve())
    for line in lines:
        match = re.match(r'\s*File "(.+)", line (\d+)', line)
        if match and match.group(1).startswith(root):
            where = f"{os.path.relpath(match.group(1), root)}, line {match.group(2)}"
    return f"{where}: {error}" if where else error

