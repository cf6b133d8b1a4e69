"""Activation functions: ReLU, GELU (exact and tanh), SiLU."""

import math

import numpy as np

from .. import backends
from ..autograd import Function
from ..backends.conventions import array_module
from .special import expit, scipy_special


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
    Forward keeps Phi(x) (or s(2u)) for backward, which needs it again: the erf is the dearest
    step of the op. In float32, Phi is erf_float32's (below), within 2.3e-7 of the exact value.
    """

    @staticmethod
    def forward(ctx, x, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        ctx.approximate = approximate
        fast = backends.accelerator_for("gelu", x)  # None by default: the op's own lines run
        cdf = None  # Phi(x) (or s(2u)): backward needs it again, and erf costs more than all the rest
        if fast is not None:
            y = fast(x, approximate)
        elif approximate == "tanh":
            cdf = _tanh_cdf(x)  # s(2u)
            y = x * cdf
        else:
            cdf = normal_cdf(x)  # Phi(x)
            y = x * cdf
        if cdf is None:  # an accelerator's forward: x alone, as its backward kernel takes it
            ctx.save_for_backward(x)
        else:
            ctx.save_for_backward(x, cdf)
        return y.astype(x.dtype, copy=False)  # float16 in, float16 out

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors  # (x, Phi(x) or s(2u)), or (x,) where an accelerator ran forward
        x, cdf = saved if len(saved) == 2 else (saved[0], None)
        fast = backends.accelerator_for("gelu_backward", x, grad)  # None by default
        if fast is not None:
            return fast(x, grad, ctx.approximate)
        if ctx.approximate == "tanh":  # d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, s = s(2u)
            s = _tanh_cdf(x) if cdf is None else cdf
            if x.dtype == np.float16:  # in float32, as PyTorch computes float16: x * x overflows float16 past 256
                x, s = x.astype(np.float32), s.astype(np.float32)
            with np.errstate(over="ignore", invalid="ignore"):  # past sqrt(max): inf * 0 = NaN, PyTorch's answer too
                du_dx = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
                return grad * (s + 2 * x * s * (1 - s) * du_dx)
        # dy/dx = Phi(x) + x phi(x). In place after each array's first step: these arrays are as
        # large as x, and a new one per step costs more than the arithmetic.
        pdf = array_module(x).asarray(-0.5 * x)  # (asarray: for a 0-d x, NumPy's products are scalars)
        pdf *= x
        pdf = np.exp(pdf, out=pdf)
        pdf /= math.sqrt(2 * math.pi)  # phi(x)
        slope = np.multiply(x, pdf, out=pdf)  # x phi(x), then Phi(x) + x phi(x)
        slope += normal_cdf(x) if cdf is None else cdf
        if slope.dtype != grad.dtype:  # float16 x (Phi is float32) or a grad of another dtype
            return grad * slope
        return np.multiply(grad, slope, out=slope)  # grad * slope, into slope (our own array)


SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def _tanh_cdf(x):
    """s(2u), u = sqrt(2/pi) (x + 0.044715 x**3): the tanh form's stand-in for Phi(x)."""
    with np.errstate(over="ignore"):  # x**3 overflows to +-inf for large |x|, and s(+-inf) = 1 or 0 is right
        return _special(x).expit(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3))


def normal_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF.

    A float32 NumPy array (the training path) takes erf_float32: scipy's erf computes each float32
    in float64, which costs more than the rest of GELU together. Other arrays take scipy's erf
    (float64 gradient checks need its accuracy)."""
    if not (type(x) is np.ndarray and x.dtype == np.float32 and x.ndim > 0):
        cdf = _special(x).erf(x / math.sqrt(2))
        cdf += 1
        cdf *= 0.5
        return cdf
    cdf = erf_float32(x * np.float32(1 / math.sqrt(2)))
    cdf += 1
    cdf *= 0.5
    # Left of FAR_LEFT, Phi(x) < 0.067 is 1 + erf with erf near -1, and the fit's 4.5e-7 would be a
    # growing part of it (a blind fuzzer found 2e-5 relative at x = -2.48 with the cut at -2.5, where
    # PyTorch's worst is 5e-6): there (7 in 100 of normal inputs) scipy's ndtr, exact.
    far_left = x < FAR_LEFT
    if far_left.any():
        cdf[far_left] = scipy_special().ndtr(x[far_left])
    return cdf


FAR_LEFT = -1.5


# erf(z) = z P(z^2) / Q(z^2) for |z| <= 4 and +-1 beyond (where float32 rounds it to +-1): the
# rational fit of Eigen's and XLA's float32 erf, within 4.5e-7 of erf (7.5 float32 steps near
# 1), so Phi is within 2.3e-7 and GELU within PyTorch's float32 tolerance (tests/test_default_path.py).
ERF_P = (  # P's coefficients, of z^0, z^2, ..., z^12
    -1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
    -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10,
)
ERF_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
         -1.45660718464996e-05)  # Q's, of z^0, z^2, ..., z^8


def erf_float32(z):
    """erf(z) for a float32 array z with at least one axis (a 0-d array's steps give NumPy
    scalars, which cannot be worked on in place), by the fit above, a step at a time in place."""
    z = np.clip(z, np.float32(-4), np.float32(4))
    z2 = z * z
    numerator = _horner(z2, ERF_P)
    numerator *= z
    numerator /= _horner(z2, ERF_Q)
    return np.clip(numerator, np.float32(-1), np.float32(1), out=numerator)  # (in float32 the fit passes 1 by 4e-7)


def _horner(t, coefficients):
    """c0 + c1 t + c2 t^2 + ... as ((c_n t + c_n-1) t + ...) t + c0, in t's dtype, a new array."""
    value = t * t.dtype.type(coefficients[-1])
    value += t.dtype.type(coefficients[-2])
    for c in coefficients[-3::-1]:
        value *= t
        value += t.dtype.type(c)
    return value


def _special(x):
    """scipy.special (erf, expit) for NumPy arrays; cupyx.scipy.special for CuPy arrays."""
    if array_module(x) is np:
        return scipy_special()
    import cupyx.scipy.special

    return cupyx.scipy.special


class SiLU(Function):
    """y = x * sigmoid(x) (also called swish).   dy/dx = s (1 + x (1 - s)), s = sigmoid(x)."""

    @staticmethod
    def forward(ctx, x):
        s = expit(x).astype(x.dtype, copy=False)  # sigmoid, without overflow, in x's dtype (float16 too)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s = ctx.saved_tensors
        return grad * s * (1 + x * (1 - s))
