"""Making tensors: from data, filled with a constant, or random.

Shapes are given as separate integers or one tuple (mt.zeros(2, 3) or
mt.zeros((2, 3))), as in PyTorch. Floating results take the default dtype
(float32) unless `dtype=` says otherwise.
"""

import numpy as np

from .random import generator
from .ops.axes import shape_arg
from .tensor import Tensor, get_default_dtype


def tensor(data, requires_grad=False, dtype=None, name=None):
    """A new leaf tensor holding a copy of data (an array, a number, a (nested) list, a Tensor)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype, name=name)


def _float_dtype(dtype):
    return get_default_dtype() if dtype is None else np.dtype(dtype)


def zeros(*shape, dtype=None, requires_grad=False):
    return Tensor(np.zeros(shape_arg(shape, "zeros"), dtype=_float_dtype(dtype)), requires_grad=requires_grad)


def ones(*shape, dtype=None, requires_grad=False):
    return Tensor(np.ones(shape_arg(shape, "ones"), dtype=_float_dtype(dtype)), requires_grad=requires_grad)


def full(shape, fill_value, dtype=None, requires_grad=False):
    if not isinstance(shape, (int, np.integer, tuple, list)):
        raise TypeError(f"full: the shape must be an int or a tuple of ints, got {shape!r:.40}")
    shape = shape_arg((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape), "full")
    if not isinstance(fill_value, (bool, int, float, complex, np.generic)):
        raise TypeError(f"full{shape}: fill_value must be a number, got {fill_value!r} (np.full would fill NaN)")
    if dtype is None and isinstance(fill_value, (bool, int)) and not isinstance(fill_value, float):
        dtype = np.bool_ if isinstance(fill_value, bool) else np.int64
    return Tensor(np.full(shape, fill_value, dtype=_float_dtype(dtype)), requires_grad=requires_grad)


def zeros_like(t, dtype=None, requires_grad=False):
    data = t.data if isinstance(t, Tensor) else np.asarray(t)
    return Tensor(np.zeros_like(data, dtype=dtype), requires_grad=requires_grad)


def ones_like(t, dtype=None, requires_grad=False):
    data = t.data if isinstance(t, Tensor) else np.asarray(t)
    return Tensor(np.ones_like(data, dtype=dtype), requires_grad=requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False):
    return Tensor(np.eye(n, m, dtype=_float_dtype(dtype)), requires_grad=requires_grad)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False):
    """As np.arange: integers stay int64, a float bound gives the default float dtype."""
    if step == 0:
        raise ValueError(f"arange(start={start}, stop={stop}, step=0): the step must not be 0")
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is None and values.dtype.kind == "f":
        dtype = get_default_dtype()
    return Tensor(values if dtype is None else values.astype(dtype), requires_grad=requires_grad)


def randn(*shape, dtype=None, requires_grad=False):
    """Standard normal samples, from the generator mt.manual_seed seeds."""
    values = generator().standard_normal(shape_arg(shape, "randn"))
    return Tensor(values.astype(_float_dtype(dtype)), requires_grad=requires_grad)


def rand(*shape, dtype=None, requires_grad=False):
    """Uniform samples in [0, 1), from the generator mt.manual_seed seeds."""
    values = generator().random(shape_arg(shape, "rand"))
    return Tensor(values.astype(_float_dtype(dtype)), requires_grad=requires_grad)
