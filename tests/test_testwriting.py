"""The test-writing tasks (homework/testwriting/): a student's tests judged against correct
implementations (wheats) and buggy ones (chaffs), as Examplar does. Each suite below is a planted
student: the reference suites (tests/student/) catch every chaff and fail no wheat; an empty suite
scores 0; a suite that asserts False is invalid; a shapes-only suite catches none; an all-ones,
square-input suite misses exactly the chaffs those inputs hide, with hints naming the inputs; and
each cheat (reading the implementation, timing it, patching the runner) does no better than an
honest suite. Student code runs in the sandbox here as under `grade`."""

import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile
import time

import numpy as np
import pytest

import homework
from homework import testwriting
from homework.bundle import rehearse
from homework.sandbox import Sandbox
from homework.strip import copy_environment
from homework.testwriting.oracle import FLOOR_SECONDS, Oracle, decode_index

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALL_TASKS = [testwriting.task_of(op) for op in testwriting.TARGETS]


@pytest.fixture(scope="module")
def sandbox(worker_python):
    box = Sandbox(ROOT, python=worker_python)
    yield box
    box.close()


def judged(sandbox, op, source, **kwargs):
    kill_all = sandbox.level == "bubblewrap" or sandbox.uid is not None
    return testwriting.judge(op, textwrap.dedent(source), lambda: sandbox.worker(testwriting.task_of(op)), kill_all,
                             **kwargs)


def chaff_labels(op, conditions=None):
    found = testwriting.implementations(op, include=("public", "hidden"))
    return {c.label for c in found if conditions is None or c.hidden_by(conditions)}


# ----------------------------------------------------------------------------
# The reference suites, through grade and its results file
# ----------------------------------------------------------------------------


def test_the_reference_suites_catch_every_chaff_and_fail_no_wheat_through_grade(tmp_path, worker_python):
    results = tmp_path / "results.json"
    stream = io.StringIO()
    start = time.perf_counter()
    ok, rows = homework.grade(ROOT, tasks=ALL_TASKS, gradescope=results, python=worker_python, stream=stream,
                              verbose=True)
    seconds = time.perf_counter() - start
    table = stream.getvalue()
    assert ok, table
    for row in rows:
        op = homework.tasks.TEST_WRITING[row.task]
        assert row.passed == row.total == len(chaff_labels(op)) and row.points == homework.POINTS_PER_TASK, row
    document = json.loads(results.read_text())
    hidden = [test for test in document["tests"] if "hidden-buggy" in test["name"]]
    public = [test for test in document["tests"] if "public-buggy" in test["name"]]
    assert hidden and all(test["visibility"] == "after_published" for test in hidden)
    assert public and all(test["visibility"] == "visible" for test in public)
    assert document["score"] == homework.POINTS_PER_TASK * len(ALL_TASKS)
    print(f"grading the six reference suites took {seconds:.1f} s")  # measured, not asserted (README)


# ----------------------------------------------------------------------------
# Empty, failing, shapes-only and all-ones suites
# ----------------------------------------------------------------------------


def test_an_empty_suite_scores_zero_without_a_run():
    for source in ["", '"""My tests."""\nimport numpy as np\n\n\ndef helper():\n    return 1\n']:
        verdict = testwriting.judge("add", source, new_worker=None, kill_all=False)  # no worker is ever asked for
        assert verdict.empty and not verdict.valid and verdict.caught_count() == 0
        assert verdict.summary().startswith("caught 0 of 4: no tests: tests/student/test_add.py")


def test_a_suite_that_asserts_false_is_invalid_and_names_the_test_and_the_wheat(sandbox):
    verdict = judged(sandbox, "add", """
        def test_nothing_is_right():
            assert False, "I reject everything"
    """)
    assert not verdict.valid and verdict.caught_count() == 0
    said = verdict.why_nothing()
    assert "invalid" in said and "test_nothing_is_right fails on correct implementation" in said
    assert "I reject everything" in said and "AddPlain" not in said  # the wheat's label, never its name or code


