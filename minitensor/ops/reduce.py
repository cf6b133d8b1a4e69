"""Reductions over `axis` (None, an int, or a tuple), with NumPy's `keepdims`.

Every backward first puts the reduced axes back (as size 1) so the gradient
broadcasts against the input: a reduction's adjoint is a broadcast.
"""

import typing

import numpy as np

from ..autograd import Function
from .axes import axis_or_dim, normalize_axes, normalize_axis
from .shape import Gather


def _restore_axes(grad, axes, keepdims):
    """Give grad its reduced axes back as size-1 axes (a no-op when keepdims was True)."""
    return grad if keepdims else np.expand_dims(grad, axes)


class Sum(Function):
    """y = sum of x over `axis`.   Backward: the homework task reductions."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axes(axis, x.ndim, "sum", x.shape)
        ctx.axes, ctx.keepdims, ctx.input_shape = axes, keepdims, x.shape
        return x.sum(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION reductions
        grad = _restore_axes(grad, ctx.axes, ctx.keepdims)
        return np.broadcast_to(grad, ctx.input_shape)
        # END SOLUTION


class Mean(Function):
    """y = (1/n) sum of x over `axis`, n the number of elements summed.   Backward: the homework task reductions."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        axes = normalize_axes(axis, x.ndim, "mean", x.shape)
        ctx.axes, ctx.keepdims, ctx.input_shape = axes, keepdims, x.shape
        ctx.count = int(np.prod([x.shape[a] for a in axes]))
        return x.mean(axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION reductions
        grad = _restore_axes(grad, ctx.axes, ctx.keepdims)
        return np.broadcast_to(grad / ctx.count, ctx.input_shape)
        # END SOLUTION


class Var(Function):
    """y = sum((x - mean)**2) / (n - ddof) over `axis`. ddof=0, NumPy's default, is the
    biased variance layer norm uses; ddof=1 is torch.var's default. Backward: the homework
    task reductions.
    """

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False, ddof=0):
        axes = normalize_axes(axis, x.ndim, "var", x.shape)
        count = int(np.prod([x.shape[a] for a in axes]))
        centered = x - x.mean(axis=axes, keepdims=True)
        ctx.save_for_backward(centered)
        # With ddof >= n there are no degrees of freedom left: divide by 0, as NumPy does,
        # so the variance is inf (nan for constant values) and so is its gradient, never a
        # number of the wrong sign.
        divisor = centered.dtype.type(max(count - ddof, 0))
        ctx.axes, ctx.keepdims, ctx.divisor = axes, keepdims, divisor
        with np.errstate(divide="ignore", invalid="ignore"):
            return (centered * centered).sum(axis=axes, keepdims=keepdims) / divisor

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION reductions
        # dL/dx = grad * 2 (x - mean) / (n - ddof): the mean's own dependence on x cancels,
        # because sum(x - mean) = 0.
        (centered,) = ctx.saved_tensors
        grad = _restore_axes(grad, ctx.axes, ctx.keepdims)
        with np.errstate(divide="ignore", invalid="ignore"):  # ddof >= n: inf and nan, as the forward
            return grad * 2 * centered / ctx.divisor
        # END SOLUTION


def _extreme_forward(ctx, x, axis, keepdims, op):
    """Shared by Max and Min: the reduced values, and a mask of where they sit."""
    axes = normalize_axes(axis, x.ndim, op, x.shape)
    if any(x.shape[a] == 0 for a in axes):
        word = "maximum" if op == "max" else "minimum"
        raise ValueError(f"{op}: the {word} over an empty axis is undefined (shape {x.shape}, axis {axis})")
    y = x.max(axis=axes, keepdims=True) if op == "max" else x.min(axis=axes, keepdims=True)
    ctx.save_for_backward(at_extreme=x == y)  # where the extreme value sits (several places on a tie)
    ctx.axes, ctx.keepdims = axes, keepdims
    return y if keepdims else np.squeeze(y, axis=axes)


