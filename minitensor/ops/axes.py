"""Checking `axis=` arguments once, with an error that names the op and the shape."""


def normalize_axes(axis, ndim, op, shape):
    """Return `axis` (None, an int or a tuple of ints) as a sorted tuple of non-negative axes.

    None means every axis. Negative axes count from the end, as in NumPy.
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = []
    for a in axes:
        if not isinstance(a, int) or isinstance(a, bool):
            raise TypeError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
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
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    return normalize_axes(axis, ndim, op, shape)[0]