def test_a_tolerance_too_tight_for_another_correct_summation_order_is_invalid(sandbox):
    verdict = judged(sandbox, "matmul", """
        import numpy as np
        import minitensor as mt

        def test_bit_for_bit_in_float32():
            a = np.random.randn(20, 30).astype(np.float32)
            b = np.random.randn(30, 20).astype(np.float32)
            np.testing.assert_array_equal((mt.tensor(a) @ mt.tensor(b)).data, a @ b)
    """)
    assert not verdict.valid and verdict.caught_count() == 0
    failed_on = {label for _, label, _, _ in verdict.invalid}
    assert failed_on and failed_on < {"correct implementation A", "correct implementation B", "correct implementation C"}
    assert "test_bit_for_bit_in_float32 fails on correct implementation" in verdict.why_nothing()


SHAPES_ONLY = {
    "add": """
        import numpy as np
        import minitensor as mt

        def test_shapes():
            a = mt.tensor(np.random.randn(3, 4), requires_grad=True)
            b = mt.tensor(np.random.randn(4), requires_grad=True)
            y = a + b
            y.backward(np.random.randn(3, 4))
            assert y.shape == (3, 4) and a.grad.shape == (3, 4) and b.grad.shape == (4,)
    """,
    "softmax": """
        import numpy as np
        import minitensor as mt

        def test_shapes():
            x = mt.tensor(np.random.randn(2, 5), requires_grad=True)
            y = x.softmax(axis=-1)
            y.backward(np.random.randn(2, 5))
            assert y.shape == (2, 5) and x.grad.shape == (2, 5)
    """,
    "index": """
        import numpy as np
        import minitensor as mt

        def test_shapes():
            x = mt.tensor(np.random.randn(3, 4), requires_grad=True)
            y = x[[0, 2, 0]]
            y.backward(np.random.randn(3, 4))
            assert y.shape == (3, 4) and x.grad.shape == (3, 4)
    """,
}


@pytest.mark.parametrize("op", sorted(SHAPES_ONLY))
def test_a_suite_that_only_checks_shapes_catches_none(sandbox, op):
    verdict = judged(sandbox, op, SHAPES_ONLY[op])
    assert verdict.valid and verdict.caught_count() == 0, verdict.summary()


ONES_AND_SQUARE = {
    "add": """
        import numpy as np
        import minitensor as mt

        def test_values_and_gradients_with_ones():
            for _ in range(2):  # two backward passes
                a = mt.tensor(np.random.randn(3, 3), requires_grad=True)
                b = mt.tensor(np.random.randn(3, 3), requires_grad=True)
                y = a + b
                np.testing.assert_allclose(y.data, a.data + b.data)
                y.sum().backward()
                np.testing.assert_allclose(a.grad, np.ones((3, 3)))
                np.testing.assert_allclose(b.grad, np.ones((3, 3)))

        def test_float32():
            assert (mt.tensor(np.ones((2, 2), np.float32)) + mt.tensor(np.ones((2, 2), np.float32))).dtype == np.float32
    """,
    "matmul": """
        import numpy as np
        import minitensor as mt

        def test_gradients_with_ones():
            for _ in range(2):
                a = mt.tensor(np.random.randn(3, 3), requires_grad=True)
                b = mt.tensor(np.random.randn(3, 3), requires_grad=True)
                (a @ b).sum().backward()
                ones = np.ones((3, 3))
                np.testing.assert_allclose(a.grad, ones @ b.data.T)
                np.testing.assert_allclose(b.grad, a.data.T @ ones)

        def test_float32():
            a = mt.tensor(np.ones((2, 2), np.float32))
            assert (a @ a).dtype == np.float32
    """,
}


