"""Functions over several tensors: cat, stack, where, maximum (each one line into an op)."""

import numpy as np

from . import ops
from .ops.axes import axis_or_dim
from .tensor import Tensor


def cat(tensors, axis=0, *, dim=None):
    """Join tensors along an existing axis (np.concatenate, torch.cat); dim= is axis=."""
    return ops.Cat.apply(*_tensor_list(tensors, "cat"), axis=axis_or_dim(axis, dim, "cat", 0))


def stack(tensors, axis=0, *, dim=None):
    """Stack equal-shaped tensors along a new axis (np.stack, torch.stack); dim= is axis=."""
    return ops.Stack.apply(*_tensor_list(tensors, "stack"), axis=axis_or_dim(axis, dim, "stack", 0))


def _tensor_list(tensors, op):
    """The tensors of a list or tuple, each a Tensor. One Tensor alone is refused: NumPy would
    join its rows (np.concatenate(x) of a (2, 3) x is (6,)), PyTorch refuses it."""
    if isinstance(tensors, (Tensor, np.ndarray)):
        raise TypeError(
            f"{op}: expects a list or tuple of tensors, got one {type(tensors).__name__} of shape "
            f"{tensors.shape}; write mt.{op}([t], ...) for one tensor (torch.{op} refuses it too)"
        )
    items = list(tensors)
    for position, item in enumerate(items):
        if item is None:
            raise TypeError(f"{op}: item {position} of the list is None, not a tensor")
    return [x if isinstance(x, Tensor) else Tensor(x) for x in items]


def where(condition, a, b):
    """a where condition is True, b elsewhere (np.where); a and b may be numbers."""
    condition = condition.data if isinstance(condition, Tensor) else np.asarray(condition)
    if condition.dtype != np.bool_:
        raise TypeError(f"where: the condition must be boolean, got dtype {condition.dtype}")
    a, b = _as_pair(a, b)
    try:
        np.broadcast_shapes(condition.shape, a.shape, b.shape)
    except ValueError:
        raise ValueError(
            f"where: condition {condition.shape}, a {a.shape} and b {b.shape} do not broadcast together"
        ) from None
    return ops.Where.apply(a, b, condition=condition)


def maximum(a, b):
    """Elementwise maximum (np.maximum); ties split the gradient in half."""
    a, b = _as_pair(a, b)
    return ops.Maximum.apply(a, b)


def _as_pair(a, b):
    """Two operands as Tensors; a Python number takes the other operand's dtype."""
    if isinstance(a, Tensor):
        return a, a._coerce(b)
    if isinstance(b, Tensor):
        return b._coerce(a), b
    return Tensor(a), Tensor(b)
