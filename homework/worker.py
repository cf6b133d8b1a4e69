"""The worker: the one process that runs a student's code while it is graded.

The grader starts one per task (`sandbox.Worker`), in a folder that holds only the copy's
packages, with a scrubbed environment, resource limits and, when the grader runs as root,
another user's id. The worker holds no test: no assertion, reference, probe, seed or tolerance
ever reaches it. It answers requests that name public objects of the copy and plain values:

    {"do": "import", "module": "minitensor"}                    the module
    {"do": "toolbox", "name": "load_demo"}                      a function of TOOLBOX (below)
    {"do": "getattr", "of": OBJECT, "name": "grad"}             OBJECT.grad
    {"do": "setattr", "of": OBJECT, "name": "data", "value": V}
    {"do": "getitem", "of": OBJECT, "key": K}                   OBJECT[K]
    {"do": "call", "of": OBJECT, "args": [...], "kwargs": {}}   OBJECT(*args, **kwargs)
    {"do": "operator", "name": "mul", "args": [A, B]}           operator.mul(A, B) (a fixed list of operators)
    {"do": "items", "of": OBJECT}                               list(OBJECT)
    {"do": "forget"}                                            every object kept so far dropped
    {"do": "run_tests", "args": [...]}                          a test-writing task's run (testwriting/runner.py)

An answer is the result as plain data (arrays, numbers, strings, None; lists, tuples and dicts
with string keys of those) where it is plain data, and otherwise a handle, {"h": n}: the
object stays here, and a later request may name it. The grader (remote.py) does all the judging
on what comes back, as data; it reads the student's objects only through such requests.

This file is also the wire format both sides use (`write_message`, `read_message`), so it needs
only the standard library and NumPy, and runs as a plain script:

    python -I worker.py CODE_FOLDER TASK FD [SITE ...]   # requests on stdin, answers on descriptor FD

Its first message says it is ready (Python, NumPy and the copy's packages imported), so the
grader starts a test's clock only then. SITE folders (the student environment's packages) go on
sys.path after the copy.
"""

import ast
import importlib.abc
import io
import json
import os
import pathlib
import struct
import sys
import traceback

if __name__ == "__main__":  # the student environment's folders (argv[4:]) before NumPy is imported
    sys.path[1:1] = sys.argv[4:]

import numpy as np  # noqa: E402

MAX_MESSAGE = 64 * 2**20  # bytes: larger answers are refused before they are read
MAX_ARRAYS = 10_000
MAX_HEADER = 2**20  # bytes of JSON in one message: numbers and names; bulk data travels as arrays
FORBIDDEN = ("torch",)
CODE = "/nonexistent/"  # the copy's folder in the sandbox (set by main)


# ----------------------------------------------------------------------------
# The wire format: a JSON header, then each array as .npy bytes (allow_pickle=False)
# ----------------------------------------------------------------------------


class Handle:
    """An object kept on the worker's side, named by its number in a message ({"h": n})."""

    __slots__ = ("handle_number",)
    _remote_handle = True

    def __init__(self, number):
        self.handle_number = number


def _to_plain(value, arrays):
    """The JSON-able skeleton of `value`, with each array replaced by its index in `arrays`."""
    if value is None or type(value) in (bool, int, float, str):
        return {"v": value}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)  # a subclass arrives as its plain ndarray data
        if array.dtype.hasobject:
            raise TypeError(f"an array of Python objects (dtype {array.dtype}) cannot be sent; send numbers")
        arrays.append(array)
        return {"a": len(arrays) - 1}
    if type(value) is list:
        return {"l": [_to_plain(item, arrays) for item in value]}
    if type(value) is tuple:  # kept a tuple: NumPy's axis= takes a tuple, not a list
        return {"t": [_to_plain(item, arrays) for item in value]}
    if type(value).__dict__.get("_remote_handle") is True:  # a Handle, or a Remote (remote.py): sent as its number
        return {"h": int(value.handle_number)}
    if type(value) is dict and all(type(key) is str for key in value):
        return {"d": {key: _to_plain(item, arrays) for key, item in value.items()}}
    raise TypeError(f"a probe may return arrays, numbers, strings, None, lists and dicts with string keys; "
                    f"got {type(value).__module__}.{type(value).__qualname__}")


def _from_plain(skeleton, arrays, handles=None, depth=0):
    """The value of a skeleton; `handles(n)` gives the object a handle names (none: a handle is malformed)."""
    if type(skeleton) is not dict or len(skeleton) != 1 or depth > 64:
        raise ValueError("malformed message")
    (kind, content), = skeleton.items()
    if kind == "v":
        if content is not None and type(content) not in (bool, int, float, str):
            raise ValueError("malformed message")
        return _printable(content) if type(content) is str else content
    if kind == "a":
        return arrays[content]
    if kind == "l" and type(content) is list:
        return [_from_plain(item, arrays, handles, depth + 1) for item in content]
    if kind == "t" and type(content) is list:
        return tuple(_from_plain(item, arrays, handles, depth + 1) for item in content)
    if kind == "d" and type(content) is dict:
        return {_printable(str(key)): _from_plain(item, arrays, handles, depth + 1) for key, item in content.items()}
    if kind == "h" and handles is not None and type(content) is int:
        return handles(content)
    raise ValueError(f"malformed message: unknown kind {kind!r}")