@pytest.mark.parametrize("op", sorted(ONES_AND_SQUARE))
def test_all_ones_upstream_and_square_inputs_miss_exactly_the_chaffs_they_hide(sandbox, op):
    verdict = judged(sandbox, op, ONES_AND_SQUARE[op])
    hidden_by_them = chaff_labels(op, {"ones_upstream", "square"})
    assert verdict.valid and hidden_by_them, verdict.summary()
    assert {label for label, caught in verdict.caught.items() if not caught} == hidden_by_them
    hints = dict(verdict.missed_hints())
    assert set(hints) == {label for label in hidden_by_them if label.startswith("public")}
    if op == "add":
        assert "not all ones" in hints["public buggy implementation 1"]
        assert "different shapes that broadcast" in hints["public buggy implementation 2"]
        summary = verdict.summary()
        assert summary.startswith("caught 1 of 4 buggy implementations (1 of the 4 public ones)")
        assert "public buggy implementation 2 passed all your tests; an input that would catch it: operands" in summary


# ----------------------------------------------------------------------------
# Cheats: none does better than an honest suite (which catches every public chaff of Add)
# ----------------------------------------------------------------------------

HONEST_ADD = (ROOT / "tests" / "student" / "test_add.py").read_text()

CHEATS = {
    "reads the implementation's code, module and name": """
        import inspect
        import numpy as np
        import minitensor as mt
        from minitensor.ops import Add

        def test_looks_like_a_buggy_implementation():
            said = []
            for function in (Add.forward, Add.backward):
                try:
                    said.append(inspect.getsource(function))
                except (OSError, TypeError):
                    pass
                code = function.__code__
                said += [code.co_filename, repr(code.co_consts), " ".join(code.co_names), function.__module__,
                         function.__qualname__, code.co_code.hex()]
            text = " ".join(said)
            for tell in ("ones_like", "_first_slice", "float64", "memory", "Upstream", "Dtype", "First", "chaff"):
                assert tell not in text, tell
            assert Add.__module__ == "minitensor.ops.elementwise" and Add.backward.__qualname__ == "Add.backward"

        def test_asks_the_grader_who_it_is():
            import sys
            frame = sys._getframe()
            while frame is not None and "ask_grader" not in frame.f_globals:
                frame = frame.f_back
            assert frame is not None
            answer = frame.f_globals["ask_grader"]({"do": "source"})
            assert "error" in answer and "AddUpstreamIgnored" not in str(answer)
    """,
    "times the op": """
        import time
        import numpy as np
        import minitensor as mt

        def test_a_buggy_op_skips_work_so_it_is_fast():
            a = mt.tensor(np.random.randn(3, 4), requires_grad=True)
            b = mt.tensor(np.random.randn(4), requires_grad=True)
            for _ in range(20):
                y = a + b
                start = time.perf_counter()
                y.backward(np.random.randn(3, 4))
                assert time.perf_counter() - start > 0.0009  # the oracle's floor: every implementation is slower
    """,
    "patches the runner so every test passes": HONEST_ADD + """

def test_zz_erase_the_failures():
    import sys
    frame = sys._getframe()
    while frame is not None and "results" not in frame.f_locals:
        frame = frame.f_back
    for entry in frame.f_locals["results"]:
        entry["passed"] = True
""",
    "leaves a note for the next run": """
        import os
        import socket
        import subprocess
        import sys
        import tempfile
        import time

        NOTE = "note-from-an-earlier-run"

        def test_no_earlier_run_left_anything():  # were a run to see one, the order of runs would be known
            import builtins
            if getattr(builtins, "seen_in_this_run", False):  # a later seed of this same run
                return
            builtins.seen_in_this_run = True
            places = [os.path.expanduser("~"), tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"]
            assert not [place for place in places if os.path.exists(os.path.join(place, NOTE))]
            import ctypes
            libc = ctypes.CDLL(None)
            assert libc.shmget(0x5EED, 0, 0) == -1, "an earlier run's shared memory segment is still there"
            libc.shmget(0x5EED, 4096, 0o1666)  # IPC_CREAT | 0666: what a later run would find
            probe = socket.socket(socket.AF_UNIX)
            try:
                probe.connect(chr(0) + NOTE)
                raise AssertionError("a process an earlier run started is still alive")
            except (ConnectionRefusedError, FileNotFoundError):
                pass
            finally:
                probe.close()
            for place in places:
                try:
                    with open(os.path.join(place, NOTE), "w") as note:
                        note.write("seen")
                except OSError:
                    pass
            listen = "import socket, time; s = socket.socket(socket.AF_UNIX); s.bind(chr(0) + %r); s.listen(); time.sleep(600)"
            subprocess.Popen([sys.executable, "-c", listen % NOTE], start_new_session=True)
            time.sleep(0.3)
    """,
    "reads the seeds from the runner's frames": """
        import sys

        def test_only_a_correct_one_runs_on_several_seeds():  # the judge once ran a chaff on its first seed alone
            frame = sys._getframe()
            while frame is not None:
                if "seeds" in frame.f_locals:
                    assert len(frame.f_locals["seeds"]) > 1
                    return
                frame = frame.f_back
    """,
    "ends the process": """
        import os

        def test_leave():
            os._exit(0)
    """,
}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_cheat_does_no_better_than_an_honest_suite(sandbox, cheat):
    if cheat == "leaves a note for the next run" and not (sandbox.level == "bubblewrap" or sandbox.uid is not None):
        pytest.skip("a run can kill what it started and empty the shared folders only with a user or PID namespace "
                    "of its own (bubblewrap, or a grader running as root)")
    verdict = judged(sandbox, "add", CHEATS[cheat])
    assert verdict.caught_count() == 0, (cheat, verdict.summary())  # the honest suite catches all 4 (below)
    if cheat == "ends the process":
        assert not verdict.valid and "before reporting" in verdict.why_nothing()
    else:
        assert verdict.valid, verdict.why_nothing()


