"""The worker's side of a test-writing task: runs a student's test file against one implementation
of an op, in a fresh process. This file's text is the probe the grader sends (sandbox.Worker.call);
it needs only the standard library and NumPy, and `ask_grader` (worker.py) to reach the oracle.

    run_once(source, module_name, target, seeds, kill_all)   # in the worker: one run

The worker is started without importing the copy (`start(import_copy=False)`), so it holds nothing
of the student's code: it is a template. Each run forks a child from it; the child imports the
student's minitensor, puts the stand-in in place of the op (`install`), and runs every test of the
file once per seed (NumPy's, Python's and mt.manual_seed's generators seeded before each test).
The stand-in has the op's own class, name, module and qualname, and the same code whichever
implementation answers (oracle.py, in the grader). When the child ends, whatever it started is
killed (every other process of the worker's user, when the worker has a user or a PID namespace of
its own) and its home and temporary folder are emptied, so no run leaves anything to the next.

What a test file may use while graded: NumPy, minitensor (and models), plain asserts, numpy.testing,
and a small `pytest` (raises, approx, mark.parametrize, skip, fail): the worker has no PyTorch and
no real pytest. A test is a module-level function whose name starts with `test`.
"""

import importlib.machinery
import json
import os
import signal
import sys


def run_once(source, module_name, target, seeds, kill_all):
    """{"tests": [{"test", "seed", "passed", "message"}]} of one run, or {"error": why}."""
    _not_traceable()
    _preload()
    compiled = _compiled_copy()
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: student code runs here, and nowhere else
        os.close(read_end)
        try:
            os.setpgid(0, 0)
            _not_traceable(False)  # the child is an ordinary process again (its /proc entries its own)
            sys.meta_path.insert(0, _CompiledFinder(compiled))
            data = json.dumps(_run_tests(source, module_name, target, seeds)).encode()
        except BaseException as error:  # noqa: BLE001 (whatever ends the run is its result)
            data = json.dumps({"error": f"{type(error).__name__}: {error}"[:1000]}).encode()
        try:
            os.write(write_end, data[: 8 * 2**20])
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 20)
        if not chunk or sum(map(len, chunks)) > 8 * 2**20:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(child, 0)
    _clean_up(child, kill_all)
    try:
        result = json.loads(b"".join(chunks))
    except ValueError:
        how = f"signal {-os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.WEXITSTATUS(status)}"
        return {"error": f"the tests ended the process before reporting ({how})"}
    return result


PRELOADED = ("numpy", "numpy.testing", "scipy.special", "threadpoolctl", "importlib.metadata", "inspect", "traceback")


def _preload():
    """The third-party modules the copy imports, imported once here in the template (none of them is
    the student's), so that a run pays only for the copy's own import."""
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _compiled_copy():
    """{path: code object} of the copy's minitensor/ and models/ sources, compiled once in the template
    (compiling runs none of it) and kept in its memory, which no run can change: each child imports
    the copy from these instead of compiling it again (workers write no bytecode)."""
    import importlib.util
    import pathlib
    import types

    template = sys.modules.get("_testwriting_template")
    if template is None:
        template = sys.modules["_testwriting_template"] = types.ModuleType("_testwriting_template")
        template.compiled = {}
        root = pathlib.Path(sys.path[0])  # the copy's folder (worker.py put it first)
        for package in ("minitensor", "models"):
            for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else ():
                try:
                    template.compiled[str(path)] = compile(importlib.util.decode_source(path.read_bytes()), str(path),
                                                           "exec", dont_inherit=True)
                except (SyntaxError, ValueError, OSError, UnicodeDecodeError):
                    pass  # importing it reports the error, in the run
    return template.compiled


class _CompiledFinder:
    """Finds the copy's modules as Python does, and loads them from the template's code objects."""

    def __init__(self, compiled):
        self.compiled = compiled

    def find_spec(self, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is not None and spec.origin in self.compiled:
            spec.loader = _CompiledLoader(name, spec.origin, self.compiled[spec.origin])
        return spec


class _CompiledLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, name, path, code):
        super().__init__(name, path)
        self.code = code

    def get_code(self, fullname):
        return self.code


