"""Activation functions: ReLU, GELU (exact and tanh), SiLU."""

import math

import numpy as np
import scipy.special
from scipy.special import expit

from .. import backends
from ..autograd import Function
from ..backends.conventions import array_module


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
    """y = x * Phi(x), Phi the standard normal CDF.

    approximate="none" (PyTorch's default):
        Phi(x) = (1 + erf(x / sqrt 2)) / 2,    dy/dx = Phi(x) + x * phi(x),
        phi(x) = exp(-x**2 / 2) / sqrt(2 pi).
    approximate="tanh" (GPT-2's choice):
        y = x (1 + tanh u) / 2 = x s(2u),  s the sigmoid,  u = sqrt(2/pi) (x + 0.044715 x**3),
        dy/dx = s(2u) + 2 x s(2u) (1 - s(2u)) * sqrt(2/pi) (1 + 3 * 0.044715 x**2).
    The tanh form is computed as x * s(2u): the same function, without the cancellation in
    1 + tanh u for u << 0 (where float32 loses every digit).
    """

    @staticmethod
    def forward(ctx, x, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        fast = backends.accelerator_for("gelu", x)  # None by default: the op's own lines run
        if fast is not None:
            y = fast(x, approximate)
        elif approximate == "tanh":
            y = x * _special(x).expit(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3))  # x s(2u)
        else:
            y = x * normal_cdf(x)  # x Phi(x)
        return y.astype(x.dtype, copy=False)  # float16 in, float16 out

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        fast = backends.accelerator_for("gelu_backward", x, grad)  # None by default
        if fast is not None:
            return fast(x, grad, ctx.approximate)
        if ctx.approximate == "tanh":  # d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, s = s(2u)
            s = _special(x).expit(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3))
            du_dx = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
            return grad * (s + 2 * x * s * (1 - s) * du_dx)
        # dy/dx = Phi(x) + x phi(x). In place after each array's first step: these arrays are as
        # large as x, and a new one per step costs more than the arithmetic.
        pdf = array_module(x).asarray(-0.5 * x)  # (asarray: for a 0-d x, NumPy's products are scalars)
        pdf *= x
        pdf = np.exp(pdf, out=pdf)
        pdf /= math.sqrt(2 * math.pi)  # phi(x)
        slope = np.multiply(x, pdf, out=pdf)  # x phi(x), then Phi(x) + x phi(x)
        slope += normal_cdf(x)
        return grad * slope


SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def normal_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF."""
    cdf = _special(x).erf(x / math.sqrt(2))
    cdf += 1
    cdf *= 0.5
    return cdf


def _special(x):
    """scipy.special (erf, expit) for NumPy arrays; cupyx.scipy.special for CuPy arrays."""
    if array_module(x) is np:
        return scipy.special
    import cupyx.scipy.special

    return cupyx.scipy.special


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
