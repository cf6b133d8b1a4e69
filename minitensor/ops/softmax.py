"""Softmax and log-softmax along one axis, computed stably, each op with its own code.

Subtracting the row maximum first changes nothing mathematically
(softmax(x) = softmax(x - c) for any constant c) but keeps exp from
overflowing: every exponent is <= 0, so every exp is in (0, 1].
An accelerator (mt.set_backend("numba")) may run a fused kernel instead of an op's lines
(backends/numba_backend/softmax_rows.py); by default, the lines below run.
"""

import numpy as np

from .. import backends
from ..autograd import Function
from ..backends.conventions import array_module
from .axes import normalize_axis


class Softmax(Function):
    """y_i = exp(x_i) / sum_j exp(x_j)   along `axis`.

    Backward is the homework task softmax_backward: the product of softmax's Jacobian with
    grad, without building the Jacobian. Only y is saved: backward never needs x.

    mask (optional, boolean, broadcasting to x, as ops.masks.check_mask returns it: the
    entry, Tensor.softmax, checks it once and this op takes it as checked): True hides an entry, which then
    gets weight 0 (and no gradient). A row with every entry hidden, or every entry
    -inf, is all zeros with no gradient, never NaN: minitensor's policy for a fully
    masked row (torch.softmax gives NaN there). mt.debug.detect_anomaly reports
    such a row.
    """

    @staticmethod
    def forward(ctx, x, axis=-1, mask=None):
        axis = normalize_axis(axis, x.ndim, "softmax", x.shape)
        fast = backends.accelerator_for("softmax", x)  # None by default: the op's own lines run
        if x.shape[axis] == 0:  # nothing to normalise: an empty result, as in PyTorch
            y, mask = x.copy(), None
        elif fast is not None:
            y = fast(x, axis, mask)
        else:
            xp = array_module(x)  # numpy (or cupy, for CuPy arrays)
            shown = x if mask is None else xp.where(mask, -xp.inf, x)  # a hidden entry: exp(-inf) = 0
            row_max = shown.max(axis=axis, keepdims=True)  # NaN if the row holds one: every weight is NaN
            row_max = xp.where(row_max == -xp.inf, 0, row_max)  # a fully hidden row: avoid -inf - -inf
            exp_x = xp.exp(shown - row_max)
            total = exp_x.sum(axis=axis, keepdims=True)
            y = exp_x / xp.where(total == 0, 1, total)  # a fully hidden row stays all zeros
        if mask is not None:  # a visible inf or NaN makes its row NaN; a hidden entry stays 0 all the same
            y = np.where(mask, 0, y).astype(y.dtype, copy=False)
        ctx.save_for_backward(y)
        ctx.axis, ctx.mask = axis, mask
        return y

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION softmax_backward
        """dL/dx, given y = softmax(x) (saved by forward) and grad = dL/dy, along the axis.

        The Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so
            dL/dx_i = sum_j grad_j y_j (delta_ji - y_i) = y_i (grad_i - sum_j grad_j y_j):
        one sum per row, never the (n, n) Jacobian."""
        (y,) = ctx.saved_tensors
        fast = backends.accelerator_for("softmax_backward", y, grad)  # None by default
        if fast is not None:
            dx = fast(y, grad, ctx.axis)
        else:
            dx = y * (grad - (grad * y).sum(axis=ctx.axis, keepdims=True))
        # END SOLUTION
        if ctx.mask is not None:  # a hidden entry gets no gradient, even in a row that is NaN
            dx = np.where(ctx.mask, 0, dx).astype(dx.dtype, copy=False)
        return dx


class LogSoftmax(Function):
    """y_i = x_i - log sum_j exp(x_j)   along `axis`, computed as (x_i - max) - log sum_j exp(x_j - max).

    Backward is part of the homework task softmax_backward (softmax's backward, rearranged).
    """

    @staticmethod
    def forward(ctx, x, axis=-1):
        axis = normalize_axis(axis, x.ndim, "log_softmax", x.shape)
        y = LogSoftmax.of(x, axis)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def of(x, axis):
        """log_softmax(x) along a non-negative axis, on plain arrays: forward's value, which
        CrossEntropy computes the same way (its first step)."""
        fast = backends.accelerator_for("log_softmax", x)  # None by default: the op's own lines run
        if x.shape[axis] == 0:  # nothing to normalise: an empty result, as in PyTorch
            return x.copy()
        if fast is not None:
            return fast(x, axis)
        xp = array_module(x)
        shifted = x - x.max(axis=axis, keepdims=True)
        return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))

    @staticmethod
    def backward(ctx, grad):
        # BEGIN SOLUTION softmax_backward
        """dL/dx, given y = log_softmax(x) (saved by forward) and grad = dL/dy, along the axis.

        dy_i/dx_j = delta_ij - softmax(x)_j, with softmax(x) = exp(y), so
            dL/dx_j = grad_j - exp(y_j) * sum_i grad_i."""
        (y,) = ctx.saved_tensors
        fast = backends.accelerator_for("log_softmax_backward", y, grad)  # None by default
        if fast is not None:
            return fast(y, grad, ctx.axis)
        return grad - array_module(y).exp(y) * grad.sum(axis=ctx.axis, keepdims=True)
        # END SOLUTION
