"""`student`: what a graded test holds of the code it grades.

    def probe_softmax(x, dy):                 # runs where the student's code is
        import minitensor as mt
        t = mt.tensor(x, requires_grad=True)
        t.softmax(axis=-1).backward(dy)
        return {"dx": t.grad}

    @pytest.mark.task("softmax_backward")
    def test_softmax_backward(student):       # runs in the grader
        got = student.call(probe_softmax, x, dy)
        ...compare got["dx"] with PyTorch's, here (tests/_grading.py)...

A probe is a module-level function whose source (with that of the functions of its module it
calls) is sent to the student's side: it imports what it uses, takes and returns plain values
(arrays, numbers, strings, lists, dicts), and has `load_demo(name)` at hand (a demo's functions
without its experiment). Under `grade` the probe runs in the task's worker process (sandbox.py);
in the test suite it runs in this process on this repository's code. Either way its answer
crosses the same wire format, so a test sees the same plain arrays.
"""

import inspect
import textwrap
import time

from .sandbox import StudentError
from .worker import decode, encode, load_demo


def _source(probe):
    """(name, source): the probe's source, and that of each function of its module it calls."""
    if not inspect.isfunction(probe) or probe.__name__.startswith("<"):
        raise TypeError(f"student.call needs a module-level function as its probe, got {probe!r}")
    sources, stack = {}, [probe]
    while stack:
        function = stack.pop()
        if function.__name__ in sources:
            continue
        sources[function.__name__] = textwrap.dedent(inspect.getsource(function))
        stack += [value for name in function.__code__.co_names
                  if inspect.isfunction(value := function.__globals__.get(name))
                  and value.__module__ == probe.__module__]
    return probe.__name__, "\n\n".join(reversed(sources.values()))


def _raised(error):
    """The grader-side exception for the student's: a stub's NotImplementedError keeps its
    'Task NAME: hint' message (so the grade says which task blocks which); anything else is a
    StudentError with the student's file and line."""
    if error.get("unsolved"):
        return NotImplementedError(error["unsolved"])
    where = f" ({error['where']})" if error.get("where") else ""
    message = f"{error['type']}: {error['message']}" if error["message"] else error["type"]
    return StudentError(f"your code raised {message}{where}")


class Student:
    def call(self, probe, *args, **kwargs):
        raise NotImplementedError


class WorkerStudent(Student):
    """The student's code in a worker process; each call gets what is left of the test's time."""

    def __init__(self, worker, deadline=None):
        self.worker, self.deadline = worker, deadline

    def call(self, probe, *args, **kwargs):
        name, source = _source(probe)
        seconds = 60.0 if self.deadline is None else max(self.deadline - time.monotonic(), 0.001)
        try:
            return self.worker.call(source, name, args, kwargs, seconds=seconds)
        except StudentError as error:
            raise _raised(error.args[0]) from None


class InProcessStudent(Student):
    """This repository's code, in this process (the test suite's `student`)."""

    def call(self, probe, *args, **kwargs):
        name, source = _source(probe)
        namespace = {"__name__": "probe", "load_demo": load_demo}
        exec(compile(source, f"<probe {name}>", "exec"), namespace)
        arguments = decode(encode({"args": list(args), "kwargs": kwargs}))
        return decode(encode(namespace[name](*arguments["args"], **arguments["kwargs"])))
