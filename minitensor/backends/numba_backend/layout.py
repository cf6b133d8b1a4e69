"""Arrays as the kernels read them: rows of a C-contiguous array, read-only, one dtype.

The row kernels (softmax, layer norm) take (rows, n) arrays with the reduced axis last; the
attention kernels take (batch*heads, T, d). These helpers make those views (copying only where
the layout demands it) and undo them on the way out.
"""

import math

import numpy as np

from ..conventions import common_dtype


def read_only(array):
    """A read-only view of an array a kernel only reads. Numba compiles a kernel once per
    combination of argument types, and whether an array may be written is part of its type
    (np.broadcast_to makes read-only arrays, np.empty writable ones). Read-only inputs
    everywhere mean one compile per dtype: the test suite compiled the attention kernels
    nine times each, for every mix of writable and read-only inputs it happened to pass."""
    view = array.view()
    view.flags.writeable = False
    return view


def as_input(array, shape, dtype=None):
    """`array` as a kernel reads it: C-contiguous, of `dtype`, in `shape`, read-only."""
    return read_only(np.ascontiguousarray(array, dtype=dtype).reshape(shape))


def rows(x, axis):
    """x with `axis` moved last, as a C-contiguous (rows, n) array, and how to undo it."""
    moved = np.moveaxis(x, axis, -1)
    flat = np.ascontiguousarray(moved).reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, 0)
    return read_only(flat), moved.shape


def unrows(flat, moved_shape, axis):
    """The inverse of `rows`: (rows, n) back to the shape and axis order it came from, C-contiguous
    as the reference's result is (so a reshape of it is a view, and an in-place change through it
    reaches it, as in PyTorch)."""
    return np.ascontiguousarray(np.moveaxis(flat.reshape(moved_shape), -1, axis))


def no_mask():
    return read_only(np.zeros((0, 0), dtype=np.bool_))


def gradient_rows(dy, axis):
    """dy as (rows, n), as `rows` makes it; or, where dy is broadcast along `axis` (one number per
    row, stride 0: a sum's gradient is one number broadcast to the whole input), as those
    numbers in place, (rows, 1). Copying such a gradient out to full size took as long as the
    kernel; reading it strided stopped the kernel's loops from vectorising."""
    moved = np.moveaxis(dy, axis, -1)
    if moved.size and moved.strides[-1] == 0 and moved.shape[-1] > 1:
        try:
            return read_only(np.reshape(moved[..., :1], (-1, 1), copy=False))
        except ValueError:  # the leading axes do not flatten without a copy
            pass
    return rows(dy, axis)[0]


def rows_backward(kernel, y, dy, axis):
    """Run a row backward kernel(y_rows, dy_rows, dx_rows) on arrays of any shape and axis."""
    y_rows, moved_shape = rows(y, axis)
    dy_rows = gradient_rows(dy.astype(y.dtype, copy=False), axis)
    dx = np.empty_like(y_rows)
    if y_rows.size:
        kernel(y_rows, dy_rows, dx)
    return unrows(dx, moved_shape, axis)


def mask_rows(mask, shape, axis):
    """A boolean mask as rows that repeat: row r of the scores uses mask row r % len(rows).
    A mask shared by the leading axes (a (T, T) causal mask over (B, H, T, T) scores) is used
    as it is, not copied out to the scores' size; any other broadcast is copied (as bools)."""
    ndim = len(shape)
    mask = mask.reshape((1,) * (ndim - mask.ndim) + mask.shape)
    lead = 0
    while lead < ndim - 1 and mask.shape[lead] == 1:
        lead += 1
    if axis == ndim - 1 and mask.shape[lead:] == tuple(shape[lead:]):
        return as_input(mask, (-1, shape[-1]))
    return rows(np.broadcast_to(mask, shape), axis)[0]


def heads(q, k, v, mask):
    """Broadcast q, k, v to one batch shape and flatten it: (batch*heads, T, d), C order.
    The mask keeps a leading size 1 when it is shared by every batch and head; a boolean mask
    comes back as `hidden`, a float one as `bias` (the other is empty)."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    count = math.prod(batch)
    dtype = common_dtype(q, k, v)  # mixed dtypes compute in the common one, as the ops do

    def flat(t):
        return as_input(np.broadcast_to(t, batch + t.shape[-2:]), (count,) + t.shape[-2:], dtype)

    q3, k3, v3 = flat(q), flat(k), flat(v)
    hidden = read_only(np.zeros((0, 0, 0), dtype=np.bool_))
    bias = read_only(np.zeros((0, 0, 0), dtype=dtype))
    if mask is not None:
        scores_shape = (q.shape[-2], k.shape[-2])
        full = np.broadcast_to(mask, batch + scores_shape)
        shared = mask.ndim <= 2 or all(n == 1 for n in mask.shape[:-2])
        m3 = (np.broadcast_to(mask.reshape(mask.shape[-2:]) if mask.ndim >= 2 else mask, scores_shape)[None]
              if shared else full.reshape((count,) + scores_shape))
        if mask.dtype == np.bool_:
            hidden = as_input(m3, m3.shape)
        else:
            bias = as_input(m3, m3.shape, dtype)
    return batch, q3, k3, v3, hidden, bias
