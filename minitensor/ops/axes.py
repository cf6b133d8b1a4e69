"""Checking `axis=` and shape arguments once, with errors that name the op and the shapes (masks: masks.py)."""

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


def axis_or_dim(axis, dim, op, default=None):
    """PyTorch's `dim=` is another name for `axis=` (ported code keeps its spelling); both at once
    is refused, since one would silently win. Returns the one given, or `default`."""
    if dim is not None and axis is not None and axis is not default:
        raise TypeError(f"{op}: give axis= or dim= (the same argument under NumPy's and PyTorch's names), not both")
    if dim is not None:
        return tuple(dim) if isinstance(dim, list) else dim
    return axis


def normalize_axis(axis, ndim, op, shape):
    """One axis (an int), made non-negative."""
    if not _is_integer(axis):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(axis, ndim, op, shape)[0]


def _is_integer(axis):
    """A Python or NumPy integer (np.int64(1) is an axis, as in NumPy); a bool is not."""
    return isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)


def shape_arg(shape, op="shape"):
    """Accept f(2, 3) and f((2, 3)) alike, as PyTorch does; every entry an int, and a size (permute's
    entries are axes, which may be negative)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"{op}: a shape holds ints, got {tuple(shape)!r} ({n!r} is a {type(n).__name__})")
        if op != "permute" and (n < -1 or (n == -1 and op not in ("reshape", "view", "expand"))):
            raise ValueError(f"{op}: a shape holds sizes >= 0 (reshape, view and expand take -1), got {tuple(shape)!r}")
    return tuple(int(n) for n in shape)


def reshapes_in_place(array, shape):
    """Whether array.reshape(shape) is a view of array's memory (NumPy copies where it must)."""
    try:
        reshaped = array.reshape(shape)
    except ValueError:
        return True  # the wrong size: Reshape raises the error that names the shapes
    return np.shares_memory(reshaped, array)


def split_slices(shape, axis, sizes):
    """The slices torch.split(x, sizes, axis) cuts: an int is each piece's size (the last may be
    smaller), a list the sizes, which must add up to the axis's length."""
    length = shape[axis]
    if isinstance(sizes, bool) or not isinstance(sizes, (int, np.integer, list, tuple)):
        raise TypeError(f"split: split_size_or_sections must be an int or a list of ints, got {sizes!r:.40}")
    if isinstance(sizes, (int, np.integer)):
        if sizes <= 0:
            raise ValueError(f"split: the piece size must be positive, got {sizes} (shape {tuple(shape)})")
        sizes = [min(sizes, length - start) for start in range(0, length, sizes)] or [0]
    elif sum(sizes) != length or min(sizes, default=0) < 0:
        raise ValueError(
            f"split: sizes {list(sizes)} do not add up to axis {axis}'s length {length} (shape {tuple(shape)})"
        )
    ends = np.cumsum(sizes)
    return [slice(int(end - n), int(end)) for n, end in zip(sizes, ends)]
