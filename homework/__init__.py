"""Homework: turn the solution into a student copy, grade copies task by task, bundle an autograder.

    python -m homework strip OUT                    # a student copy of this repository in OUT
    python -m homework grade [PATH]                 # a table of tasks; exit 1 if any fails
    python -m homework grade PATH --task softmax_backward -v     # one task, with its feedback
    python -m homework grade PATH --extra hidden/ --gradescope results.json --timeout 60
    python -m homework bundle autograder.zip --tasks softmax_backward layer_norm_backward
    python -m homework practice [PATH] [--op softmax]  # a student's tests/student/ vs the public chaffs

Solution regions are marked in the code with a task name from TASKS, as comment lines

    # BEGIN SOLUTION <task>
    ...the solved lines...
    # END SOLUTION

`strip` (strip.py) replaces a region inside a function with `raise NotImplementedError("Task
<task>: <hint>")`; a region of whole functions (a fast kernel, say) becomes functions of the same
names that raise. It copies only the files git tracks.

`grade` (grade.py) runs the teacher's tests in a grader process that never imports the copy:
each test calls the student's code through the `student` fixture (student.py): its probe runs in
the grader and reaches the copy by requests to a worker process of the task's own (remote.py,
sandbox.py, worker.py), which holds no test and answers with plain arrays; the test compares them
with its reference (PyTorch, or a measurement) in the grader.
A test-writing task (testwriting/) grades the student's own tests/student/test_<op>.py by the
buggy implementations of the op it catches among correct ones it must all pass (Examplar).
`bundle` (bundle.py) writes the Gradescope autograder: setup.sh, run_autograder, the grader and
the tests.

It sits beside minitensor/ and imports nothing of it (it only reads the repository and grades copies
through worker processes), so the autograder runs it on its own.
"""

from .bundle import bundle
from .grade import Row, find_copy, grade, run_tests, write_gradescope
from .strip import (BEGIN, END, NOT_IN_STUDENT_COPY, STUDENT_MARK, STUDENT_README, kept_out, marked_files,
                    regions, strip, strip_source, tasks_in)
from .tasks import HINTS, POINTS_PER_TASK, TASK_NAMES, TASKS, HomeworkError

__all__ = ["BEGIN", "END", "HINTS", "NOT_IN_STUDENT_COPY", "POINTS_PER_TASK", "STUDENT_MARK",
           "STUDENT_README", "TASKS", "TASK_NAMES", "HomeworkError", "Row", "bundle", "find_copy", "grade",
           "kept_out", "marked_files", "regions", "run_tests", "strip", "strip_source", "tasks_in",
           "write_gradescope"]
