"""Elementwise kernels: exp, erf and GELU, one loop per element.

This llvmlite has no SVML, so math.exp or math.erf in a loop is a scalar call per element.
For float32, exp and erf are written here as polynomials the compiler inlines and vectorises
(each bounded in ulps by a test); float64 calls math.exp and math.erf per element (gradient
checks need their accuracy; float64 is not the training path). The row kernels (softmax,
attention) take their exp from here (`exp_into`).
"""

import math

import numpy as np
from numba import njit, prange

from . import layout
from .settings import EXP_FLAGS

# ----------------------------------------------------------------------------
# exp, vectorised
# ----------------------------------------------------------------------------
# For float32 we compute exp with a polynomial the compiler can vectorise:
#   exp(t) = 2**k * exp(r),  k = round(t / ln 2),  r = t - k ln 2 in [-ln2/2, ln2/2],
# exp(r) by a degree-7 polynomial (Cephes' expf coefficients), and 2**k added
# straight into the exponent bits of the result. Its relative error is below
# 1e-7 (about one float32 ulp) on [-87.3, 88.7]; below -87.3 (where float32
# has only denormals) it returns 0, above 88.7 inf. tests/test_backends.py bounds this against
# np.exp. float64 keeps math.exp: gradient checks need its accuracy.

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # ln 2 split in two so k * ln 2 is exact to float32
_LN2_LO = np.float32(-2.12194440e-4)
_EXP_LOW = np.float32(-87.3)
_EXP_HIGH = np.float32(88.7)

_ONE32 = np.float32(1.0)
_INF32 = np.float32(np.inf)
_EXP_P = (  # exp(r) = 1 + r + r^2 P(r), Cephes' expf
    np.float32(5.0000001201e-1), np.float32(1.6666665459e-1), np.float32(4.1665795894e-2),
    np.float32(8.3334519073e-3), np.float32(1.3981999507e-3), np.float32(1.9875691500e-4),
)


@njit(fastmath=EXP_FLAGS, inline="always")
def _polynomial(x, coefficients):
    """coefficients[0] + coefficients[1] x + coefficients[2] x^2 + ..., by Horner's rule
    (from the highest coefficient down: one multiply-add per coefficient)."""
    value = coefficients[-1]
    for i in range(len(coefficients) - 2, -1, -1):
        value = value * x + coefficients[i]
    return value


# inline="always" (here and on _erff below): Numba pastes the function into the loop that calls
# it; left to LLVM, the inliner gives up on the larger _erff and the loop makes a call per element.
@njit(fastmath=EXP_FLAGS, inline="always")
def _expf(t):
    """exp(t) for one float32 (the method above): 0 below -87.3, inf above 88.7, NaN for NaN."""
    t = np.float32(t)  # (a no-op; lets the float64 kernels type-check the branch they never take)
    clamped = min(max(t, _EXP_LOW), _EXP_HIGH)
    k = np.floor(clamped * _LOG2E + np.float32(0.5))
    r = clamped - k * _LN2_HI - k * _LN2_LO
    mantissa = _polynomial(r, _EXP_P) * r * r + r + _ONE32  # exp(r), in [0.7, 1.5)
    bits = np.float32(mantissa).view(np.int32) + (np.int32(k) << 23)  # times 2**k: add k to the exponent field
    scaled = np.int32(bits).view(np.float32)
    if t < _EXP_LOW:
        return np.float32(0.0)
    if t > _EXP_HIGH:
        return _INF32
    return t if t != t else scaled


@njit(fastmath=EXP_FLAGS, cache=True)
def exp_into(src, offset, dst):
    """dst[i] = exp(src[i] - offset) for 1-D contiguous arrays (dst may not be src)."""
    if src.itemsize != 4:
        for i in range(src.shape[0]):
            dst[i] = math.exp(src[i] - offset)
        return
    for i in range(src.shape[0]):
        dst[i] = _expf(src[i] - offset)


def exp(x):
    """exp over an array with the kernel above (for tests and benchmarks)."""
    flat = layout.as_input(x, -1)
    out = np.empty_like(flat)
    exp_into(flat, flat.dtype.type(0), out)
    return out.reshape(np.shape(x))