def test_the_honest_add_suite_catches_every_add_chaff(sandbox):
    verdict = judged(sandbox, "add", HONEST_ADD)
    assert verdict.valid and verdict.caught_count() == len(chaff_labels("add")) == 4


def test_a_suite_that_runs_past_its_time_is_invalid_with_why(sandbox):
    verdict = judged(sandbox, "causal_mask", """
        import time

        def test_sleeps():
            time.sleep(60)
    """, run_seconds=2.0)
    assert not verdict.valid and "timed out after 2 s" in verdict.why_nothing()


# ----------------------------------------------------------------------------
# The oracle, on the grader's side
# ----------------------------------------------------------------------------


def test_the_oracle_answers_a_malformed_question_with_an_error_and_never_raises():
    from homework.testwriting.wheats import AddPlain, CausalMaskTriu

    oracle = Oracle(AddPlain, testwriting.TARGETS["add"])
    for question in [None, {"do": "forward"}, {"do": "backward", "handle": 7, "grad": np.ones(2)},
                     {"do": "call", "args": [3]}, {"do": "forward", "arrays": [np.ones(2)], "options": {}, "needs": []},
                     {"do": "unknown"}]:
        answer = oracle.answer(question)
        assert set(answer) == {"error"} and answer["error"]["type"] == "RuntimeError", question
    answer = oracle.answer({"do": "forward", "arrays": [np.ones((2, 3)), np.ones(4)], "options": {},
                            "needs": [True, True]})
    assert answer["error"]["type"] == "ValueError" and "broadcast" in answer["error"]["message"]
    start = time.perf_counter()
    answer = Oracle(CausalMaskTriu, testwriting.TARGETS["causal_mask"]).answer({"do": "call", "args": [2, None]})
    assert time.perf_counter() - start >= FLOOR_SECONDS
    np.testing.assert_array_equal(answer["out"], [[False, True], [False, False]])


