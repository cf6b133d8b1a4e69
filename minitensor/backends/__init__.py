"""Backends are accelerators: faster kernels an op may use instead of its own code.

Every op computes its forward and backward itself, on plain arrays (minitensor/ops/), so that a
student who stops in Softmax.backward reads the formula there. An accelerator is a module that
supplies faster versions of some of those computations, with the same results:

    KERNELS = softmax, softmax_backward, log_softmax, log_softmax_backward, layer_norm,
              layer_norm_backward, gelu, gelu_backward, attention, attention_backward

An op asks `accelerator_for("softmax_backward", y, grad)`: it gets the active accelerator's
kernel, or None, and then runs its own lines. No accelerator holds the only copy of any math.

    mt.set_backend("numba")            # Numba's kernels, for the rest of the program
    with mt.use_backend("numpy"):      # no accelerator for a block: every op runs its own code
        ...
    MINITENSOR_BACKEND=numba python train.py

"numpy", the default, is no accelerator: accelerator_for gives None for every kernel, and the
only thing numpy_backend.py holds is the matrix product (BLAS), which every setting needs.
"numba" is imported only when chosen, "cupy" only when the cupy backend is chosen.
"""

import importlib
import os
import sys

from .freed_memory import keep_freed_memory

keep_freed_memory()  # before the first large array: see freed_memory.py

KNOWN = ("numpy", "numba", "cupy")
KERNELS = (
    "softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "layer_norm", "layer_norm_backward",
    "gelu", "gelu_backward", "attention", "attention_backward",
)

_active = None
_loaded = {}


def load(name):
    """The backend module `name`, imported on first use (without making it active)."""
    if name not in KNOWN:
        raise ValueError(f"unknown backend {name!r}; the known backends are {', '.join(map(repr, KNOWN))}")
    if name not in _loaded:
        _loaded[name] = importlib.import_module(f"{__name__}.{name}_backend")
    return _loaded[name]


def set_backend(name):
    """Make `name` ("numpy", "numba" or "cupy") the backend the ops use from now on.

    Your own accelerator is accepted too: a module (or any object) with a `name`, a `matmul`,
    and any of the KERNELS, e.g. a softmax_backward you are testing; the ops compute what it
    does not supply with their own code. It may have `takes(*arrays)`, which says whether its
    kernels take these arrays (Numba's take no float16)."""
    global _active
    if isinstance(name, str):
        _active = load(name)
        return
    missing = [f for f in ("name", "matmul") if not hasattr(name, f)]
    if missing:
        raise ValueError(
            f"set_backend: {name!r} is not an accelerator; it lacks {', '.join(missing)}. An accelerator has a "
            f"`name`, a `matmul` (np.matmul will do) and any of the kernels {', '.join(KERNELS)}: each op "
            f"computes the ones it lacks with its own code"
        )
    _active = name


def get_backend():
    """The name of the active backend ("numpy": no accelerator, every op runs its own code)."""
    return active().name


def active():
    """The active backend module (ops ask it for `matmul`; for the rest, see accelerator_for)."""
    if _active is None:
        set_backend(os.environ.get("MINITENSOR_BACKEND", "numpy"))
    return _active


def accelerator_for(kernel, *arrays):
    """The active accelerator's `kernel` (one of KERNELS) for these arrays, or None: the op then
    computes with its own code. None under the default settings ("numpy")."""
    backend = active()
    function = getattr(backend, kernel, None)
    if function is None:
        return None
    task = getattr(function, "stripped_task", None)
    if task is not None:  # a student copy: the kernel is part of a homework task, so the op's own code runs
        _say_once(f"minitensor: the {getattr(backend, 'name', 'active')} backend's {kernel} kernel is part of the "
                  f"homework task {task}, which this copy leaves out: the op's own code runs instead")
        return None
    takes = getattr(backend, "takes", None)
    return function if takes is None or takes(*arrays) else None


_said = set()


def _say_once(text):
    if text not in _said:
        _said.add(text)
        print(text, file=sys.stderr)


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
