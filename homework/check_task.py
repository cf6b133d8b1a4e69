"""check-task: what a task a teacher is adding still lacks, as a list to work through.

    python -m homework check-task NAME

Each line is one step of the README's recipe ("To add a task"), with "ok" or what is missing:
the task in TASKS with a hint, its solution region(s) in the code, its graded tests, its row in
README.student.md's table and that table numbered in course order, the count of tasks in the
README's text (in words, past twenty-five too), the test-writing tasks' numbers in
README.student.md, and, for a region in an op
that an accelerator may stand in for (its function asks backends.accelerator_for), the same task's
regions around the fast kernels (numba, CuPy), whose solved code would otherwise give the answer away.
"""

import ast
import pathlib
import re

from .strip import STUDENT_README, SOLUTION_ROOT, marked_files, regions
from .tasks import HINTS, TASK_NAMES, HomeworkError

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def in_words(number):
    """A count as the README's prose writes it: 25 -> "twenty-five" (below 100; digits above)."""
    if number < 20:
        return ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return TENS[tens] + (f"-{ONES[ones]}" if ones else "")
    return str(number)
GRADED_MARK = re.compile(r"""(?:@pytest\.mark\.task|@task|pytest\.mark\.task)\(\s*["'](\w+)["']""")


def lacks(name, root=None):
    """[(step, None if done else what is missing)] for the task `name`."""
    root = pathlib.Path(root or SOLUTION_ROOT)
    steps = []
    steps.append(("in TASKS (homework/tasks.py) with a hint",
                  None if name in TASK_NAMES and HINTS.get(name, "").strip() else
                  f"add ({name!r}, 'what to derive and what is at hand') to TASKS where it belongs in the course"))
    files = [path for path in marked_files(root) if _marks(path, name)]
    shown = ", ".join(str(path.relative_to(root)) for path in files)
    steps.append(("a solution region in the code", f"found in {shown}" if files else
                  f"mark the solved lines: '# BEGIN SOLUTION {name}' ... '# END SOLUTION'"))
    if any(_accelerated(path, name) for path in files):
        fast = [path for path in files if "numba_backend" in path.parts or path.name == "cupy_backend.py"]
        steps.append(("the fast kernels' regions (numba, CuPy)", f"found in {', '.join(p.name for p in fast)}" if fast
                      else "mark the numba and CuPy kernels of this op with the same task: their solved code states "
                           "the answer"))
    tests = sorted({str(path.relative_to(root)) for path in (root / "tests").glob("test_*.py")
                    if name in GRADED_MARK.findall(path.read_text())})
    steps.append(("graded tests (@pytest.mark.task)", f"found in {', '.join(tests)}" if tests else
                  f"add tests marked @pytest.mark.task({name!r}) to tests/test_homework_tasks.py (or, where a "
                  f"reference states the answer, tests/test_homework_teacher.py)"))
    student = (root / STUDENT_README).read_text() if (root / STUDENT_README).exists() else ""
    steps.append((f"a row in {STUDENT_README}'s table", None if f"`{name}`" in student else
                  f"add a row | n | `{name}` | file | what it unlocks | to the table of tasks"))
    names = TASK_NAMES + ([] if name in TASK_NAMES else [name])  # a task being added counts as the next one
    numbered = re.findall(r"^\| (\d+) \| `(\w+)` \|", student, flags=re.M)
    expected = [(str(number), task) for number, task in enumerate(names, 1)]
    steps.append((f"{STUDENT_README}'s table numbered in course order", None if numbered == expected else
                  "number its rows 1, 2, ... in the order of TASKS: " + ", ".join(
                      f"{task} is {number}" for (number, task) in expected if (number, task) not in numbered)[:400]))
    readme = (root / "README.md").read_text() if (root / "README.md").exists() else ""
    word = in_words(len(names)).capitalize()
    steps.append(("the README's count of tasks", None if f"{word} tasks are marked" in readme else
                  f"the README's 'For teachers' section should say '{word} tasks are marked in the code'"))
    writing = [task for task in names if task.startswith("tests_")]
    if writing:
        span = f"tasks {names.index(writing[0]) + 1} to {names.index(writing[-1]) + 1}"
        steps.append(("the test-writing tasks' numbers in " + STUDENT_README, None if f"({span})" in student else
                      f"{STUDENT_README} should name the test-writing tasks '({span})' where it says which they are"))
    return steps


def _marks(path, name):
    """Whether the file holds a region of task `name` (a region naming a task not yet in TASKS
    counts: the checklist's first line says what to add)."""
    text = path.read_text()
    try:
        return any(task == name for task, *_ in regions(text, str(path)))
    except HomeworkError:
        return f"# BEGIN SOLUTION {name}" in text


def report(name, root=None):
    """(the checklist as text, whether anything is missing)."""
    lines, missing = [], False
    for step, found in lacks(name, root):
        done = found is None or found.startswith("found in")
        lines.append(f"{'ok  ' if done else 'TODO'}  {step}" + (f" ({found})" if done and found else "")
                     + ("" if done else f": {found}"))
        missing |= not done
    return "\n".join(lines), missing


def _accelerated(path, name):
    """Whether a region of task `name` in `path` sits in a function that may hand its work to an
    accelerator (its code calls accelerator_for): the accelerator's kernels then solve the task too."""
    text = path.read_text()
    lines = text.splitlines()
    firsts = [first for task, first, _, _ in regions(text, str(path)) if task == name]
    functions = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.FunctionDef)]
    return any("accelerator_for(" in "\n".join(lines[node.lineno - 1 : node.end_lineno])
               and any(node.lineno <= first <= node.end_lineno for first in firsts) for node in functions)