def _printable(text):
    """`text` with lone surrogates (JSON allows them, UTF-8 does not) replaced, so that no string
    the worker sends can stop the grader when it is printed or written."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def encode(value):
    """`value` as bytes: header length and array count, the JSON header, each array's .npy bytes."""
    arrays = []
    header = json.dumps(_to_plain(value, arrays)).encode()
    parts = [struct.pack("<QI", len(header), len(arrays)), header]
    for array in arrays:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array, allow_pickle=False)
        parts += [struct.pack("<Q", buffer.tell()), buffer.getvalue()]
    return b"".join(parts)


def write_message(stream, value):
    data = encode(value)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def decode(data, handles=None):
    """The value `encode` wrote (with `handles`, see _from_plain). Arrays come back as plain
    ndarrays built here from their bytes; nothing in the message can run code on the reading
    side, and no array is allocated before its bytes are known to be there (a header that claims more is refused)."""
    view = memoryview(data)
    header_length, count = struct.unpack_from("<QI", view, 0)
    if count > MAX_ARRAYS or header_length > MAX_HEADER or 12 + header_length > len(view):
        raise ValueError(f"malformed message: a header of {header_length} bytes and {count} arrays (at most "
                         f"{MAX_HEADER} and {MAX_ARRAYS}; send large data as arrays)")
    offset = 12
    skeleton = json.loads(bytes(view[offset : offset + header_length]))
    offset += header_length
    arrays = []
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", view, offset)
        offset += 8
        if offset + length > len(view):
            raise ValueError("malformed message: an array claims more bytes than the message holds")
        arrays.append(_read_npy(view[offset : offset + length]))
        offset += length
    return _from_plain(skeleton, arrays, handles)


def _read_npy(buffer):
    """One .npy array from its bytes: the header read, its size checked against the bytes, then
    a copy made (never a pickle, never an allocation larger than what arrived)."""
    stream = io.BytesIO(buffer)
    version = np.lib.format.read_magic(stream)
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = reader(stream)
    if dtype.hasobject:
        raise ValueError("malformed message: an array of Python objects")
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    data = buffer[stream.tell():]
    if size < 0 or size * dtype.itemsize != len(data):
        raise ValueError(f"malformed message: an array of shape {shape} and dtype {dtype} in {len(data)} bytes")
    flat = np.frombuffer(data, dtype=dtype).copy()
    return flat.reshape(shape, order="F" if fortran else "C")


def read_message(stream, handles=None):
    """The next message from a binary stream, or None at its end."""
    prefix = stream.read(8)
    if len(prefix) < 8:
        return None
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes is over the limit of {MAX_MESSAGE}")
    data = stream.read(length)
    if len(data) < length:
        return None
    return decode(data, handles)


# ----------------------------------------------------------------------------
# The toolbox: glue the grader may ask for by name (no test, no reference, no answer)
# ----------------------------------------------------------------------------


def load_demo(name):
    """The definitions of demos/NAME.py (its imports, functions, classes and constant tables)
    without running its experiment, as a namespace: the functions a demo task asks for."""
    import demos

    path = pathlib.Path(demos.__file__).resolve().parent / f"{name}.py"
    tree = ast.parse(path.read_text(), str(path))
    kept = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))
            or isinstance(node, ast.Assign) and _is_literal(node.value)]
    namespace = {"__name__": f"demos.{name}", "__file__": str(path)}
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), namespace)
    return type("Demo", (), {key: value for key, value in namespace.items() if not key.startswith("__")})


def _is_literal(node):
    try:
        ast.literal_eval(node)
        return True
    except ValueError:
        return False


def plain_values(value):
    """`value` with every tensor (anything with an ndarray `.data` and a `grad_fn`) replaced by its
    array, through lists, tuples and dicts: a demo function's result as numbers."""
    if isinstance(getattr(value, "data", None), np.ndarray) and hasattr(value, "grad_fn"):
        return value.data
    if isinstance(value, (tuple, list)):
        return [plain_values(item) for item in value]
    if isinstance(value, dict):
        return {key: plain_values(item) for key, item in value.items()}
    return value


