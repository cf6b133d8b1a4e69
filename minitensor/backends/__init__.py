"""Backends: the hot kernels behind one small interface, and which one is active.

A backend is a module with the same functions in each implementation:
    xp, name, matmul, softmax, softmax_backward, log_softmax, log_softmax_backward,
    layer_norm, layer_norm_backward, gelu, gelu_backward, attention, attention_backward
Ops call `active()` for these; nothing else knows which backend is active.

    mt.set_backend("numba")            # for the rest of the program
    with mt.use_backend("numpy"):      # for a block (step into the reference kernels)
        ...
    MINITENSOR_BACKEND=numba python train.py

Backends are imported on first use: numba is loaded only when chosen, cupy
only when the cupy backend is chosen.
"""

import importlib
import os

KNOWN = ("numpy", "numba", "cupy")

_active = None
_loaded = {}


def load(name):
    """The backend module `name`, imported on first use (without making it active)."""
    if name not in KNOWN:
        raise ValueError(f"unknown backend {name!r}; the known backends are {', '.join(map(repr, KNOWN))}")
    if name not in _loaded:
        _loaded[name] = importlib.import_module(f"{__name__}.{name}_backend")
    return _loaded[name]


INTERFACE = (
    "xp", "name", "matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
    "layer_norm", "layer_norm_backward", "gelu", "gelu_backward", "attention", "attention_backward",
)


def set_backend(name):
    """Make `name` ("numpy", "numba" or "cupy") the backend the ops use from now on.

    A module (or any object) with every function of the interface is accepted too: your own
    backend, e.g. the reference with one kernel swapped for a version you are testing."""
    global _active
    if isinstance(name, str):
        _active = load(name)
        return
    missing = [f for f in INTERFACE if not hasattr(name, f)]
    if missing:
        raise ValueError(f"set_backend: {name!r} is not a backend; it lacks {', '.join(missing)}")
    _active = name


def get_backend():
    """The name of the active backend."""
    return active().name


def active():
    """The active backend module (what the ops call)."""
    if _active is None:
        set_backend(os.environ.get("MINITENSOR_BACKEND", "numpy"))
    return _active


class use_backend:
    """`with mt.use_backend("numba"):` switch backends for a block, then switch back."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self._previous = active()
        set_backend(self.name)
        return _active

    def __exit__(self, *exc_info):
        global _active
        _active = self._previous
        return False
