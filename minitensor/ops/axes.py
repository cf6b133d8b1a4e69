"""Checking `axis=` and `mask=` arguments once, with errors that name the op and the shapes."""

import numpy as np


def normalize_axes(axis, ndim, op, shape):
    """Return `axis` (None, an int or a tuple of ints) as a sorted tuple of non-negative axes.

    None means every axis. Negative axes count from the end, as in NumPy.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    normalized = []
    for a in axes:
        if not _is_integer(a):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
        a = int(a)
        if not -ndim <= a < ndim:
            raise ValueError(
                f"{op}: axis {a} is out of range for a tensor of shape {tuple(shape)} "
                f"(ndim {ndim}; valid axes are {-ndim}..{ndim - 1})"
                if ndim
                else f"{op}: axis {a} is out of range for a 0-d tensor (it has no axes)"
            )
        normalized.append(a % ndim)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{op}: axis {axis!r} names the same axis twice (shape {tuple(shape)})")
    return tuple(sorted(normalized))


def normalize_axis(axis, ndim, op, shape):
    """One axis (an int), made non-negative."""
    if not _is_integer(axis):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(axis, ndim, op, shape)[0]


def _is_integer(axis):
    """A Python or NumPy integer (np.int64(1) is an axis, as in NumPy); a bool is not."""
    return isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)


def mask_array(mask):
    """A mask as the array it holds: a Tensor's data (ops never import Tensor, so a Tensor is
    known by its _requires_grad slot), a list or a Python bool as a NumPy array; an array (NumPy or
    CuPy) and None as they are. The one place a mask is unwrapped."""
    if mask is None:
        return None
    if hasattr(mask, "_requires_grad"):  # a Tensor (the slot, not the property, which may refresh a view)
        return mask.data
    return mask if hasattr(mask, "dtype") else np.asarray(mask)


def check_mask(mask, shape, op, scores_dtype=None):
    """The one mask rule, for every op that takes `mask=` (softmax, masked_fill, attention)
    and every backend; the README states it under "Backends". Returns the mask to use.

    - A boolean mask marks hidden positions with True.
    - Attention (the ops that pass `scores_dtype`) also takes a floating-point mask, added to
      the scores; it is cast to the scores' dtype, so a mask never changes the result's dtype.
    - Nothing else: an integer 0/1 mask is ambiguous (a bias of 0 and 1, or hide where 1?)
      and PyTorch refuses it too.
    - Its shape broadcasts to `shape` without growing it (a 0-d mask, a (T, 1) mask, ...).
    - It may be an array, nested lists or a Tensor (mask_array).
    """
    mask = mask_array(mask)
    is_float = np.issubdtype(mask.dtype, np.floating)
    if mask.dtype != np.bool_ and not (is_float and scores_dtype is not None):
        accepted = "boolean (True marks a hidden position)" + (
            " or floating point (added to the scores)" if scores_dtype is not None else ""
        )
        raise TypeError(
            f"{op}: the mask must be {accepted}, got dtype {mask.dtype}; for a 0/1 mask "
            f"where 1 hides a position, pass `mask != 0`"
        )
    shape = tuple(shape)
    try:
        fits = np.broadcast_shapes(mask.shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        target = (f"the scores' shape {shape} (batch..., queries, keys)" if scores_dtype is not None
                  else f"the tensor's shape {shape}")
        raise ValueError(f"{op}: a mask of shape {tuple(mask.shape)} does not broadcast to {target}")
    if is_float:
        mask = mask.astype(scores_dtype, copy=False)
    return mask
