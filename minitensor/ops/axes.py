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


def check_mask(mask, shape, op):
    """A boolean mask (True hides) must broadcast to `shape`; raise naming both shapes if not."""
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: the mask must be boolean (True marks a hidden position), got dtype {mask.dtype}")
    try:
        fits = np.broadcast_shapes(mask.shape, tuple(shape)) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: a mask of shape {mask.shape} does not broadcast to the tensor's shape {tuple(shape)}")
