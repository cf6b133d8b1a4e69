"""The grader's side of a substituted op: the implementation under test runs here, in the grader,
never in the worker. The worker's stand-in (runner.py) sends each forward, backward or call as a
question (`ask_grader`); `Oracle.answer` runs the implementation on the arrays that came and sends
back plain arrays. So the student's process holds the same stand-in code whichever implementation
it is tested against: nothing in it (source, module, qualname, bytecode) says which one it is.

Every answer takes as long as the slowest implementation of the op takes on that question, and at
least FLOOR_SECONDS: after answering, the oracle runs the same question through every
implementation (`others`, this one too: their answers thrown away, each on a memory of its own) and
waits out the longest, so that timing a call, on inputs of any size, tells no implementation from another. An
oracle lives for one run; `ctx.memory` is what an implementation may keep from call to call within
it (a bug that makes a gradient right only on the first call)."""

import importlib
import re
import time

import numpy as np

FLOOR_SECONDS = 0.001
MAX_NODES = 200_000  # forward calls one run may keep for backward
MAX_KEPT_MB = 512  # the arrays kept for backward, in all
ERRORS = ("ValueError", "IndexError", "TypeError", "RuntimeError", "FloatingPointError", "ZeroDivisionError")


def _implementation_names():
    """A pattern matching every name defined in the implementations' modules (and the modules' own)."""
    modules = []
    for name in ("wheats", "public_chaffs", "hidden_chaffs"):  # a student copy has only the public ones
        try:
            modules.append(importlib.import_module(f"{__package__}.{name}"))
        except ImportError:
            pass
    names = set()
    for module in modules:
        names |= {name for name, value in vars(module).items()
                  if not name.startswith("__") and getattr(value, "__module__", None) == module.__name__}
        names.add(module.__name__.rsplit(".", 1)[-1])
    return re.compile("|".join(rf"\b{re.escape(name)}\b" for name in sorted(names, key=len, reverse=True)))


class OracleContext:
    """What an implementation's forward and backward share, as minitensor's Context."""

    def __init__(self, needs_input_grad, memory):
        self.needs_input_grad = needs_input_grad
        self.memory = memory
        self.saved_tensors = ()

    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays


class StudentQuestionError(Exception):
    """A question no stand-in asks (the student's code asked it): answered as an error."""


def decode_index(encoded, depth=0):
    """The index runner.encode_index wrote: ints, slices, None, Ellipsis, arrays, lists and tuples."""
    if depth > 16 or type(encoded) is not dict or len(encoded) != 1:
        raise StudentQuestionError("a malformed index")
    (kind, value), = encoded.items()
    if kind == "tuple":
        return tuple(decode_index(item, depth + 1) for item in value)
    if kind == "list":
        return [decode_index(item, depth + 1) for item in value]
    if kind == "slice":
        return slice(*[None if part is None else _integer(part) for part in value][:3])
    if kind == "ellipsis":
        return Ellipsis
    if kind == "none":
        return None
    if kind == "value":
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biu":
                raise IndexError(f"index: arrays used as indices must be of integer or boolean type, not {value.dtype}")
            return value
        if type(value) in (int, bool):
            return value
    raise StudentQuestionError("a malformed index")


def _integer(value):
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    if type(value) is int:
        return value
    raise TypeError(f"slice indices must be integers or None, got {value!r:.40}")