def test_every_answer_takes_as_long_as_the_slowest_implementation_of_the_op():
    """Timing a call on a large input told a layer norm that skips work (a chaff) from the correct
    ones: every answer now waits for every other implementation of the op to do the same question
    (forward; for a backward, the forward on the same inputs and then the backward), the one under
    test too (its backward alone was faster than the others' forward and backward: a blind review
    told the slowest wheat by it), each on a memory of its own, and waits out the longest. Shown
    with a stand-in other implementation that sleeps."""
    from homework.testwriting.wheats import AddPlain

    asked = []

    class Slow:
        @staticmethod
        def forward(ctx, a, b):
            asked.append(("forward", a.shape, b.shape, ctx.needs_input_grad))
            ctx.memory["calls"] = ctx.memory.get("calls", 0) + 1
            time.sleep(0.05)
            return a + b

        @staticmethod
        def backward(ctx, grad):
            asked.append(("backward", grad.shape))
            time.sleep(0.05)
            return grad, grad

    oracle = Oracle(AddPlain, testwriting.TARGETS["add"], others=[AddPlain, Slow])
    start = time.perf_counter()
    answer = oracle.answer({"do": "forward", "arrays": [np.ones((2, 3)), np.ones(3)], "options": {},
                            "needs": [True, False]})
    assert time.perf_counter() - start >= 0.05 and answer["out"].shape == (2, 3)
    start = time.perf_counter()
    grads = oracle.answer({"do": "backward", "handle": answer["handle"], "grad": np.full((2, 3), 2.0)})["grads"]
    assert time.perf_counter() - start >= 0.1  # the other's forward and backward
    np.testing.assert_array_equal(grads[0], np.full((2, 3), 2.0))  # the answer is the implementation's own
    assert asked == [("forward", (2, 3), (3,), (True, False)), ("forward", (2, 3), (3,), (True, False)),
                     ("backward", (2, 3))]
    assert oracle.memory == {} and oracle.other_memories == [{}, {"calls": 2}]  # each keeps its own memory


def test_an_error_an_implementation_raises_names_the_op_never_the_implementation():
    """A blind review's cheat: an unexpected keyword makes Python name the function that raised
    ("AddPlain.forward() got an unexpected keyword argument"), which told the tests which
    implementation they ran against. Every implementation's answer must read the same."""
    from homework.testwriting.catalogue import implementations

    for op, question in [("add", {"do": "forward", "arrays": [np.ones(2), np.ones(2)], "options": {"zzz": 1},
                                  "needs": [True, True]}),
                         ("index", {"do": "forward", "arrays": [np.ones(2)], "options": {"zzz": 1}, "needs": [True]}),
                         ("causal_mask", {"do": "call", "args": [2, 2, 2]})]:
        messages = set()
        for implementation in implementations(op):
            code = implementation.code
            answer = Oracle(code, testwriting.TARGETS[op]).answer(question)
            message = answer["error"]["message"]
            assert code.__name__ not in message, (op, message)
            messages.add(message)
        assert len(messages) == 1, (op, messages)
        assert testwriting.TARGETS[op].name in messages.pop()


def test_a_visible_message_counts_only_the_public_chaffs():
    """A blind review read the hidden chaffs' results off a public chaff's message ("caught 1 of 2 (0 of
    the 1 public ones)": one hidden caught), one guess per submission. Visible text counts public ones."""
    from homework.testwriting.catalogue import implementations
    from homework.testwriting.judge import Verdict

    chaffs = implementations("index", include=("public", "hidden"))
    verdict = Verdict("index", chaffs)
    verdict.caught = {c.label: c.kind == "hidden" for c in chaffs}  # every hidden one caught, no public one
    public = [c for c in chaffs if c.kind == "public"]
    assert verdict.public_summary() == f"caught 0 of the {len(public)} public buggy implementations"
    graded = (pathlib.Path(__file__).parent / "test_testwriting_graded.py").read_text()
    assert "verdict.public_summary()" in graded and "verdict.summary()" not in graded


def test_an_index_crosses_the_wire_as_it_was_written():
    from homework.testwriting.runner import encode_index
    from homework.worker import decode, encode

    for index in [1, (slice(1, None), slice(None, None, 2)), [0, 2, 0], (np.array([[0, 1], [1, 1]]), Ellipsis, None),
                  np.array([True, False, True]), (0, [1, 1])]:
        back = decode_index(decode(encode(encode_index(index))))
        x = np.arange(60).reshape(3, 4, 5)
        np.testing.assert_array_equal(x[back], x[index])
        assert type(back) is type(index)


# ----------------------------------------------------------------------------
# The student copy: no wheat, no hidden chaff, starters; practice works there
# ----------------------------------------------------------------------------


