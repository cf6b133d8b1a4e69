"""Softmax and log-softmax along one axis, computed stably.

Subtracting the row maximum first changes nothing mathematically
(softmax(x) = softmax(x - c) for any constant c) but keeps exp from
overflowing: every exponent is <= 0, so every exp is in (0, 1].
"""

import numpy as np

from ..autograd import Function
from .axes import normalize_axis


class Softmax(Function):
    """y_i = exp(x_i) / sum_j exp(x_j)   along `axis`.

    The Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so
        dL/dx_i = sum_j grad_j y_j (delta_ji - y_i) = y_i (grad_i - sum_j grad_j y_j).
    Only y is saved: backward never needs x.
    """

    @staticmethod
    def forward(ctx, x, axis=-1):
        axis = normalize_axis(axis, x.ndim, "softmax", x.shape)
        shifted = x - x.max(axis=axis, keepdims=True)
        exp_shifted = np.exp(shifted)
        y = exp_shifted / exp_shifted.sum(axis=axis, keepdims=True)
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        grad_dot_y = (grad * y).sum(axis=ctx.axis, keepdims=True)  # sum_j grad_j y_j
        return y * (grad - grad_dot_y)


class LogSoftmax(Function):
    """y_i = x_i - log sum_j exp(x_j)   along `axis`.

    dy_i/dx_j = delta_ij - softmax(x)_j, so
        dL/dx_j = grad_j - softmax(x)_j * sum_i grad_i,   with softmax(x) = exp(y).
    """

    @staticmethod
    def forward(ctx, x, axis=-1):
        axis = normalize_axis(axis, x.ndim, "log_softmax", x.shape)
        shifted = x - x.max(axis=axis, keepdims=True)
        y = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        ctx.save_for_backward(y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        softmax = np.exp(y)
        return grad - softmax * grad.sum(axis=ctx.axis, keepdims=True)