def with_weights(attend):
    """`attend` (models.attention's) always taking its materialised path (return_weights=True),
    so a model is graded before its fused kernel (a later task) is written."""

    def forward(q, k, v, mask=None, is_causal=False, scale=None, return_weights=False):
        out, weights = attend(q, k, v, mask, is_causal=is_causal, scale=scale, return_weights=True)
        return (out, weights) if return_weights else out

    return forward


def first_output(function, **options):
    """A function of the positional arguments that returns function(*args, **options)[0]."""
    return lambda *args: function(*args, **options)[0]


def token_by_token(module, new_cache, cat):
    """module run one token at a time over axis 1, each step reading the cache (causal), the
    steps concatenated: how a decoder uses a KV cache."""

    def run(x):
        cache, steps = new_cache(), []
        for t in range(x.shape[1]):
            steps.append(module(x[:, t : t + 1], is_causal=True, cache=cache))
        return cat(steps, axis=1)

    return run


def sum_sin_x_squared(t):
    """f for a central difference: f() = sum(sin(x) * x**2) of the tensor t's current values."""
    return lambda: float(np.sum(np.sin(t.data) * t.data**2))


def added_repeatedly(z, number, times):
    """z + number + number + ... (`times` additions, each an op the engine records): a long chain."""
    for _ in range(int(times)):
        z = z + number
    return z


def identity(value):
    """The object's id in this process (two handles of one object give the same number)."""
    return id(value)


