"""Softmax and log-softmax along one axis, computed stably by the active backend.

Subtracting the row maximum first changes nothing mathematically
(softmax(x) = softmax(x - c) for any constant c) but keeps exp from
overflowing: every exponent is <= 0, so every exp is in (0, 1].
The readable kernels are in backends/numpy_backend.py; the fused ones in
backends/numba_backend/softmax_rows.py.
"""

import numpy as np

from .. import backends
from ..autograd import Function
from .axes import check_mask, normalize_axis


class Softmax(Function):
    """y_i = exp(x_i) / sum_j exp(x_j)   along `axis`.

    Backward is the homework task softmax_backward: the product of softmax's Jacobian
    with grad, derived in the comment at the end of this class (the backend computes it).
    Only y is saved: backward never needs x.

    mask (optional, boolean, broadcasting to x): True hides an entry, which then
    gets weight 0 (and no gradient). A row with every entry hidden, or every entry
    -inf, is all zeros with no gradient, never NaN: minitensor's policy for a fully
    masked row (torch.softmax gives NaN there). mt.debug.detect_anomaly reports
    such a row.
    """

    @staticmethod
    def forward(ctx, x, axis=-1, mask=None):
        axis = normalize_axis(axis, x.ndim, "softmax", x.shape)
        if mask is not None:
            mask = check_mask(mask, x.shape, "softmax")
        if x.shape[axis] == 0:  # nothing to normalise: an empty result, as in PyTorch
            y = x.copy()
            mask = None
        else:
            y = backends.active().softmax(x, axis, mask)
        if mask is not None:  # a visible inf or NaN makes its row NaN; a hidden entry stays 0 all the same
            y = np.where(mask, 0, y).astype(y.dtype, copy=False)
        ctx.save_for_backward(y)
        ctx.axis, ctx.mask = axis, mask
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        dx = backends.active().softmax_backward(y, grad, ctx.axis)  # the homework task softmax_backward
        if ctx.mask is not None:  # a hidden entry gets no gradient, even in a row that is NaN
            dx = np.where(ctx.mask, 0, dx).astype(dx.dtype, copy=False)
        return dx

    # BEGIN SOLUTION softmax_backward
    # The Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so
    #     dL/dx_i = sum_j grad_j y_j (delta_ji - y_i) = y_i (grad_i - sum_j grad_j y_j).
    # END SOLUTION


class LogSoftmax(Function):
    """y_i = x_i - log sum_j exp(x_j)   along `axis`.

    Backward is part of the homework task softmax_backward (softmax's backward rearranged):
    derived in the comment below.
    """

    # BEGIN SOLUTION softmax_backward
    # dy_i/dx_j = delta_ij - softmax(x)_j, so
    #     dL/dx_j = grad_j - softmax(x)_j * sum_i grad_i,   with softmax(x) = exp(y).
    # END SOLUTION

    @staticmethod
    def forward(ctx, x, axis=-1):
        axis = normalize_axis(axis, x.ndim, "log_softmax", x.shape)
        y = x.copy() if x.shape[axis] == 0 else backends.active().log_softmax(x, axis)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return backends.active().log_softmax_backward(y, grad, ctx.axis)
