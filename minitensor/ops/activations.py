"""Activation functions: ReLU, GELU (exact and tanh), SiLU."""

import numpy as np
from scipy.special import expit

from .. import backends
from ..autograd import Function


class ReLU(Function):
    """y = max(x, 0).   dL/dx = grad where y > 0, 0 where y <= 0 (also at x = 0), as PyTorch.

    A negative x gives +0.0 (x * (x > 0) would give -0.0, and 1 / relu(-1) = -inf), -0.0 and NaN
    pass through, and where y is NaN the gradient passes too: PyTorch's values, each of them."""

    @staticmethod
    def forward(ctx, x):
        y = np.where(x < 0, 0, x).astype(x.dtype, copy=False)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return np.where(y <= 0, 0, grad).astype(grad.dtype, copy=False)


class GELU(Function):
    """y = x * Phi(x), Phi the standard normal CDF (the kernels live in the backends).

    approximate="none" (PyTorch's default):
        Phi(x) = (1 + erf(x / sqrt 2)) / 2,    dy/dx = Phi(x) + x * phi(x),
        phi(x) = exp(-x**2 / 2) / sqrt(2 pi).
    approximate="tanh" (GPT-2's choice):
        y = x (1 + tanh u) / 2 = x s(2u),  s the sigmoid,  u = sqrt(2/pi) (x + 0.044715 x**3),
        dy/dx = s(2u) + 2 x s(2u) (1 - s(2u)) * sqrt(2/pi) (1 + 3 * 0.044715 x**2).
    """

    @staticmethod
    def forward(ctx, x, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return backends.active().gelu(x, approximate).astype(x.dtype, copy=False)  # float16 in, float16 out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return backends.active().gelu_backward(x, grad, ctx.approximate)


class SiLU(Function):
    """y = x * sigmoid(x) (also called swish).   dy/dx = s (1 + x (1 - s)), s = sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        s = expit(x)  # sigmoid, without overflow
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        return grad * s * (1 + x * (1 - s))