def _not_traceable(yes=True):
    """No process of the worker's user may read or write this one's memory (PR_SET_DUMPABLE 0),
    so a run cannot leave a note in the template for the next run's child."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(4, 0 if yes else 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _clean_up(child, kill_all):
    try:
        os.killpg(child, signal.SIGKILL)
    except OSError:
        pass
    if kill_all:  # the worker's user or PID namespace is its own: nothing else of it may live on
        try:
            os.kill(-1, signal.SIGKILL)  # every process it may signal but this one
        except OSError:
            pass
    for folder in {os.environ.get("HOME"), os.environ.get("TMPDIR"), os.environ.get("NUMBA_CACHE_DIR")}:
        if folder and os.path.isdir(folder):
            _empty(folder)
    if kill_all:  # and what it left in the shared temporary folders (the user is the worker's alone)
        for folder in ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"):
            if os.path.isdir(folder):
                _empty(folder, owner=os.getuid())
        _remove_sysv_ipc(os.getuid())


def _remove_sysv_ipc(uid):
    """Remove the SysV shared memory, semaphores and message queues `uid` owns: one run's segment
    read by the next told the tests which implementations had answered what (a hidden one among them)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for kind, remove in (("shm", lambda i: libc.shmctl(i, 0, None)), ("sem", lambda i: libc.semctl(i, 0, 0)),
                         ("msg", lambda i: libc.msgctl(i, 0, None))):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                header, *rows = [line.split() for line in table]
        except OSError:
            continue
        for row in rows:
            fields = dict(zip(header, row))
            if fields.get("uid") == str(uid):
                ident = fields.get("shmid") or fields.get("semid") or fields.get("msqid")
                if ident is not None:
                    remove(int(ident))


def _empty(folder, owner=None):
    import shutil

    try:
        entries = list(os.scandir(folder))
    except OSError:  # a folder the sandbox does not let this worker list (Landlock's /tmp): the grader empties it
        return
    for entry in entries:
        try:
            if owner is not None and entry.stat(follow_symlinks=False).st_uid != owner:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


# ----------------------------------------------------------------------------
# In the child: the stand-in, the small pytest, the tests
# ----------------------------------------------------------------------------


def _run_tests(source, module_name, target, seeds):
    import importlib
    import random
    import types

    import numpy as np

    sys.modules["pytest"] = _small_pytest()
    if target is not None:
        install(target)
    mt = importlib.import_module("minitensor")
    filename = f"tests/student/{module_name}.py"
    results = []

    def seed_all(seed):
        np.random.seed(seed)
        random.seed(seed)
        mt.manual_seed(seed)

    for seed in seeds:
        module = types.ModuleType(module_name)
        module.__file__ = filename
        sys.modules[module_name] = module
        seed_all(seed)
        try:
            exec(compile(source, filename, "exec"), module.__dict__)
        except BaseException as error:  # noqa: BLE001
            results.append({"test": "(importing the file)", "seed": seed, "passed": False, "message": _said(error)})
            continue
        for name, function, arguments in _tests_of(module):
            seed_all(seed)
            try:
                function(*arguments)
                results.append({"test": name, "seed": seed, "passed": True, "message": ""})
            except _Skipped:
                results.append({"test": name, "seed": seed, "passed": True, "message": "skipped"})
            except BaseException as error:  # noqa: BLE001 (SystemExit too: a test's failure)
                results.append({"test": name, "seed": seed, "passed": False, "message": _said(error)})
    return {"tests": results}


def _said(error):
    import traceback

    text = f"{type(error).__name__}: {error}".strip()
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename.startswith("tests/")]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return (text[:600] + " ...") if len(text) > 600 else text + where


def _tests_of(module):
    """(name, function, arguments) of each test in the file, in the order written; a parametrized
    test once per case, named name[i]."""
    import inspect
    import itertools

    found = []
    for name, value in list(vars(module).items()):
        if name.startswith("test") and inspect.isfunction(value) and value.__module__ == module.__name__:
            found.append((value.__code__.co_firstlineno, name, value))
    tests = []
    for _, name, function in sorted(found, key=lambda entry: entry[0]):
        tables = getattr(function, "_parametrize", [])
        if not tables:
            tests.append((name, function, ()))
            continue
        wanted = list(inspect.signature(function).parameters)
        for number, combination in enumerate(itertools.product(*[cases for _, cases in reversed(tables)])):
            values = {}
            for (names, _), case in zip(reversed(tables), combination):
                values.update(zip(names, case if len(names) > 1 else (case,)))
            tests.append((f"{name}[{number}]", function, tuple(values.get(n) for n in wanted)))
    return tests


class _Skipped(Exception):
    pass


