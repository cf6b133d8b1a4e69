"""Ops that move values around without changing them: reshape, transpose,
broadcast (expand), indexing, concatenation and stacking.

Their backward moves the gradient back to where each value came from.
"""

import math

import numpy as np

from ..autograd import Context, Function
from .axes import normalize_axis
from .elementwise import move_to


class Reshape(Function):
    """y = x with a new shape (same values in the same order).   dL/dx = grad reshaped back.

    reshape, view, squeeze and unsqueeze are all this op. The output is a view of x
    (shared memory) when NumPy can reshape without copying, as in PyTorch.
    """

    returns_view = True

    @staticmethod
    def forward(ctx, x, shape):
        try:
            y = x.reshape(shape)
        except ValueError:
            raise ValueError(
                f"reshape: cannot reshape a tensor of shape {x.shape} ({x.size} elements) "
                f"into shape {tuple(shape)}"
            ) from None
        ctx.input_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.input_shape)


class Transpose(Function):
    """y = x with its axes permuted: y.shape[i] = x.shape[axes[i]].

    dL/dx = grad permuted by the inverse permutation (argsort of axes).
    transpose, permute, swapaxes and .T are all this op. The output is a view of x.
    """

    returns_view = True

    @staticmethod
    def forward(ctx, x, axes):
        if sorted(axes) != list(range(x.ndim)):
            raise ValueError(
                f"permute: axes {tuple(axes)} are not a permutation of the {x.ndim} axes "
                f"of a tensor of shape {x.shape}"
            )
        ctx.inverse = tuple(np.argsort(axes))
        return x.transpose(axes)

    @staticmethod
    def backward(ctx, grad):
        return grad.transpose(ctx.inverse)


class Expand(Function):
    """y = x broadcast to `shape` (a view, nothing is copied).

    dL/dx = grad summed over the broadcast axes. This backward returns grad as
    it is: the engine's unbroadcast does the summing, as for every other op.
    """

    returns_view = True

    @staticmethod
    def forward(ctx, x, shape):
        try:
            y = np.broadcast_to(x, shape)
        except ValueError:
            raise ValueError(
                f"expand: a tensor of shape {x.shape} cannot be broadcast to shape {tuple(shape)}"
            ) from None
        if y.size == x.size:  # nothing repeats (only size-1 axes were added): a writable view, as in PyTorch
            return x.reshape(shape)
        return y  # read-only: one memory location stands for several elements

    @staticmethod
    def backward(ctx, grad):
        return grad


class Index(Function):
    """y = x[index]: basic indexing (ints, slices, None, ...) and advanced indexing
    (integer arrays, boolean masks).

    dL/dx = zeros of x's shape with grad added at the indexed positions. For
    advanced indexing we add with np.add.at, not `dx[index] += grad`, because an
    index that appears twice (x[[0, 0]]) must receive both gradients; `+=` would
    keep only one. Basic indexing (ints, slices, None, ...) never selects an
    element twice, so there a plain assignment is exact, and much faster.
    Basic indexing returns a view of x (shared memory), advanced indexing a copy.
    """

    returns_view = True

    @staticmethod
    def forward(ctx, x, index):
        try:
            y = x[index]
        except IndexError as error:
            raise IndexError(f"index: {error} (tensor of shape {x.shape}, index {index!r})") from None
        if not isinstance(y, np.ndarray) and _is_basic(index):
            y = x[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]  # a 0-d view, not a copied scalar
        ctx.index, ctx.input_shape = index, x.shape
        return y

    @staticmethod
    def backward(ctx, grad):
        grad_x = np.zeros_like(grad, shape=ctx.input_shape)  # (zeros_like: a CuPy grad gives CuPy zeros)
        if _is_basic(ctx.index):
            grad_x[ctx.index] = grad
        else:
            np.add.at(grad_x, ctx.index, grad)
        return grad_x


class Gather(Function):
    """y = x gathered along `axis` at `index` (torch.gather, np.take_along_axis):
    y[i, j, k] = x[i, index[i, j, k], k] for axis=1; index has x's number of axes, and each of
    its other sizes at most x's.

    dL/dx = zeros of x's shape with grad[i, j, k] added at x[i, index[i, j, k], k]; an element
    gathered twice receives both gradients (np.add.at, as in Index).
    """

    @staticmethod
    def forward(ctx, x, index, axis):
        index = np.asarray(index)
        if index.dtype.kind not in "iu" or index.ndim != x.ndim:
            raise ValueError(f"gather: index must be an integer array with as many axes as the input "
                             f"({x.ndim}), got {index.dtype} of shape {index.shape}")
        if any(n > m for a, (n, m) in enumerate(zip(index.shape, x.shape)) if a != axis):
            raise ValueError(f"gather: index of shape {index.shape} is larger than the input {x.shape} "
                             f"on an axis other than {axis}")
        if index.size and (index.min() < -x.shape[axis] or index.max() >= x.shape[axis]):
            raise IndexError(f"gather: index out of range for axis {axis} of size {x.shape[axis]} "
                             f"(index from {index.min()} to {index.max()})")
        positions = list(np.indices(index.shape, sparse=True))
        positions[axis] = index
        ctx.positions, ctx.input_shape = tuple(positions), x.shape
        return x[ctx.positions]

    @staticmethod
    def backward(ctx, grad):
        grad_x = np.zeros_like(grad, shape=ctx.input_shape)
        np.add.at(grad_x, ctx.positions, grad)
        return grad_x