# ----------------------------------------------------------------------------
# erf, vectorised, and GELU on it
# ----------------------------------------------------------------------------
# erf in float32 (within 1.25 ulp of scipy's erf in float64 over all float32; tests/test_erf.py):
#   |z| < 0.875:  erf(z) = z + z * P(z^2)       (P(0) = 2/sqrt(pi) - 1, so z + z*P is
#                                                exact where z*P is tiny)
#   |z| >= 0.875: erf(z) = sign(z) (1 - exp(Q(t))),  t = min(|z|, 4)   (Q(t) ~ log erfc(t))
# Both branches are computed and one is selected, so the loop has no jumps. At t = 4,
# exp(Q) = erfc(4) = 1.5e-8 is below half an ulp of 1, so erf is exactly +-1 beyond.
# P and Q are minimax fits (relative error of erf for P, absolute for Q), rounded to
# float32 one coefficient at a time with the others refitted; scripts/fit_erf.py makes them.

_ERF_SWITCH = np.float32(0.875)
_ERF_CLAMP = np.float32(4.0)
_ERF_P = (  # z + z * P(z^2) on |z| < 0.875
    np.float32(0.12837917), np.float32(-0.37612572), np.float32(0.11282627),
    np.float32(-0.026796605), np.float32(0.005038888), np.float32(-0.0006235042),
)
_ERF_Q = (  # log erfc(t) on 0.875 <= t <= 4
    np.float32(0.00016361935), np.float32(-1.1294612), np.float32(-0.63345647), np.float32(-0.108158715),
    np.float32(0.025040507), np.float32(-0.004140956), np.float32(0.00042822585), np.float32(-2.055405e-05),
)


@njit(fastmath=EXP_FLAGS, inline="always")
def _erff(z):
    """erf(z) for one float32 (see the table above)."""
    z = np.float32(z)  # (as in _expf)
    a = abs(z)
    near_zero = z + z * _polynomial(z * z, _ERF_P)
    t = _ERF_CLAMP if a > _ERF_CLAMP else a  # (written so that a NaN stays NaN)
    far = _ONE32 - _expf(_polynomial(t, _ERF_Q))  # 1 - erfc(t)
    if a < _ERF_SWITCH:
        return near_zero
    return far if z > 0 else -far


@njit(fastmath=EXP_FLAGS, inline="always")
def _normal_cdf_f(z):
    """Phi = (1 + erf(z)) / 2 at z = x / sqrt(2), for one float32. Left of -0.875, 1 + erf(z) is
    erfc(|z|) = exp(Q(t)) itself, taken directly: 1 - (1 - exp(Q)) lost Phi's left tail to
    cancellation (relative errors up to 7% at x = -5); past t = 4, erfc's decay, erfc(t) ~
    erfc(4) (4 / t) exp(16 - t^2), where GELU is below 5e-8."""
    z = np.float32(z)
    a = abs(z)
    if z > -_ERF_SWITCH:
        return np.float32(0.5) * (_ONE32 + _erff(z))
    t = _ERF_CLAMP if a > _ERF_CLAMP else a
    tail = _expf(_polynomial(t, _ERF_Q))
    if a > _ERF_CLAMP:
        tail = tail * (_ERF_CLAMP / a) * _expf(_ERF_CLAMP * _ERF_CLAMP - a * a)
    return np.float32(0.5) * tail


@njit(parallel=True, cache=True, fastmath=EXP_FLAGS)
def _erf_flat(x, y):
    for i in prange(x.shape[0]):
        y[i] = _erff(x[i]) if x.itemsize == 4 else math.erf(x[i])


def erf(x):
    """erf over an array with the kernels' erf (for tests and benchmarks)."""
    flat = layout.as_input(x, -1)
    out = np.empty_like(flat)
    _erf_flat(flat, out)
    return out.reshape(np.shape(x))


