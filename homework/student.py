"""`student`: what a graded test holds of the code it grades.

    def probe_softmax(side, x, dy):            # runs in the grader; `side` reaches the student's code
        mt = side.module("minitensor")
        t = mt.tensor(x, requires_grad=True)
        t.softmax(axis=-1).backward(dy)
        return {"dx": t.grad}

    @pytest.mark.task("softmax_backward")
    def test_softmax_backward(student):       # runs in the grader
        got = student.call(probe_softmax, x, dy)
        ...compare got["dx"] with PyTorch's, here (tests/_grading.py)...

A probe is a function of the grader's: it runs here, and every use it makes of the student's
code (an import, an attribute, a call, an operator) is a request to the task's worker process
(remote.py, worker.py), which sends back plain data or a handle. So the worker never holds the
probe, its arguments' meaning, a reference or a tolerance: only the public names it is asked to
use and the arrays it is given. A probe returns plain data (arrays, numbers, strings, lists,
dicts); every object the worker kept for it is dropped when it returns. Under `grade` the
worker is a sandboxed process (sandbox.py); in the test suite it is this process, reached over
the same wire format (remote.loopback_side).
"""

import os
import pathlib
import secrets
import struct
import subprocess
import sys
import time

from .remote import Remote, RemoteSide, contains_remote, loopback_side, raised_for
from .sandbox import StudentError, WorkerDied, WorkerTimedOut
from .worker import Handle, encode, read_message


def _checked(probe, value):
    if contains_remote(value):
        raise TypeError(f"{probe.__name__} returned an object of the student's ({value!r:.80}): a probe returns "
                        f"plain data (read .data, .grad, a number), which the test then judges")
    return value


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
        """The probe's answer when the process the student's code runs in may grow by at most
        `memory_mb` MiB while it runs (RLIMIT_AS lowered to its size then plus that; an allocation
        past it is a MemoryError in the student's code). That process is not used again: a
        lowered limit cannot be raised."""
        raise NotImplementedError


class WorkerStudent(Student):
    """The student's code in a worker process; each probe gets what is left of the test's time."""

    def __init__(self, worker, deadline=None):
        self.worker, self.deadline = worker, deadline

    def _left(self):
        return 60.0 if self.deadline is None else max(self.deadline - time.monotonic(), 0.001)

    def _run(self, probe, args, kwargs, seconds):
        """probe(side, *args, **kwargs) with every request answered within `seconds` in all. Once
        the worker times out or dies, the probe's later requests fail the same way (no restart
        in the middle of a probe, whose objects died with it)."""
        deadline = time.monotonic() + seconds
        ended = []

        def connection(request, handles):
            if ended:
                raise ended[0]
            try:
                return self.worker.ask(request, handles, seconds=max(deadline - time.monotonic(), 0.001))
            except StudentError as error:
                raise raised_for(error.args[0]) from None
            except (WorkerTimedOut, WorkerDied) as error:
                ended.append(error)
                raise

        side = RemoteSide(connection)
        try:
            return _checked(probe, probe(side, *args, **kwargs))
        finally:
            if not ended and self.worker.process is not None:
                try:
                    side.forget()
                except (WorkerTimedOut, WorkerDied, StudentError, NotImplementedError):
                    pass

    def call(self, probe, *args, **kwargs):
        return self._run(probe, args, kwargs, self._left())

    def measure(self, probe, *args, within_s=None, **kwargs):
        left = self._left()
        limit = left if within_s is None else min(left, within_s)
        start = time.perf_counter()
        try:
            value = self._run(probe, args, kwargs, limit)
        except WorkerTimedOut:
            if within_s is None or within_s >= left:
                raise  # the test's own time limit
            raise AssertionError(f"stopped after {within_s:.2f} s, the budget of this call") from None
        return value, time.perf_counter() - start

    def call_within(self, memory_mb, probe, *args, **kwargs):
        seconds = self._left()
        self.worker.stop()
        self.worker.start(memory_mb=memory_mb)  # a fresh worker, limited before the copy's code runs
        try:
            return self._run(probe, args, kwargs, seconds)
        finally:
            self.worker.stop()  # spent: a lowered limit cannot be raised; the next call starts a new worker


class InProcessStudent(Student):
    """This repository's code, in this process (the test suite's `student`), over the wire format."""

    def call(self, probe, *args, **kwargs):
        side = loopback_side()
        return _checked(probe, probe(side, *args, **kwargs))

    def call_within(self, memory_mb, probe, *args, **kwargs):
        """In a worker process of this repository's code (worker.py, as grading runs it), so the
        limit is the same real rlimit, not a measurement."""
        with _PlainWorker(memory_mb) as worker:
            return _checked(probe, probe(RemoteSide(worker.ask), *args, **kwargs))


class _PlainWorker:
    """worker.py in a child process on this repository's code, unsandboxed (the test suite's)."""

    def __init__(self, memory_mb):
        root = pathlib.Path(__file__).resolve().parents[1]
        read_end, write_end = os.pipe()
        self.process = subprocess.Popen([sys.executable, "-I", str(pathlib.Path(__file__).with_name("worker.py")),
                                         str(root), "in-process", str(write_end)],
                                        stdin=subprocess.PIPE, pass_fds=(write_end,), cwd=root)
        os.close(write_end)
        self.answers = os.fdopen(read_end, "rb")
        self._send({"nonce": "hello", "memory_mb": float(memory_mb)})  # limited before the code is imported
        read_message(self.answers)  # ready

    def _send(self, message):
        data = encode(message)
        self.process.stdin.write(struct.pack("<Q", len(data)) + data)
        self.process.stdin.flush()

    def ask(self, request, handles):
        nonce = secrets.token_hex(8)
        self._send({**request, "nonce": nonce})
        while True:
            answer = read_message(self.answers, handles)
            if answer is None:
                raise StudentError(f"the worker ended without an answer (exit status {self.process.poll()})")
            if answer.get("nonce") == nonce:
                break
        if "error" in answer:
            raise raised_for(answer["error"])
        return answer["value"]

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.process.kill()
        self.process.wait()
        self.answers.close()
        return False


__all__ = ["Handle", "InProcessStudent", "Remote", "Student", "WorkerStudent"]