def _is_basic(index):
    """True for ints, slices, None and Ellipsis (alone or in a tuple): no element can repeat."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(
        part is None or part is Ellipsis or isinstance(part, slice)
        or (isinstance(part, (int, np.integer)) and not isinstance(part, (bool, np.bool_)))
        for part in parts
    )


class CopySlices(Function):
    """y = base with the region a view selects replaced by `values`: what an in-place op
    through a view does to the view's base. (PyTorch's node of the same name.)

    `steps` are the view ops ((Function, options), ...) that make the view from base.
    dL/dbase = grad with the region set to 0 (those values were overwritten);
    dL/dvalues = grad's region.

    The region is found as positions, not as a view: the steps are replayed on the numbers
    0, 1, ..., base.size - 1 laid out in base's shape, which gives, for each element of the
    view, the flat (C-order) position of the base element it is. That answer depends only on
    the shapes and the steps, never on how base is laid out in memory. Replaying the steps on
    a copy of base instead would go wrong for a base that is not C-contiguous (a transposed,
    strided, permuted or Fortran-ordered array): a reshape that was a view of the original
    can be a copy of a C-ordered copy, and writing into that copy would change nothing.
    """

    @staticmethod
    def forward(ctx, base, values, steps):
        positions = region_positions(base.shape, steps)  # (view's shape) -> flat index into base
        if not isinstance(base, np.ndarray):  # a CuPy base is indexed with a CuPy array
            positions = move_to(positions, "cupy")
        ctx.positions = positions
        y = base.copy(order="C")
        y.reshape(-1)[positions] = values  # (a C-contiguous y reshapes to a view of itself)
        return y

    @staticmethod
    def backward(ctx, grad):
        positions = ctx.positions
        grad_base = grad.copy(order="C")
        grad_base.reshape(-1)[positions] = 0
        grad_values = grad.reshape(-1)[positions]  # (indexing with an array copies)
        return grad_base, grad_values


def region_positions(shape, steps):
    """For each element of the view that `steps` make from a tensor of `shape`, the flat
    C-order position of the element of that tensor it shares memory with."""
    positions = np.arange(math.prod(shape)).reshape(shape)
    for function, options in steps:
        positions = function.forward(Context(function, (False,)), positions, **options)
    return positions


class Cat(Function):
    """y = the inputs joined along an existing `axis`.   dL/dx_k = the slice of grad x_k filled."""

    @staticmethod
    def forward(ctx, *xs, axis=0):
        if not xs:
            raise ValueError("cat: needs at least one tensor")
        axis = normalize_axis(axis, xs[0].ndim, "cat", xs[0].shape)
        for x in xs[1:]:
            if x.ndim != xs[0].ndim or any(
                n != m for i, (n, m) in enumerate(zip(x.shape, xs[0].shape)) if i != axis
            ):
                raise ValueError(
                    f"cat: shapes {[x.shape for x in xs]} differ outside axis {axis}; "
                    f"they must match on every other axis"
                )
        ctx.axis = axis
        ctx.boundaries = np.cumsum([x.shape[axis] for x in xs])[:-1]
        return np.concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.split(grad, ctx.boundaries, axis=ctx.axis))


class Stack(Function):
    """y = the inputs stacked along a new `axis`.   dL/dx_k = grad taken at position k of that axis."""

    @staticmethod
    def forward(ctx, *xs, axis=0):
        if not xs:
            raise ValueError("stack: needs at least one tensor")
        if any(x.shape != xs[0].shape for x in xs):
            raise ValueError(f"stack: all tensors must have the same shape, got {[x.shape for x in xs]}")
        axis = normalize_axis(axis, xs[0].ndim + 1, "stack", xs[0].shape)
        ctx.axis = axis
        return np.stack(xs, axis=axis)

    @staticmethod
    def backward(ctx, grad):
        return tuple(np.moveaxis(grad, ctx.axis, 0))