def _share_among_ties(ctx, grad):
    """Shared by Max and Min: grad goes to the extreme positions, split equally on a tie."""
    # BEGIN SOLUTION reductions
    (is_extreme,) = ctx.saved_tensors
    grad = _restore_axes(grad, ctx.axes, ctx.keepdims)
    ties = is_extreme.sum(axis=ctx.axes, keepdims=True)
    return grad * is_extreme / ties
    # END SOLUTION


class Max(Function):
    """y = max of x over `axis`.

    The gradient goes to the positions holding the maximum. When several tie,
    they share it equally (each gets grad / count), so the total is grad:
    the same choice as torch.amax and torch.max() without a dim.
    """

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        return _extreme_forward(ctx, x, axis, keepdims, "max")

    @staticmethod
    def backward(ctx, grad):
        return _share_among_ties(ctx, grad)


class Min(Function):
    """y = min of x over `axis`; the gradient is shared by tied minima, as in Max."""

    @staticmethod
    def forward(ctx, x, axis=None, keepdims=False):
        return _extreme_forward(ctx, x, axis, keepdims, "min")

    @staticmethod
    def backward(ctx, grad):
        return _share_among_ties(ctx, grad)

# ----------------------------------------------------------------------------
# What a reduction's arguments mean in NumPy's spelling and in PyTorch's, where the two differ
# (Tensor's methods call these). A port from PyTorch keeps its spelling and gets PyTorch's answer;
# NumPy code keeps NumPy's:
# - x.max(dim=1) is (values, indices), torch.max's; x.max(axis=1) the values alone, np.max's.
# - x.var(), x.var(1), x.var(dim=1) divide by n - 1, torch.var's default; x.var(axis=1) and
#   ddof= divide by n - ddof, ddof 0 by default, np.var's.
# - dim=() reduces every axis, as in PyTorch; NumPy's axis=() reduces none.
# ----------------------------------------------------------------------------

NOT_GIVEN = object()  # axis= left out (None given is NumPy's spelling of every axis)


class ValuesAndIndices(typing.NamedTuple):
    """What x.max(dim=d) and x.min(dim=d) give, as torch.return_types.max: unpack it or read its fields."""

    values: typing.Any
    indices: typing.Any


def reduced_axes(op, axis, dim):
    """The axes a reduction reduces: axis= or dim= (axis_or_dim); PyTorch's dim=() is every axis."""
    if axis is None and isinstance(dim, (tuple, list)) and len(dim) == 0:
        return None
    return axis_or_dim(axis, dim, op)


def ddof_for(op, ddof, correction, unbiased, numpy_spelling):
    """The divisor's n - ddof: one of ddof= (NumPy), correction= or unbiased= (PyTorch), else the
    default of the spelling used (NumPy's 0, PyTorch's 1)."""
    given = [name for name, value in (("ddof", ddof), ("correction", correction), ("unbiased", unbiased))
             if value is not None]
    if len(given) > 1:
        raise TypeError(f"{op}: give one of ddof=, correction= and unbiased= (the same choice), not {', '.join(given)}")
    if ddof is not None:
        return ddof
    if correction is not None:
        return correction
    if unbiased is not None:
        return 1 if unbiased else 0
    return 0 if numpy_spelling else 1


def extreme_along(x, op, find, dim, keepdim):
    """torch.max(x, dim) / torch.min(x, dim): (values, indices) along one axis; the values are
    gathered at the indices (ops.Gather), so the gradient goes to the index returned (the first
    on a tie, np.argmax's and PyTorch's on CPU)."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim= gives (values, indices) along one axis and must be an int, got {dim!r}; "
                        f"over several axes write x.a{op}(dim={dim!r})")
    if x.ndim == 0:
        raise IndexError(f"{op}: dim={dim} of a 0-d tensor (a number has no axis to search)")
    axis = normalize_axis(dim, x.ndim, op, x.shape)
    if x.shape[axis] == 0:
        raise IndexError(f"{op}: the {op}imum over an empty axis is undefined (shape {x.shape}, dim {dim})")
    index = find(x.data, axis=axis, keepdims=True)
    values = Gather.apply(x, index=index, axis=axis)
    if not keepdim:
        values, index = values.squeeze(axis), np.squeeze(index, axis=axis)
    return ValuesAndIndices(values, type(x)(index.astype(np.int64)))
