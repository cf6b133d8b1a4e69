"""The trust boundary is a process boundary: a graded test's probe runs in the grader and reaches
the student's code only by requests (homework/remote.py, worker.py). The worker answers
with plain data or handles, refuses anything else (a probe's source above all), and holds nothing
of a test that a copy could read from its own process."""

import numpy as np
import pytest
from round_trip import ROOT, grade

import homework
from homework import remote, sandbox
from homework.remote import raised_for
from homework.student import InProcessStudent
from homework.worker import Handle


def test_a_remote_tensor_answers_as_the_student_code_would_and_comes_back_as_plain_data():
    side = remote.loopback_side()
    mt = side.module("minitensor")
    x = mt.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    y = (x * 2.0 + 1.0) @ x
    assert isinstance(y, remote.Remote) and type(y.data) is np.ndarray
    y.sum().backward()
    t = x.detach().numpy()
    expected = (2 * t + 1).T @ np.ones((2, 2)) + 2 * np.ones((2, 2)) @ t.T
    np.testing.assert_array_equal(x.grad, expected)
    assert x.shape == (2, 2) and type(x.shape) is tuple  # a tuple stays a tuple (NumPy's axis= needs one)
    assert x.sum(axis=(0, 1)).item() == 10.0
    assert x.grad_fn is None and x == x and x != mt.tensor(np.ones(2))  # one object, one handle
    values, names = [], []
    for name, parameter in mt.nn.Linear(3, 2).named_parameters():  # iteration: a list of (str, handle)
        names.append(name)
        values.append(parameter.data)
    assert names == ["weight", "bias"] and [v.shape for v in values] == [(2, 3), (2,)]
    with mt.no_grad():
        assert (x * 3.0).requires_grad is False


def test_a_handle_lives_for_one_probe():
    side = remote.loopback_side()
    x = side.module("minitensor").tensor(np.ones(3))
    side.forget()
    with pytest.raises(sandbox.StudentError, match="does not keep"):
        x.data


def test_a_probe_that_returns_the_students_object_is_the_graders_mistake():
    def probe(side):
        return {"t": side.module("minitensor").tensor(np.ones(2))}

    with pytest.raises(TypeError, match="returned an object of the student's"):
        InProcessStudent().call(probe)


def test_the_students_error_is_read_as_data_and_cut_to_length():
    huge = {"type": "E" * 10_000, "message": "m" * 100_000, "where": "w" * 10_000, "unsolved": 12}
    error = raised_for(huge)
    assert type(error) is sandbox.StudentError and len(str(error)) < 2600
    assert type(raised_for({"unsolved": "Task softmax_backward: derive it"})) is NotImplementedError
    assert type(raised_for({"unsolved": "not a stub's message", "type": "ValueError", "message": "x"})) is sandbox.StudentError
    assert type(raised_for("not even a dict")) is sandbox.StudentError


def test_the_worker_refuses_a_probes_source(worker_python):
    box = sandbox.Sandbox(ROOT, python=worker_python)
    worker = box.worker("refuse")
    try:
        with pytest.raises(sandbox.StudentError, match="unknown request"):
            worker.ask({"source": "def probe():\n    return 1\n", "name": "probe", "args": [], "kwargs": {}}, Handle)
        with pytest.raises(sandbox.StudentError, match="not one of"):
            worker.ask({"do": "operator", "name": "__import__", "args": ["os"]}, Handle)
        tensor = worker.ask({"do": "import", "module": "minitensor"}, Handle)
        assert type(tensor) is Handle  # a module is kept there, named by a number
    finally:
        worker.stop()
        box.close()


# What a copy finds of the grading in its own process, looked for from the unbroadcast task's
# function (the first use of it in a grading): every function, code object and frame of the
# worker, and every string of the gc that looks like a test's. It raises what it found, so the
# grade's feedback shows it.
HUNT = '''
def _hunt():
    import gc
    import os
    import sys
    copy = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the copy's own code is not the grader's
    found, objects = set(), 0
    for value in gc.get_objects():
        objects += 1
        code = getattr(value, "__code__", None) or (value if type(value).__name__ == "code" else None)
        if code is not None and str(getattr(code, "co_filename", "")).startswith(copy):
            continue
        names = [getattr(value, "__name__", ""), getattr(code, "co_name", ""), getattr(code, "co_filename", "")]
        found |= {name for name in names if type(name) is str and (
            "probe" in name or "test_homework" in name or "_grading" in name
            or name in ("assert_close", "assert_matches", "array_of", "torch_expression"))}
        if type(value) is str and ("def probe" in value or "def test_" in value):
            found.add(value[:60])
    for frame in sys._current_frames().values():
        while frame is not None:
            if "test_" in frame.f_code.co_filename or "probe" in frame.f_code.co_name:
                found.add(frame.f_code.co_filename + ":" + frame.f_code.co_name)
            frame = frame.f_back
    raise RuntimeError(f"hunted {objects} objects, found {sorted(found)}")


def summed_axes(grad_shape, shape):
    _hunt()
'''


def test_nothing_of_a_test_is_in_the_students_process(tmp_path, worker_python):
    copy = homework.strip(tmp_path / "student", keep=["topological_order", "elementwise_backward"])
    autograd = copy / "minitensor" / "autograd.py"
    autograd.write_text(autograd.read_text() + "\n" + HUNT)
    ok, rows, table = grade(copy, task="unbroadcast", python=worker_python, verbose=True)
    assert rows[0].points == 0.0 and "hunted" in table, table  # the hunt ran
    found = [line for line in table.splitlines() if "hunted" in line]
    assert found and all("found []" in line for line in found), "\n".join(found)