TOOLBOX = {function.__name__: function for function in (load_demo, plain_values, with_weights, first_output,
                                                        token_by_token, sum_sin_x_squared, added_repeatedly, identity)}


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses the packages student code may not use while it is graded, with the rule."""

    def __init__(self, task):
        self.task = task

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"task {self.task}: student code may not import {name.split('.')[0]} while it is "
                              f"graded (the grader compares your code with PyTorch; your code must do the work itself)")
        return None


def describe_error(error):
    """What the grader is told of an exception: its type, message, the unsolved task it comes
    from (a stub's 'Task NAME: ...'), and the student's last frame."""
    unsolved, seen, cause = None, set(), error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, NotImplementedError) and str(cause).startswith("Task "):
            unsolved = str(cause)
            break
        cause = cause.__cause__ or cause.__context__
    frames = [(frame.filename, frame.lineno) for frame in traceback.extract_tb(error.__traceback__)
              if frame.filename.startswith(CODE)]
    if isinstance(error, SyntaxError) and error.filename:
        frames.append((error.filename, error.lineno))
    where = f"{os.path.relpath(frames[-1][0], CODE)}, line {frames[-1][1]}" if frames else ""
    return {"type": type(error).__name__, "message": str(error)[:2000], "unsolved": unsolved, "where": where}


OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos", "abs", "invert",
             "and_", "or_", "xor", "lt", "le", "eq", "ne", "gt", "ge", "contains", "not_", "truth", "len")
MAX_OBJECTS = 1_000_000
MAX_PLAIN_DEPTH = 8


class Objects:
    """The objects this worker keeps for the grader between requests, each under one number (the
    same object is always the same number, so the grader can tell two handles of one object)."""

    def __init__(self):
        self.kept, self.numbers = [], {}

    def keep(self, value):
        number = self.numbers.get(id(value))
        if number is None:
            if len(self.kept) >= MAX_OBJECTS:
                raise MemoryError(f"more than {MAX_OBJECTS} objects kept for the grader")
            number = self.numbers[id(value)] = len(self.kept)
            self.kept.append(value)
        return Handle(number)

    def get(self, number):
        if not 0 <= number < len(self.kept):
            raise LookupError(f"the grader named object {number}, which this worker does not keep")
        return self.kept[number]

    def forget(self):
        self.kept, self.numbers = [], {}


def _plain_or_kept(value, objects, depth=0):
    """`value` as it travels back: plain data as it is; lists, tuples and string-keyed dicts
    element by element; anything else kept here, as a handle."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if (type(value) is np.ndarray or isinstance(value, np.generic)) and not value.dtype.hasobject:
        return value
    if depth < MAX_PLAIN_DEPTH and type(value) in (list, tuple):
        return type(value)(_plain_or_kept(item, objects, depth + 1) for item in value)
    if depth < MAX_PLAIN_DEPTH and type(value) is dict and all(type(key) is str for key in value):
        return {key: _plain_or_kept(item, objects, depth + 1) for key, item in value.items()}
    return objects.keep(value)


def resolved(value, objects):
    """`value` (a request as read) with each Handle replaced by the object it names."""
    if isinstance(value, Handle):
        return objects.get(value.handle_number)
    if type(value) in (list, tuple):
        return type(value)(resolved(item, objects) for item in value)
    if type(value) is dict:
        return {key: resolved(item, objects) for key, item in value.items()}
    return value


def answer_request(request, objects):
    """What one request asks for (the module docstring lists them), as _plain_or_kept sends it."""
    import importlib
    import operator

    do = request.get("do")
    if do == "import":
        return _plain_or_kept(importlib.import_module(str(request["module"])), objects)
    if do == "toolbox":
        return objects.keep(TOOLBOX[str(request["name"])])
    if do == "getattr":
        return _plain_or_kept(getattr(request["of"], str(request["name"])), objects)
    if do == "setattr":
        setattr(request["of"], str(request["name"]), request["value"])
        return None
    if do == "getitem":
        return _plain_or_kept(request["of"][request["key"]], objects)
    if do == "call":
        return _plain_or_kept(request["of"](*request.get("args", []), **request.get("kwargs", {})), objects)
    if do == "operator":
        name = str(request["name"])
        if name not in OPERATORS:
            raise ValueError(f"the grader asked for operator {name!r}, which is not one of {OPERATORS}")
        function = len if name == "len" else getattr(operator, name)
        return _plain_or_kept(function(*request["args"]), objects)
    if do == "items":
        return [_plain_or_kept(item, objects, 1) for item in request["of"]]
    if do == "forget":
        objects.forget()
        return None
    if do == "run_tests":
        return _runner()["run_once"](*request["args"])
    raise ValueError(f"unknown request {do!r}")


def _runner():
    """testwriting/runner.py's functions, read afresh for each run from the file beside this one
    (the sandbox puts it there), with `ask_grader` at hand: what a test-writing task's run needs."""
    path = pathlib.Path(__file__).with_name("runner.py")
    if not path.is_file():  # this repository's own layout
        path = pathlib.Path(__file__).with_name("testwriting") / "runner.py"
    namespace = {"__name__": "runner", "ask_grader": lambda question: _ASK[0](question)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


_ASK = [None]  # the current request's way to ask the grader a question (run_tests)


def main(argv):
    global CODE
    code, task, descriptor = argv[1], argv[2], int(argv[3])
    CODE = os.path.join(code, "")
    answers = os.fdopen(descriptor, "wb")
    requests = sys.stdin.buffer
    os.dup2(2, 1)  # what student code prints goes to the log, never into the answers
    sys.path.insert(0, code)
    sys.meta_path.insert(0, _Refuse(task))
    hello = read_message(requests)  # the grader's first message: a nonce to answer when ready
    if hello is None:
        return 0
    if hello.get("memory_mb") is not None:  # before any student code runs, so none can undo it
        _limit_memory(float(hello["memory_mb"]))
    if hello.get("import_copy", True):  # a worker that forks a fresh process per run imports nothing of the copy
        try:
            import minitensor  # noqa: F401  (its import is start-up, not the test's time; an error recurs in the probe)
        except BaseException:
            pass
    _answer(answers, {"ready": hello["nonce"]})
    objects = Objects()
    while True:
        request = read_message(requests, Handle)
        if request is None:
            return 0
        nonce = request.get("nonce")  # the grader takes only the answer that carries it
        spent = bool(request.get("last", False))  # a call under a memory limit: this worker's last
        _ASK[0] = _asker(answers, requests, nonce)
        try:
            data = encode({"nonce": nonce, "value": answer_request(resolved(request, objects), objects)})
        except BaseException as error:  # SystemExit and KeyboardInterrupt too: each is one test's failure
            data = encode({"nonce": nonce, "error": describe_error(error)})
        _send(answers, data)
        if spent:
            return 0


def _asker(answers, requests, nonce):
    """`ask_grader(question)` for the test-writing runner: a question to the grader during the
    request (answered when the grader called with `answer_asks`, testwriting/oracle.py)."""

    def ask_grader(question):
        _send(answers, encode({"nonce": nonce, "ask": question}))
        reply = read_message(requests)
        if reply is None:
            raise EOFError("the grader stopped answering")
        return reply

    return ask_grader


IMPORT_ALLOWANCE_MB = 16  # what importing the copy's packages adds once NumPy and SciPy are in


def _limit_memory(megabytes):
    """Let this process (and what it starts) grow by `megabytes` MiB at most beyond NumPy, SciPy,
    a warmed-up BLAS and the copy's import: RLIMIT_AS, soft and hard, set here before the copy is
    imported (a lowered hard limit cannot be raised again without privilege)."""
    import resource

    import numpy

    try:
        import scipy.special  # noqa: F401  (what minitensor imports: its address space counts as the baseline)
        import threadpoolctl  # noqa: F401
    except ImportError:
        pass
    square = numpy.ones((512, 512))
    square @ square  # BLAS sets up its threads' buffers now, not under the limit
    status = pathlib.Path("/proc/self/status").read_text()
    size = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmSize:"))) * 1024
    limit = size + int((IMPORT_ALLOWANCE_MB + megabytes) * 2**20)
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _answer(stream, value):
    _send(stream, encode(value))


def _send(stream, data):
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
