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

import os
import pathlib
import struct
import subprocess
import sys

from .sandbox import StudentError, WorkerTimedOut
from .worker import decode, encode, load_demo, read_message



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
    """What a graded test holds: `call` runs a probe on the student's code; `measure` times it
    on the grader's side; `call_within` runs it under a memory limit."""

    def call(self, probe, *args, **kwargs):
        raise NotImplementedError

    def measure(self, probe, *args, within_s=None, **kwargs):
        """(value, seconds): the probe's answer and the wall time of the whole call, read on this
        side of the wire (the student's process can patch its own `time`, not this one's). With
        within_s, a call still running after that many seconds is stopped: an AssertionError
        that says so (in the test suite's process, where nothing can be stopped, it runs on)."""
        start = time.perf_counter()
        value = self.call(probe, *args, **kwargs)
        return value, time.perf_counter() - start

    def call_within(self, memory_mb, probe, *args, **kwargs):
        """The probe's answer when the process it runs in may grow by at most `memory_mb` MiB
        while it runs (RLIMIT_AS lowered to its size then plus that; an allocation past it is a
        MemoryError in the student's code). The process is not used again: a lowered limit
        cannot be raised."""
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

    def measure(self, probe, *args, within_s=None, **kwargs):
        name, source = _source(probe)
        left = 60.0 if self.deadline is None else max(self.deadline - time.monotonic(), 0.001)
        limit = left if within_s is None else min(left, within_s)
        start = time.perf_counter()
        try:
            value = self.worker.call(source, name, args, kwargs, seconds=limit)
        except StudentError as error:
            raise _raised(error.args[0]) from None
        except WorkerTimedOut:
            if within_s is None or within_s >= left:
                raise  # the test's own time limit
            raise AssertionError(f"stopped after {within_s:.2f} s, the budget of this call") from None
        return value, time.perf_counter() - start

    def call_within(self, memory_mb, probe, *args, **kwargs):
        name, source = _source(probe)
        seconds = 60.0 if self.deadline is None else max(self.deadline - time.monotonic(), 0.001)
        self.worker.stop()
        self.worker.start(memory_mb=memory_mb)  # a fresh worker, limited before the copy's code runs
        try:
            return self.worker.call(source, name, args, kwargs, seconds=seconds, last=True)
        except StudentError as error:
            raise _raised(error.args[0]) from None
        finally:
            self.worker.stop()  # spent: a lowered limit cannot be raised; the next call starts a new worker


class InProcessStudent(Student):
    """This repository's code, in this process (the test suite's `student`)."""

    def call(self, probe, *args, **kwargs):
        name, source = _source(probe)
        namespace = {"__name__": "probe", "load_demo": load_demo}
        exec(compile(source, f"<probe {name}>", "exec"), namespace)
        arguments = decode(encode({"args": list(args), "kwargs": kwargs}))
        return decode(encode(namespace[name](*arguments["args"], **arguments["kwargs"])))

    def call_within(self, memory_mb, probe, *args, **kwargs):
        """In a worker process of this repository's code (worker.py, as grading runs it), so the
        limit is the same real rlimit, not a measurement."""
        name, source = _source(probe)
        root = pathlib.Path(__file__).resolve().parents[2]
        read_end, write_end = os.pipe()
        process = subprocess.Popen([sys.executable, "-I", str(pathlib.Path(__file__).with_name("worker.py")),
                                    str(root), "in-process", str(write_end)],
                                   stdin=subprocess.PIPE, pass_fds=(write_end,), cwd=root)
        os.close(write_end)
        hello = encode({"nonce": "hello", "memory_mb": float(memory_mb)})  # limited before the code is imported
        request = encode({"source": source, "name": name, "args": list(args), "kwargs": kwargs,
                          "nonce": "in-process", "last": True})
        try:
            for message in (hello, request):
                process.stdin.write(struct.pack("<Q", len(message)) + message)
            process.stdin.close()
            with os.fdopen(read_end, "rb") as answers:
                read_message(answers)  # ready
                answer = read_message(answers)
        finally:
            process.kill()
            process.wait()
        if answer is None:
            raise StudentError(f"the worker ended without an answer (exit status {process.returncode})")
        if "error" in answer:
            raise _raised(answer["error"])
        return answer["value"]