class Oracle:
    """Answers the questions of one run against one implementation (a wheat or a chaff)."""

    def __init__(self, implementation, target, others=()):
        self.implementation, self.target = implementation, target
        # every implementation, this one too: its own answer to a backward is the backward alone, the
        # others' a forward and a backward; timed the same way, the one under test cannot be the fastest
        self.others = list(others)
        self.memory, self.nodes, self.kept_bytes = {}, {}, 0
        self.inputs = {}  # handle: (arrays, options, needs) of its forward, for the others' backward
        self.other_memories = [{} for _ in self.others]

    def answer(self, question):
        start = time.perf_counter()
        try:
            reply = self._answer(question)
        except StudentQuestionError as error:
            reply = {"error": {"type": "RuntimeError", "message": f"the grader refused a question: {error}"}}
        except Exception as error:  # the implementation's own error on these inputs, as the real op raises it
            name = type(error).__name__
            reply = {"error": {"type": name if name in ERRORS else "RuntimeError",
                               "message": self.unnamed(str(error)[:500])}}
        longest = max([time.perf_counter() - start] + [self._time_of(other, memory, question)
                                                        for other, memory in zip(self.others, self.other_memories)])
        left = max(FLOOR_SECONDS, longest) - (time.perf_counter() - start)
        if left > 0:
            time.sleep(left)
        return reply

    def _time_of(self, other, memory, question):
        """The seconds `other` takes on `question` (a backward: its forward on the same inputs, then the
        backward), its answer and errors thrown away."""
        start = time.perf_counter()
        try:
            do = question.get("do") if type(question) is dict else None
            if do == "call" and self.target.kind == "function":
                other.call(None, *[_integer_argument(arg) for arg in question.get("args") or []])
            elif do in ("forward", "backward") and self.target.kind == "function_class":
                arrays, options, needs = (self._decoded(question) if do == "forward"
                                          else self.inputs.get(question.get("handle"), (None, None, None)))
                if arrays is not None:
                    ctx = OracleContext(needs, memory)
                    out = other.forward(ctx, *arrays, **options)
                    if do == "backward" and isinstance(question.get("grad"), np.ndarray):
                        other.backward(ctx, question["grad"] if np.shape(out) == question["grad"].shape
                                       else np.ones_like(np.asarray(out)))
        except Exception:  # noqa: BLE001 (an implementation's error costs what it cost)
            pass
        return time.perf_counter() - start

    def _decoded(self, question):
        arrays, options, needs = question.get("arrays"), question.get("options"), question.get("needs")
        if (type(arrays) is not list or not all(isinstance(a, np.ndarray) for a in arrays)
                or type(options) is not dict or type(needs) is not list or len(needs) != len(arrays)):
            return None, None, None
        if "index" in options:
            options = dict(options, index=decode_index(options["index"]))
        return arrays, options, tuple(bool(n) for n in needs)

    def unnamed(self, message):
        """`message` with every name of the implementations (their classes, functions and module) put as
        the op's own name: Python's errors name the function that raised (`AddPlain.forward() got an
        unexpected keyword argument`), which would tell a test which implementation it runs against."""
        return IMPLEMENTATION_NAMES.sub(self.target.name, message)

    def _answer(self, question):
        if type(question) is not dict:
            raise StudentQuestionError("not a question")
        do = question.get("do")
        implementation = self.implementation
        if do == "call" and self.target.kind == "function":
            args = question.get("args")
            if type(args) is not list or len(args) > 4:
                raise StudentQuestionError("malformed arguments")
            args = [_integer_argument(arg) for arg in args]
            return {"out": np.asarray(implementation.call(None, *args))}
        if self.target.kind != "function_class":
            raise StudentQuestionError(f"{do!r} is not a question for {self.target.name}")
        if do == "forward":
            arrays, options, needs = question.get("arrays"), question.get("options"), question.get("needs")
            if (type(arrays) is not list or not all(isinstance(a, np.ndarray) for a in arrays)
                    or type(options) is not dict or type(needs) is not list or len(needs) != len(arrays)):
                raise StudentQuestionError("a malformed forward")
            if len(self.nodes) >= MAX_NODES:
                raise StudentQuestionError(f"more than {MAX_NODES} forward calls in one run")
            size = sum(a.nbytes for a in arrays)
            if self.kept_bytes + size > MAX_KEPT_MB * 2**20:
                raise StudentQuestionError(f"the tests kept more than {MAX_KEPT_MB} MB of inputs for backward")
            if "index" in options:
                options = dict(options, index=decode_index(options["index"]))
            ctx = OracleContext(tuple(bool(n) for n in needs), self.memory)
            out = np.asarray(implementation.forward(ctx, *arrays, **options))
            handle = len(self.nodes)
            self.nodes[handle] = ctx
            if self.others:
                self.inputs[handle] = (arrays, options, ctx.needs_input_grad)
            self.kept_bytes += size
            return {"out": out, "handle": handle}
        if do == "backward":
            handle, grad = question.get("handle"), question.get("grad")
            if type(handle) is not int or handle not in self.nodes or not isinstance(grad, np.ndarray):
                raise StudentQuestionError("a malformed backward")
            grads = implementation.backward(self.nodes[handle], grad)
            grads = list(grads) if isinstance(grads, tuple) else [grads]
            return {"grads": [None if g is None else np.asarray(g) for g in grads]}
        raise StudentQuestionError(f"unknown question {do!r:.40}")


def _integer_argument(value):
    if value is None:
        return None
    number = _integer(value)
    if not 0 <= number <= 4096:
        raise ValueError(f"causal_mask: sizes from 0 to 4096 are tested here, got {number}")
    return number


IMPLEMENTATION_NAMES = _implementation_names()