# The GELU kernels run without reassociation: it regrouped x * du * s * (1 - s) so that a
# product of two huge factors overflowed to inf before the tiny ones could cancel it.
# Constants are passed in as an array of x's dtype (a float64 literal would turn
# every float32 operation into a float64 one and halve the vector width), and read
# into locals first (a load inside a loop could alias the output and stop vectorising).
#   0: sqrt(2/pi)  1: 0.044715  2: 1/sqrt(2)  3: 1/sqrt(2 pi)  4: 0.5  5: 1  6: 2  7: 3  8: inf  9: 0
_GELU_CONSTANTS = (
    math.sqrt(2 / math.pi), 0.044715, 1 / math.sqrt(2), 1 / math.sqrt(2 * math.pi), 0.5, 1.0, 2.0, 3.0, math.inf, 0.0,
)


@njit(parallel=True, cache=True, fastmath=EXP_FLAGS)  # no reassociation: see above
def _gelu_flat(x, tanh_form, c, y):
    sqrt_2_over_pi, cubic, inv_sqrt2, half, one, two = c[0], c[1], c[2], c[4], c[5], c[6]
    float32 = x.itemsize == 4
    # A plain prange over the elements: Numba hands each thread one contiguous range, and the
    # compiler vectorises its loop. (Chunks of our own, a range per job, were slower even on one
    # thread: the index might be negative, so every load was wrapped around one at a time.)
    for i in prange(x.shape[0]):
        v = x[i]
        if tanh_form:
            # 0.5 x (1 + tanh u) = x / (1 + exp(-2u)): no cancellation in 1 + tanh u when u << 0
            minus_2u = -two * sqrt_2_over_pi * (v + cubic * v * v * v)
            e = _expf(minus_2u) if float32 else math.exp(minus_2u)
            y[i] = v / (one + e)
        else:
            z = v * inv_sqrt2
            y[i] = v * (_normal_cdf_f(z) if float32 else half * (one + math.erf(z)))


@njit(parallel=True, cache=True, fastmath=EXP_FLAGS)  # no reassociation: see above
def _gelu_backward_flat(x, dy, tanh_form, c, dx):
    sqrt_2_over_pi, cubic, inv_sqrt2, inv_sqrt_2pi = c[0], c[1], c[2], c[3]
    half, one, two, three, inf, zero = c[4], c[5], c[6], c[7], c[8], c[9]
    float32 = x.itemsize == 4
    for i in prange(x.shape[0]):  # (as in _gelu_flat)
        v = x[i]
        if tanh_form:
            # with s = sigmoid(2u) = 1 / (1 + e), e = exp(-2u): d/dx [x s] = s + 2 x s' du/dx,
            # s' = s (1 - s) = s (e s): no cancellation in 1 - s; where e overflows to inf,
            # s = 0 and s' = 0 (not inf * 0)
            minus_2u = -two * sqrt_2_over_pi * (v + cubic * v * v * v)
            e = _expf(minus_2u) if float32 else math.exp(minus_2u)
            s = one / (one + e)
            s_prime = s * (e * s) if e < inf else zero
            du = sqrt_2_over_pi * (one + three * cubic * v * v)
            dx[i] = dy[i] * (s + two * v * s_prime * du)
        else:
            z = v * inv_sqrt2
            cdf = _normal_cdf_f(z) if float32 else half * (one + math.erf(z))
            minus_half_x2 = -half * v * v
            pdf = (_expf(minus_half_x2) if float32 else math.exp(minus_half_x2)) * inv_sqrt_2pi
            dx[i] = dy[i] * (cdf + v * pdf)


def gelu(x, approximate="none"):
    flat = layout.as_input(x, -1)
    y = np.empty_like(flat)
    _gelu_flat(flat, approximate == "tanh", np.array(_GELU_CONSTANTS, dtype=x.dtype), y)
    return y.reshape(x.shape)


def gelu_backward(x, dy, approximate="none"):
    flat = layout.as_input(x, -1)
    dy_flat = layout.as_input(dy, -1, x.dtype)
    dx = np.empty_like(flat)
    _gelu_backward_flat(flat, dy_flat, approximate == "tanh", np.array(_GELU_CONSTANTS, dtype=x.dtype), dx)
    return dx.reshape(x.shape)