def _small_pytest():
    """The part of pytest a test file may use while graded: raises, approx, mark.parametrize, skip, fail."""
    import types

    import numpy as np

    small = types.ModuleType("pytest")

    class raises:
        def __init__(self, expected, match=None):
            self.expected, self.match, self.value = expected, match, None

        def __enter__(self):
            return self

        def __exit__(self, kind, value, traceback):
            import re

            if kind is None:
                raise AssertionError(f"DID NOT RAISE {self.expected}")
            if not issubclass(kind, self.expected):
                return False
            if self.match is not None and not re.search(self.match, str(value)):
                raise AssertionError(f"the message {str(value)!r} does not match {self.match!r}")
            self.value = value
            return True

    class approx:
        def __init__(self, expected, rel=1e-6, abs=1e-12):
            self.expected, self.rel, self.abs = expected, rel, abs

        def __eq__(self, other):
            return bool(np.all(np.isclose(other, self.expected, rtol=self.rel, atol=self.abs)))

        def __repr__(self):
            return f"approx({self.expected!r})"

    class Mark:
        @staticmethod
        def parametrize(names, cases, **ignored):
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)

            def decorate(function):
                function._parametrize = getattr(function, "_parametrize", []) + [(names, list(cases))]
                return function
            return decorate

        def __getattr__(self, name):  # any other mark (slow, filterwarnings, ...) changes nothing here
            return lambda *args, **kwargs: (lambda function: function)

    def skip(reason=""):
        raise _Skipped(reason)

    def fail(reason=""):
        raise AssertionError(reason)

    small.raises, small.approx, small.skip, small.fail = raises, approx, skip, fail
    small.mark = Mark()
    return small


def install(target):
    """Put the stand-in in place of the op named by `target` ({"module", "name", "kind"})."""
    import importlib

    module = importlib.import_module(target["module"])
    original = getattr(module, target["name"])
    if target["kind"] == "function":
        stand_in = _function_stand_in(original)
        for loaded in list(sys.modules.values()):  # the modules that imported it by name
            if getattr(loaded, target["name"], None) is original and (loaded.__name__ or "").split(".")[0] in (
                    "minitensor", "models"):
                setattr(loaded, target["name"], stand_in)
        return
    cls = original

    def forward(ctx, *arrays, **options):
        if "index" in options:
            options = dict(options, index=encode_index(options["index"]))
        answer = _ask({"do": "forward", "arrays": list(arrays), "options": options,
                       "needs": [bool(n) for n in ctx.needs_input_grad]})
        ctx.handle = answer["handle"]
        return answer["out"]

    def backward(ctx, grad):
        grads = _ask({"do": "backward", "handle": ctx.handle, "grad": grad})["grads"]
        return grads[0] if len(grads) == 1 else tuple(grads)

    for function, name in ((forward, "forward"), (backward, "backward")):
        function.__name__, function.__qualname__, function.__module__ = name, f"{cls.__name__}.{name}", cls.__module__
        function.__doc__ = getattr(getattr(cls, name), "__doc__", None)
        setattr(cls, name, staticmethod(function))


def _function_stand_in(original):
    def stand_in(*args):
        return _ask({"do": "call", "args": list(args)})["out"]

    stand_in.__name__, stand_in.__qualname__ = original.__name__, original.__qualname__
    stand_in.__module__, stand_in.__doc__ = original.__module__, original.__doc__
    return stand_in


def _ask(question):
    answer = ask_grader(question)  # noqa: F821 (worker.py puts it in the probe's namespace)
    if type(answer) is dict and "error" in answer:
        import builtins

        error = answer["error"]
        raise getattr(builtins, error["type"], RuntimeError)(error["message"])
    return answer


def encode_index(index):
    """An index as the wire carries it (tuples and lists kept apart, slices and Ellipsis spelled out)."""
    import numpy as np

    if type(index) is tuple:
        return {"tuple": [encode_index(item) for item in index]}
    if type(index) is list:
        return {"list": [encode_index(item) for item in index]}
    if type(index) is slice:
        return {"slice": [index.start, index.stop, index.step]}
    if index is Ellipsis:
        return {"ellipsis": True}
    if index is None:
        return {"none": True}
    if isinstance(index, np.ndarray) or type(index) in (int, bool) or isinstance(index, np.generic):
        return {"value": index}
    raise TypeError(f"index: {type(index).__name__} is not an index this op takes")