def test_the_copy_has_starters_and_no_wheat_or_hidden_chaff_and_practice_runs_there(tmp_path, worker_python):
    keep = ["topological_order", "elementwise_backward", "unbroadcast", "reductions", "gradcheck_central_difference"]
    copy = homework.strip(tmp_path / "student", keep=keep)
    folder = copy / "homework" / "testwriting"
    assert (folder / "public_chaffs.py").is_file() and (folder / "runner.py").is_file()
    assert not (folder / "wheats.py").exists() and not (folder / "hidden_chaffs.py").exists()
    assert not (copy / "tests" / "test_testwriting_graded.py").exists()
    starter = (copy / "tests" / "student" / "test_add.py").read_text()
    assert "def test" not in starter and "# Task tests_add: write tests that pass" in starter
    (copy / "tests" / "student" / "test_add.py").write_text(textwrap.dedent(ONES_AND_SQUARE["add"]))
    env = dict(copy_environment(copy), MINITENSOR_WORKER_PYTHON=worker_python)
    run = subprocess.run([sys.executable, "-m", "homework", "practice", "--op", "add"], cwd=copy, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "add: caught 1 of 4 buggy implementations (1 of the 4 public ones)" in run.stdout, run.stdout + run.stderr
    assert "an input that would catch it: an upstream gradient that is not all ones" in run.stdout
    assert os.path.exists(copy / "tests" / "student" / "test_softmax.py")


INDEX_WITH_ONES = """
import numpy as np
import minitensor as mt


def test_a_repeated_index_adds_its_gradients():
    x = mt.tensor(np.random.randn(3, 4), requires_grad=True)
    x[[0, 2, 0]].sum().backward()
    expected = np.zeros((3, 4))
    expected[0], expected[2] = 2, 1
    np.testing.assert_allclose(x.grad, expected)
"""


def test_the_gradescope_autograder_grades_a_students_tests_and_hides_the_hidden_chaffs(tmp_path, worker_python):
    keep = ["topological_order", "elementwise_backward", "unbroadcast", "reductions", "gradcheck_central_difference"]
    copy = homework.strip(tmp_path / "student", keep=keep)
    (copy / "tests" / "student" / "test_index.py").write_text(INDEX_WITH_ONES)
    archive = homework.bundle(tmp_path / "autograder.zip", tasks=["tests_index"])
    with zipfile.ZipFile(archive) as zipped:
        names = set(zipped.namelist())
    assert {"tests/test_testwriting_graded.py", "grader/minitensor_grader/testwriting/hidden_chaffs.py",
            "grader/minitensor_grader/testwriting/wheats.py"} <= names  # the grader's side holds them
    document = rehearse(archive, copy, python=worker_python)
    (public,) = [test for test in document["tests"] if "[index-public-buggy-implementation-1]" in test["name"]]
    (hidden,) = [test for test in document["tests"] if "[index-hidden-buggy-implementation-1]" in test["name"]]
    assert public["name"].startswith("tests_index: ") and hidden["name"].endswith(" (hidden)"), document["tests"]
    assert public["score"] == public["max_score"] == 5 and public["visibility"] == "visible"
    assert hidden["score"] == 0 and hidden["visibility"] == "after_published" and "hidden test" in hidden["output"]
    assert document["score"] == 5 and "ones" not in document["output"]  # a hidden chaff's hint is never shown


def test_a_test_that_fails_a_correct_implementation_on_a_later_seed_alone_makes_the_file_invalid(sandbox):
    """Every implementation runs on every seed (judge.SEEDS): a test wrong on seed 2 only (NumPy's
    generator seeded with 2 before it, as before every test) is still found wrong, on a wheat."""
    assert len(testwriting.SEEDS) == 3
    on_seed_2 = float(np.random.RandomState(2).random_sample())  # np.random.seed(2); np.random.random()
    verdict = judged(sandbox, "add", f"""
        import numpy as np

        def test_fails_on_seed_two_alone():
            assert np.random.random() != {on_seed_2!r}
    """)
    assert not verdict.valid and verdict.invalid, verdict.summary()
    assert {seed for _, _, seed, _ in verdict.invalid} == {2}, verdict.invalid
