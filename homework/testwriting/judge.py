"""Judging a student's tests for one op, as Examplar does ("Who Tests the Testers?", ICER 2018):
the test file runs against each correct implementation (a wheat) and each buggy one (a chaff),
each in a fresh process (runner.py), every one on the same seeds. A test
that fails a wheat on any seed makes the file invalid: it earns nothing, and the feedback names
the test, the wheat (by its neutral label) and the seed, never the wheat's code. A valid file's
score is the share of chaffs it catches (some test fails on it); when a public chaff survives,
its hint says what kind of input would have caught it.

    verdict = judge("softmax", source, new_worker, kill_all=True)
    verdict.invalid        [(test, label, seed, message)] failures on wheats
    verdict.caught         {chaff label: caught?}
    verdict.summary()      "caught 5 of 7 ..." or why the file earns nothing

The runs go in a random order (secrets), and each starts from a template process that never ran
student code, so neither the order, nor what an earlier run left, nor a warm cache says which
implementation a run is against.
"""

import ast
import secrets
import time

from ..sandbox import StudentError, WorkerDied, WorkerTimedOut
from .catalogue import implementations
from .oracle import Oracle
from .targets import TARGETS

SEEDS = (0, 1, 2)
RUN_SECONDS = 20.0  # one run: the whole file, once per seed


class Verdict:
    def __init__(self, op, chaffs):
        self.op = op
        self.chaffs = chaffs
        self.empty = False
        self.too_slow = None
        self.invalid = []
        self.caught = {}
        self.seconds = 0.0

    @property
    def valid(self):
        return not self.empty and not self.invalid and self.too_slow is None

    def caught_count(self, kinds=("public", "hidden")):
        return sum(self.caught.get(c.label, False) for c in self.chaffs if c.kind in kinds) if self.valid else 0

    def missed_hints(self):
        """[(label, hint)] of the public chaffs the valid tests let pass."""
        if not self.valid:
            return []
        return [(c.label, c.hint) for c in self.chaffs if c.kind == "public" and not self.caught[c.label]]

    def why_nothing(self):
        """Why the file earns nothing, or None when it is valid."""
        if self.empty:
            return f"no tests: tests/student/test_{self.op}.py has no function named test_... (an empty suite scores 0)"
        if self.too_slow:
            return self.too_slow
        if self.invalid:
            lines = [f"your tests are invalid (thoroughness unknown), so this file earns nothing until it is fixed: "
                     f"{len(self.invalid)} failure(s) on correct implementations, which a test must pass"]
            for test, label, seed, message in self.invalid[:6]:
                lines.append(f"  {test} fails on {label} (seed {seed}): {message}")
            return "\n".join(lines)
        return None

    def public_summary(self):
        """"caught N of the P public ones": what a visible message may say (the hidden chaffs' count and
        results are a hidden test's, withheld until publication)."""
        public = [c for c in self.chaffs if c.kind == "public"]
        return f"caught {self.caught_count(('public',))} of the {len(public)} public buggy implementations"

    def summary(self):
        total = len(self.chaffs)
        if not self.valid:
            return f"caught 0 of {total}: " + self.why_nothing()
        public = [c for c in self.chaffs if c.kind == "public"]
        text = f"caught {self.caught_count()} of {total} buggy implementations"
        if public:
            text += f" ({self.caught_count(('public',))} of the {len(public)} public ones)"
        for label, hint in self.missed_hints():
            text += f"\n  {label} passed all your tests; an input that would catch it: {hint}"
        return text


def has_tests(source):
    """Whether the file defines a test function (an empty or test-less file is judged without runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # a run reports the error, on every implementation
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
               for node in tree.body)


def judge(op, source, new_worker, kill_all, seeds=SEEDS, run_seconds=RUN_SECONDS, budget=None,
          include=("wheat", "public", "hidden"), extra_wheats=()):
    """The Verdict on `source` (a student's test file for `op`). `new_worker()` gives a sandbox
    Worker; `kill_all` whether a run may kill every other process of the worker's user (its user or
    PID namespace is its own); `budget` the seconds all runs may take; `extra_wheats` more
    implementations that must pass (practice: None, the copy's own op)."""
    start = time.perf_counter()
    target = TARGETS[op]
    found = implementations(op, include)
    chaffs = [i for i in found if i.kind != "wheat"]
    verdict = Verdict(op, chaffs)
    if not has_tests(source):
        verdict.empty = True
        return verdict
    runs = [i for i in found if i.kind == "wheat"] + list(extra_wheats) + chaffs
    secrets.SystemRandom().shuffle(runs)
    wire_target = {"module": target.module, "name": target.name, "kind": target.kind}
    worker = new_worker()
    try:
        for implementation in runs:
            left = None if budget is None else budget - (time.perf_counter() - start)
            if left is not None and left < 1:
                verdict.too_slow = (f"your tests took more than {budget:g} s over the {len(runs)} implementations "
                                    f"({len(seeds)} seeds each): make them smaller or fewer")
                break
            # Every implementation runs on the same seeds, in the same order, with the same arguments:
            # nothing the student's process holds (frames, arguments, call order) tells a wheat from a
            # chaff (a test that read the seeds once "caught" every chaff). A wheat that fails on any
            # seed makes the file invalid; a chaff is caught when a test fails on any seed.
            failures = _run(worker, source, op, implementation, wire_target, seeds, kill_all,
                            run_seconds if left is None else min(run_seconds, left), everyone=runs)
            if implementation.kind == "wheat":
                verdict.invalid += [(test, implementation.label, seed, message) for test, seed, message in failures]
            else:
                verdict.caught[implementation.label] = bool(failures)
    finally:
        worker.stop()
    verdict.seconds = time.perf_counter() - start
    return verdict


def _run(worker, source, op, implementation, target, seeds, kill_all, seconds, everyone=()):
    """[(test, seed, message)] of the tests that failed in one run against `implementation`."""
    oracle = (Oracle(implementation.code, TARGETS[op], others=[other.code for other in everyone if other.code])
              if implementation.code is not None else None)
    if worker.process is None or worker.process.poll() is not None:
        worker.start(import_copy=False)
    try:
        value = worker.ask({"do": "run_tests", "args": [source, f"test_{op}", target if oracle else None,
                                                       list(seeds), kill_all]},
                           seconds=seconds, answer_asks=oracle.answer if oracle else None)
    except WorkerTimedOut:
        return [("(the whole file)", seeds[0], f"timed out after {seconds:g} s")]
    except (WorkerDied, StudentError) as error:
        return [("(the whole file)", seeds[0], str(error)[:600])]
    if type(value) is not dict or ("tests" not in value and "error" not in value):
        return [("(the whole file)", seeds[0], "the run's results did not come back in the grader's format")]
    if "error" in value:
        return [("(the whole file)", seeds[0], str(value["error"])[:600])]
    failures = []
    for entry in value["tests"] if type(value["tests"]) is list else [None]:
        if type(entry) is not dict or type(entry.get("passed")) is not bool:
            return [("(the whole file)", seeds[0], "the run's results did not come back in the grader's format")]
        if not entry["passed"]:
            failures.append((str(entry.get("test"))[:200], entry.get("seed"), str(entry.get("message"))[:600]))
    return failures
