"""The grader's hold on the student's code: objects that live in the worker, reached by requests.

A graded test's probe runs here, in the grader, and reaches the copy through a `side`:

    def probe_softmax(side, x, dy):
        mt = side.module("minitensor")           # a Remote: the copy's minitensor, in the worker
        t = mt.tensor(x, requires_grad=True)     # each attribute, call or operator is one request
        t.softmax(axis=-1).backward(dy)
        return {"dx": t.grad}                    # plain data comes back as data: an ndarray here

`side.module(name)` and `side.toolbox(name)` (worker.TOOLBOX) give the first objects. A Remote
forwards attribute reads and writes, calls, indexing, `len`, iteration, `with` and the arithmetic
operators to the worker (worker.py lists the requests); what comes back is plain data (arrays,
numbers, strings, None, and lists, tuples and string-keyed dicts of them) or another Remote.
Nothing the worker sends is ever run here: it is data, or a number that names an object there.

The same probe runs on the teacher's code with `LocalSide()` (the real modules, in this process),
which is how the graph feedback makes its reference (tests/_graph_feedback.py), and over the same
wire format in this process with `loopback_side()` (the test suite's `student`), so that what a
test reads is what a grading reads.
"""

import importlib
import re

from .sandbox import StudentError
from .worker import TOOLBOX, Handle, Objects, answer_request, decode, describe_error, encode, resolved


def _text(value, limit):
    return value[:limit] if type(value) is str else ""


UNSOLVED = re.compile(r"Task \w{1,60}: ")


def raised_for(error):
    """The grader-side exception for the student's, read as data (the worker is the student's
    process: what it sends is checked and cut to length here): a stub's NotImplementedError keeps
    its 'Task NAME: hint' message (so the grade says which task blocks which); anything else is a
    StudentError with the student's file and line."""
    error = error if type(error) is dict else {}
    unsolved = _text(error.get("unsolved"), 1000)
    if unsolved and UNSOLVED.match(unsolved):
        return NotImplementedError(unsolved)
    kind, message, where = _text(error.get("type"), 100) or "an error", _text(error.get("message"), 2000), \
        _text(error.get("where"), 300)
    where = f" ({where})" if where else ""
    message = f"{kind}: {message}" if message else kind
    return StudentError(f"your code raised {message}{where}")


class RemoteError(Exception):
    """A Remote used where only plain data will do (a probe that returns one, say)."""


class Remote:
    """An object of the student's, kept in the worker; every use of it is a request."""

    __slots__ = ("_side", "handle_number", "__weakref__")
    _remote_handle = True  # worker.encode sends it as {"h": number}

    def __init__(self, side, number):
        object.__setattr__(self, "_side", side)
        object.__setattr__(self, "handle_number", number)

    def __repr__(self):  # never the student's own repr: text the grader prints is its own
        return f"<the student's object {self.handle_number}>"

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy, pickle and friends look these up: not the student's to answer
        return self._side.ask({"do": "getattr", "of": self, "name": name})

    def __setattr__(self, name, value):
        self._side.ask({"do": "setattr", "of": self, "name": name, "value": value})

    def __call__(self, *args, **kwargs):
        return self._side.ask({"do": "call", "of": self, "args": list(args), "kwargs": kwargs})

    def __getitem__(self, key):
        return self._side.ask({"do": "getitem", "of": self, "key": key})

    def __len__(self):
        length = self._side.ask({"do": "operator", "name": "len", "args": [self]})
        if type(length) is not int or length < 0:
            raise RemoteError(f"len() of the student's object was {type(length).__name__}, not a whole number")
        return length

    def __iter__(self):
        items = self._side.ask({"do": "items", "of": self})
        if type(items) is not list:
            raise RemoteError("iterating over the student's object did not give a list of items")
        return iter(items)

    def __enter__(self):
        return self.__getattr("__enter__")()

    def __exit__(self, *exception):
        self.__getattr("__exit__")(None, None, None)
        return False

    def __getattr(self, name):
        return self._side.ask({"do": "getattr", "of": self, "name": name})

    def __bool__(self):
        return True  # a handle is something; a truth the student's code computes is asked for by name

    def _operator(self, name, *args):
        return self._side.ask({"do": "operator", "name": name, "args": list(args)})

    def __add__(self, other):
        return self._operator("add", self, other)

    def __radd__(self, other):
        return self._operator("add", other, self)

    def __sub__(self, other):
        return self._operator("sub", self, other)

    def __rsub__(self, other):
        return self._operator("sub", other, self)

    def __mul__(self, other):
        return self._operator("mul", self, other)

    def __rmul__(self, other):
        return self._operator("mul", other, self)

    def __truediv__(self, other):
        return self._operator("truediv", self, other)

    def __rtruediv__(self, other):
        return self._operator("truediv", other, self)

    def __matmul__(self, other):
        return self._operator("matmul", self, other)

    def __rmatmul__(self, other):
        return self._operator("matmul", other, self)

    def __pow__(self, other):
        return self._operator("pow", self, other)

    def __rpow__(self, other):
        return self._operator("pow", other, self)

    def __neg__(self):
        return self._operator("neg", self)

    def __eq__(self, other):  # identity of the student's objects (the worker gives one object one number)
        return type(other) is Remote and other._side is self._side and other.handle_number == self.handle_number

    def __hash__(self):
        return hash((id(self._side), self.handle_number))


def contains_remote(value, depth=0):
    if type(value) is Remote:
        return True
    if depth < 64 and type(value) in (list, tuple):
        return any(contains_remote(item, depth + 1) for item in value)
    if depth < 64 and type(value) is dict:
        return any(contains_remote(item, depth + 1) for item in value.values())
    return False


class RemoteSide:
    """The copy as the worker holds it. `connection(request) -> answer` carries one request (a dict)
    there and brings its answer back as the worker wrote it (decoded with this side's handles)."""

    def __init__(self, connection):
        self.connection = connection

    def module(self, name):
        return self.ask({"do": "import", "module": name})

    def toolbox(self, name):
        if name not in TOOLBOX:
            raise KeyError(f"the worker's toolbox has no {name!r}; it has {', '.join(TOOLBOX)}")
        return self.ask({"do": "toolbox", "name": name})

    def ask(self, request):
        return self.connection(request, lambda number: Remote(self, number))

    def forget(self):
        """Drop every object the worker keeps for this side (after each probe)."""
        self.ask({"do": "forget"})


class LocalSide:
    """The teacher's code in this process: the same probe, on the real modules."""

    def module(self, name):
        return importlib.import_module(name)

    def toolbox(self, name):
        return TOOLBOX[name]

    def forget(self):
        pass


def loopback_side():
    """A RemoteSide whose worker is this process: each request and answer crosses the wire
    format (encode, decode) as a grading's would, with the objects kept in an Objects table."""
    objects = Objects()

    def connection(request, handles):
        arrived = decode(encode(request), Handle)
        try:
            reply = {"value": answer_request(resolved(arrived, objects), objects)}
        except BaseException as error:  # noqa: BLE001 (as the worker: every error is the answer)
            reply = {"error": describe_error(error)}
        answer = decode(encode(reply), handles)
        if "error" in answer:
            raise raised_for(answer["error"])
        return answer["value"]

    return RemoteSide(connection)
