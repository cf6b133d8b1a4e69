"""Numba kernels for the hot paths, with the same functions as numpy_backend.

Each kernel fuses what the NumPy reference does in several passes over memory
into one loop per row (softmax, layer norm) or per element (GELU), and runs the
rows in parallel. Attention takes a block of queries at a time, with BLAS for the
matrix products: up to a few thousand keys, against every key at once (a plain
softmax per row); beyond, one tile of keys at a time with a running max and
normaliser per query, so that the scores of a block never outgrow the cache.

To step into a kernel with pdb, run with NUMBA_DISABLE_JIT=1: the kernels are
then ordinary Python functions (slow, but every local is visible). Or switch
to the readable reference with mt.set_backend("numpy").

Kernels compile on first use and are cached on disk (cache=True), so a second
process loads them instead of compiling again.
"""

import math
import os

import numba
import numpy as np
from numba import njit, prange

from . import blas_threads
from .numpy_backend import common_dtype, default_scale

# Numba's threads and OpenBLAS's threads fight for the same cores: the default
# (OpenMP) layer spins its waiting threads while BLAS runs, the workqueue layer does
# not (compare: NUMBA_THREADING_LAYER=omp python -m benchmarks block).
# A user's own NUMBA_THREADING_LAYER wins.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = "workqueue"


def _single_threaded_blas_for_numba():
    """Numba reaches BLAS through SciPy's own OpenBLAS (a second copy, beside NumPy's).
    Every BLAS call from our kernels happens inside a parallel loop that already uses
    every core, so that copy's threads only fight ours and slow the kernels down
    (`python -m benchmarks kernels` times them). NumPy's BLAS (the big products outside
    the kernels) keeps all its threads."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # the limit is a speed-up, not a requirement
        return
    controller = ThreadpoolController()
    scipy_paths = [lib.filepath for lib in controller.lib_controllers if "scipy.libs" in lib.filepath]
    scipy_blas = controller.select(filepath=scipy_paths)
    scipy_blas.limit(limits=1)


_single_threaded_blas_for_numba()

xp = np
name = "numba"

QUERY_BLOCK = 64  # queries handled together in attention (one BLAS call per key tile)
KEY_TILE = 128  # keys per tile
# Up to SHORT_KEYS keys, attention takes a block of SHORT_QUERY_BLOCK queries against every key at
# once (no running max, no rescaling; causal, each block stops at its last visible key).
# Both chosen by timing forward + backward against the tiled kernels (T from 101 to 2048, d 16
# and 64, causal or not): the short path was the faster at every size tried.
SHORT_KEYS = 2048
SHORT_QUERY_BLOCK = 128


def _rows(x, axis):
    """x with `axis` moved last, as a C-contiguous (rows, n) array, and how to undo it."""
    moved = np.moveaxis(x, axis, -1)
    rows = np.ascontiguousarray(moved).reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, 0)
    return _read_only(rows), moved.shape


def _read_only(array):
    """A read-only view of an array a kernel only reads. Numba compiles a kernel once per
    combination of argument types, and whether an array may be written is part of its type
    (np.broadcast_to makes read-only arrays, np.empty writable ones). Read-only inputs
    everywhere mean one compile per dtype: the test suite compiled the attention kernels
    nine times each, for every mix of writable and read-only inputs it happened to pass."""
    view = array.view()
    view.flags.writeable = False
    return view


def _input(array, shape, dtype=None):
    """`array` as a kernel reads it: C-contiguous, of `dtype`, in `shape`, read-only."""
    return _read_only(np.ascontiguousarray(array, dtype=dtype).reshape(shape))


def _unrows(rows, moved_shape, axis):
    return np.moveaxis(rows.reshape(moved_shape), -1, axis)


def _no_mask():
    return _read_only(np.zeros((0, 0), dtype=np.bool_))


# ----------------------------------------------------------------------------
# exp, vectorised
# ----------------------------------------------------------------------------
# This llvmlite has no SVML, so math.exp in a loop is a scalar call per element.
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


# Not full fastmath: reassociation would fold t - k*LN2_HI - k*LN2_LO into t - k*ln2 and
# lose the exactness of the split; infinities must stay (exp(-inf) = 0 for hidden scores).
_EXP_FLAGS = {"nsz", "arcp", "contract", "afn"}
_ONE32 = np.float32(1.0)
_INF32 = np.float32(np.inf)
_EXP_P = (  # exp(r) = 1 + r + r^2 P(r), Cephes' expf
    np.float32(5.0000001201e-1), np.float32(1.6666665459e-1), np.float32(4.1665795894e-2),
    np.float32(8.3334519073e-3), np.float32(1.3981999507e-3), np.float32(1.9875691500e-4),
)


@njit(fastmath=_EXP_FLAGS, inline="always")
def _polynomial(x, coefficients):
    """coefficients[0] + coefficients[1] x + coefficients[2] x^2 + ..., by Horner's rule
    (from the highest coefficient down: one multiply-add per coefficient)."""
    value = coefficients[-1]
    for i in range(len(coefficients) - 2, -1, -1):
        value = value * x + coefficients[i]
    return value


# inline="always" (here and on _erff below): Numba pastes the function into the loop that calls
# it; left to LLVM, the inliner gives up on the larger _erff and the loop makes a call per element.
@njit(fastmath=_EXP_FLAGS, inline="always")
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


@njit(fastmath=_EXP_FLAGS, cache=True)
def _exp_into(src, offset, dst):
    """dst[i] = exp(src[i] - offset) for 1-D contiguous arrays (dst may not be src)."""
    if src.itemsize != 4:
        for i in range(src.shape[0]):
            dst[i] = math.exp(src[i] - offset)
        return
    for i in range(src.shape[0]):
        dst[i] = _expf(src[i] - offset)


def exp(x):
    """exp over an array with the kernel above (for tests and benchmarks)."""
    flat = _input(x, -1)
    out = np.empty_like(flat)
    _exp_into(flat, flat.dtype.type(0), out)
    return out.reshape(np.shape(x))


# The row kernels may reorder their sums ("reassoc"), which is what lets the compiler
# vectorise a reduction; they keep IEEE infinities and NaNs (no "ninf"/"nnan"), because a
# fully masked row is recognised by its maximum being -inf.
_ROW_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}


# ----------------------------------------------------------------------------
# matmul
# ----------------------------------------------------------------------------


def matmul(a, b):
    """a @ b. A stack of matrices times one matrix (x @ W in every Linear layer) becomes
    one large BLAS call on (batch * n, k) rows; everything else is np.matmul.

    A Numba kernel running a batch of matrices in parallel (np.dot per matrix) was
    slower than np.matmul, so there is none: NumPy already hands each matrix to BLAS.
    """
    if b.ndim == 2 and a.ndim > 2 and a.dtype == b.dtype:
        flat = np.ascontiguousarray(a).reshape(int(np.prod(a.shape[:-1])), a.shape[-1])  # (batch * n, k)
        return blas_threads.product(np.dot, flat, b).reshape(a.shape[:-1] + (b.shape[-1],))
    return blas_threads.product(np.matmul, a, b)  # a small product on one BLAS thread


# ----------------------------------------------------------------------------
# softmax and log-softmax, fused per row
# ----------------------------------------------------------------------------


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _softmax_rows(x, hidden, y):
    """y[r] = softmax(x[r]) over the entries not hidden; a fully hidden row is all zeros.
    Row r of x uses row r % len(hidden) of the mask (a mask shared by leading axes repeats).
    The loops use selects, not branches, so that they vectorise; a NaN is passed over by the
    max but not by exp, so a visible NaN still makes its whole row NaN (as in NumPy)."""
    use_mask = hidden.shape[0] > 0
    for r in prange(x.shape[0]):
        m = r % hidden.shape[0] if use_mask else 0
        row_max = -np.inf
        if use_mask:
            for c in range(x.shape[1]):
                row_max = max(row_max, -np.inf if hidden[m, c] else x[r, c])
        else:
            for c in range(x.shape[1]):
                row_max = max(row_max, x[r, c])
        if row_max == -np.inf:  # nothing visible (the policy: zeros, not 0 / 0), or only NaN
            y[r, :] = 0.0
            for c in range(x.shape[1]):
                if x[r, c] != x[r, c] and not (use_mask and hidden[m, c]):
                    y[r, :] = np.nan
            continue
        _exp_into(x[r], row_max, y[r])
        total = 0.0
        if use_mask:
            h = hidden[m]
            for c in range(x.shape[1]):
                y[r, c] = 0.0 if h[c] else y[r, c]
                total += y[r, c]
        else:
            for c in range(x.shape[1]):
                total += y[r, c]
        inverse = 1.0 / total
        for c in range(x.shape[1]):
            y[r, c] *= inverse


# BEGIN SOLUTION softmax_backward
@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _softmax_backward_rows(y, dy, dx):
    """dx[r] = y[r] * (dy[r] - sum(dy[r] * y[r])). A dy of one column is one number per row,
    the same for every entry (see _gradient_rows)."""
    for r in prange(y.shape[0]):
        if dy.shape[1] == 1:
            g = dy[r, 0]
            total = 0.0
            for c in range(y.shape[1]):
                total += y[r, c]
            dot = g * total
            for c in range(y.shape[1]):
                dx[r, c] = y[r, c] * (g - dot)
            continue
        dot = 0.0
        for c in range(y.shape[1]):
            dot += dy[r, c] * y[r, c]
        for c in range(y.shape[1]):
            dx[r, c] = y[r, c] * (dy[r, c] - dot)
# END SOLUTION


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _log_softmax_rows(x, y):
    """y[r] = (x[r] - max) - log sum exp(x[r] - max)."""
    for r in prange(x.shape[0]):
        row_max = -np.inf
        for c in range(x.shape[1]):
            row_max = max(row_max, x[r, c])  # passes over NaN (and vectorises); exp then does not
        _exp_into(x[r], row_max, y[r])  # y as scratch for the exps
        total = 0.0
        for c in range(x.shape[1]):
            total += y[r, c]
        # y = (x - max) - log sum, the reference's order, in two passes. Grouped as
        # x - (max + log sum), max + log sum rounds to max once |max| dwarfs log sum (|x| ~ 1e14
        # in float64) and every y becomes 0. In one pass, "reassoc" lets the compiler hoist
        # max + log sum out of the loop, which is that grouping; the store between the passes
        # keeps the order.
        for c in range(x.shape[1]):
            y[r, c] = x[r, c] - row_max
        log_total = math.log(total)
        for c in range(x.shape[1]):
            y[r, c] -= log_total


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _log_softmax_backward_rows(y, dy, dx):
    """dx[r] = dy[r] - exp(y[r]) * sum(dy[r]). A dy of one column is one number per row,
    the same for every entry (see _gradient_rows)."""
    for r in prange(y.shape[0]):
        _exp_into(y[r], 0.0, dx[r])  # dx as scratch for exp(y)
        if dy.shape[1] == 1:
            g = dy[r, 0]
            total = g * y.shape[1]
            for c in range(y.shape[1]):
                dx[r, c] = g - dx[r, c] * total
            continue
        total = 0.0
        for c in range(y.shape[1]):
            total += dy[r, c]
        for c in range(y.shape[1]):
            dx[r, c] = dy[r, c] - dx[r, c] * total


def _mask_rows(mask, shape, axis):
    """A boolean mask as rows that repeat: row r of the scores uses mask row r % len(rows).
    A mask shared by the leading axes (a (T, T) causal mask over (B, H, T, T) scores) is used
    as it is, not copied out to the scores' size; any other broadcast is copied (as bools)."""
    ndim = len(shape)
    mask = mask.reshape((1,) * (ndim - mask.ndim) + mask.shape)
    lead = 0
    while lead < ndim - 1 and mask.shape[lead] == 1:
        lead += 1
    if axis == ndim - 1 and mask.shape[lead:] == tuple(shape[lead:]):
        return _input(mask, (-1, shape[-1]))
    return _rows(np.broadcast_to(mask, shape), axis)[0]


def softmax(x, axis=-1, mask=None):
    rows, moved_shape = _rows(x, axis)
    hidden = _no_mask() if mask is None else _mask_rows(mask, x.shape, axis % x.ndim)
    y = np.empty_like(rows)
    if rows.size:
        _softmax_rows(rows, hidden, y)
    return _unrows(y, moved_shape, axis)


def _gradient_rows(dy, axis):
    """dy as (rows, n), as _rows makes it; or, where dy is broadcast along `axis` (one number per
    row, stride 0: a sum's gradient is one number broadcast to the whole input), as those
    numbers in place, (rows, 1). Copying such a gradient out to full size took as long as the
    kernel; reading it strided stopped the kernel's loops from vectorising."""
    moved = np.moveaxis(dy, axis, -1)
    if moved.size and moved.strides[-1] == 0 and moved.shape[-1] > 1:
        try:
            return _read_only(np.reshape(moved[..., :1], (-1, 1), copy=False))
        except ValueError:  # the leading axes do not flatten without a copy
            pass
    return _rows(dy, axis)[0]


def _rows_backward(kernel, y, dy, axis):
    """Run a row backward kernel(y_rows, dy_rows, dx_rows) on arrays of any shape and axis."""
    y_rows, moved_shape = _rows(y, axis)
    dy_rows = _gradient_rows(dy.astype(y.dtype, copy=False), axis)
    dx = np.empty_like(y_rows)
    if y_rows.size:
        kernel(y_rows, dy_rows, dx)
    return _unrows(dx, moved_shape, axis)


# BEGIN SOLUTION softmax_backward
def softmax_backward(y, dy, axis=-1):
    return _rows_backward(_softmax_backward_rows, y, dy, axis)
# END SOLUTION


def log_softmax(x, axis=-1):
    rows, moved_shape = _rows(x, axis)
    y = np.empty_like(rows)
    if rows.size:
        _log_softmax_rows(rows, y)
    return _unrows(y, moved_shape, axis)


def log_softmax_backward(y, dy, axis=-1):
    return _rows_backward(_log_softmax_backward_rows, y, dy, axis)


# ----------------------------------------------------------------------------
# layer norm, fused per row
# ----------------------------------------------------------------------------


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _layer_norm_rows(x, weight, bias, eps, y, mean, rstd):
    """One row at a time: mean, biased variance (two passes, for accuracy), normalise, affine."""
    n = x.shape[1]
    for r in prange(x.shape[0]):
        total = 0.0
        for c in range(n):
            total += x[r, c]
        row_mean = total / n
        squares = 0.0
        for c in range(n):
            squares += (x[r, c] - row_mean) ** 2
        row_rstd = 1.0 / math.sqrt(squares / n + eps)
        for c in range(n):
            value = (x[r, c] - row_mean) * row_rstd
            if weight.shape[0]:
                value = value * weight[c] + bias[c]
            y[r, c] = value
        mean[r] = row_mean
        rstd[r] = row_rstd


# BEGIN SOLUTION layer_norm_backward
@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _layer_norm_backward_rows(dy, x, weight, mean, rstd, dx, dweight_parts, dbias_parts):
    """dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)), g = dy * weight, in one pass per row.

    dweight and dbias sum over rows; each thread's chunk of rows adds into its own
    row of *_parts (no two threads write the same memory), summed afterwards.
    """
    rows, n = x.shape
    chunks = dweight_parts.shape[0]
    for chunk in prange(chunks):
        for r in range(chunk * rows // chunks, (chunk + 1) * rows // chunks):
            g_sum = 0.0
            g_xhat_sum = 0.0
            for c in range(n):
                x_hat = (x[r, c] - mean[r]) * rstd[r]
                g = dy[r, c] * weight[c] if weight.shape[0] else dy[r, c]
                g_sum += g
                g_xhat_sum += g * x_hat
                if weight.shape[0]:
                    dweight_parts[chunk, c] += dy[r, c] * x_hat
                    dbias_parts[chunk, c] += dy[r, c]
            g_mean = g_sum / n
            g_xhat_mean = g_xhat_sum / n
            for c in range(n):
                x_hat = (x[r, c] - mean[r]) * rstd[r]
                g = dy[r, c] * weight[c] if weight.shape[0] else dy[r, c]
                dx[r, c] = rstd[r] * (g - g_mean - x_hat * g_xhat_mean)
# END SOLUTION


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    dtype = common_dtype(x, weight, bias)  # the reference's rule (numpy_backend.common_dtype)
    rows = _input(x, (-1, x.shape[-1]), dtype)
    empty = np.zeros(0, dtype=dtype)
    weight = _input(empty if weight is None else weight, -1, dtype)
    bias = _input(np.zeros_like(weight) if bias is None else bias, -1, dtype)
    y = np.empty_like(rows)
    mean = np.empty(rows.shape[0], dtype=dtype)
    rstd = np.empty(rows.shape[0], dtype=dtype)
    if rows.size:
        _layer_norm_rows(rows, weight, bias, eps, y, mean, rstd)
    stats_shape = x.shape[:-1] + (1,)
    return y.reshape(x.shape), mean.reshape(stats_shape), rstd.reshape(stats_shape)


# BEGIN SOLUTION layer_norm_backward
def layer_norm_backward(dy, x, weight, mean, rstd):
    dtype = common_dtype(x, weight, mean)
    rows = _input(x, (-1, x.shape[-1]), dtype)
    dy_rows = _input(dy, rows.shape, dtype)
    w = _input(np.zeros(0) if weight is None else weight, -1, dtype)
    chunks = max(1, min(rows.shape[0], 4 * numba.get_num_threads()))
    parts_width = rows.shape[1] if weight is not None else 0
    dweight_parts = np.zeros((chunks, parts_width), dtype=np.float64)
    dbias_parts = np.zeros((chunks, parts_width), dtype=np.float64)
    dx = np.empty_like(rows)
    if rows.size:
        _layer_norm_backward_rows(
            dy_rows, rows, w, _input(mean, -1, dtype), _input(rstd, -1, dtype), dx, dweight_parts, dbias_parts
        )
    if weight is None:
        return dx.reshape(x.shape), None, None
    return dx.reshape(x.shape), dweight_parts.sum(axis=0).astype(dtype), dbias_parts.sum(axis=0).astype(dtype)
# END SOLUTION


# ----------------------------------------------------------------------------
# GELU, fused elementwise
# ----------------------------------------------------------------------------
# One loop per element does the whole forward (or backward), with erf and exp written
# as float32 polynomials the compiler inlines and vectorises; float64 calls math.erf
# and math.exp per element (gradient checks need their accuracy; float64 is not the
# training path).
#
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

@njit(fastmath=_EXP_FLAGS, inline="always")
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


@njit(parallel=True, cache=True, fastmath=_EXP_FLAGS)
def _erf_flat(x, y):
    for i in prange(x.shape[0]):
        y[i] = _erff(x[i]) if x.itemsize == 4 else math.erf(x[i])


def erf(x):
    """erf over an array with the kernels' erf (for tests and benchmarks)."""
    flat = _input(x, -1)
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


@njit(parallel=True, cache=True, fastmath=_EXP_FLAGS)  # no reassociation: see above
def _gelu_flat(x, tanh_form, c, y):
    sqrt_2_over_pi, cubic, inv_sqrt2, half, one, two = c[0], c[1], c[2], c[4], c[5], c[6]
    float32 = x.itemsize == 4
    # A plain prange over the elements: Numba hands each thread one contiguous range, and the
    # compiler vectorises its loop. (Chunks of our own, a range per job, ran 1.6-1.9x slower on one
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
            y[i] = half * v * (one + (_erff(z) if float32 else math.erf(z)))


@njit(parallel=True, cache=True, fastmath=_EXP_FLAGS)  # no reassociation: see above
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
            cdf = half * (one + (_erff(z) if float32 else math.erf(z)))
            minus_half_x2 = -half * v * v
            pdf = (_expf(minus_half_x2) if float32 else math.exp(minus_half_x2)) * inv_sqrt_2pi
            dx[i] = dy[i] * (cdf + v * pdf)


def gelu(x, approximate="none"):
    flat = _input(x, -1)
    y = np.empty_like(flat)
    _gelu_flat(flat, approximate == "tanh", np.array(_GELU_CONSTANTS, dtype=x.dtype), y)
    return y.reshape(x.shape)


def gelu_backward(x, dy, approximate="none"):
    flat = _input(x, -1)
    dy_flat = _input(dy, -1, x.dtype)
    dx = np.empty_like(flat)
    _gelu_backward_flat(flat, dy_flat, approximate == "tanh", np.array(_GELU_CONSTANTS, dtype=x.dtype), dx)
    return dx.reshape(x.shape)


# ----------------------------------------------------------------------------
# Attention, tiled (FlashAttention on a CPU)
# ----------------------------------------------------------------------------


@njit(cache=True, fastmath=_ROW_FLAGS)
def _exp_block(scores, row_max, weights):
    """weights = exp(scores - row_max[a]) over a C-contiguous (rows, keys) block, row a at a time.
    The scores are overwritten (with scores - row_max); a row whose max is -inf (nothing visible)
    gets zeros. One exp over the whole block: short rows would spend more in loop tails than in exp."""
    for a in range(scores.shape[0]):
        m = row_max[a]
        if m == -np.inf:
            scores[a, :] = -np.inf
            continue
        for b in range(scores.shape[1]):
            scores[a, b] -= m
    _exp_into(scores.reshape(-1), scores.dtype.type(0), weights.reshape(-1))


@njit(cache=True, fastmath=_ROW_FLAGS)
def _visible_row_max(scores, row_max):
    """row_max[a] = the largest score of row a (-inf where hidden), passing over NaN (a NaN
    beside numbers makes the row's sum NaN, which the caller looks for); NaN if nothing but
    NaN is visible."""
    for a in range(scores.shape[0]):
        m = -np.inf
        for b in range(scores.shape[1]):
            m = max(m, scores[a, b])  # passes over NaN, and so vectorises
        row_max[a] = m
        if m == -np.inf:  # every score hidden, or NaN: look again (rare, so slow is fine)
            for b in range(scores.shape[1]):
                if scores[a, b] != scores[a, b]:
                    row_max[a] = scores[a, b]


# Loops instead of `dst[...] += src` and `dst[...] = src` between arrays, in every attention
# kernel: Numba's own versions check the shapes with an error message formatted at run time,
# and compiling that string code added about 5 s to the first compile of a block.
@njit(cache=True, inline="always")
def _add_into(dst, src):
    """dst += src, both (rows, columns)."""
    for a in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[a, c] += src[a, c]


@njit(cache=True, inline="always")
def _copy_into(dst, src):
    """dst[...] = src, both (rows, columns)."""
    for a in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[a, c] = src[a, c]


# BEGIN SOLUTION tiled_attention
@njit(cache=True)
def _mask_tile(scores, bh, i0, j0, hidden, bias, causal, causal_offset, scale):
    """Scale a (queries, keys) score tile in place, add the bias, hide what the masks hide.

    With `causal`, query i (absolute index i0 + a) may see key j (j0 + b) when
    j <= i + causal_offset, where causal_offset = Tk - Tq: the queries are the
    last Tq positions of the Tk keys, as when generating with a KV cache.
    """
    has_mask = hidden.shape[0] > 0
    has_bias = bias.shape[0] > 0
    fully_visible = not causal or j0 + scores.shape[1] - 1 <= i0 + causal_offset
    if fully_visible and not has_mask and not has_bias:  # most tiles: just scale (vectorised)
        for a in range(scores.shape[0]):
            for b in range(scores.shape[1]):
                scores[a, b] *= scale
        return
    mask_b = bh if has_mask and hidden.shape[0] > 1 else 0
    bias_b = bh if has_bias and bias.shape[0] > 1 else 0
    for a in range(scores.shape[0]):
        for b in range(scores.shape[1]):
            s = scores[a, b] * scale
            if has_bias:
                s += bias[bias_b, i0 + a, j0 + b]
            if (causal and j0 + b > i0 + a + causal_offset) or (
                has_mask and hidden[mask_b, i0 + a, j0 + b]
            ):
                s = -np.inf
            scores[a, b] = s


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _short_attention_forward(q, k, v, hidden, bias, causal, causal_offset, scale, query_block,
                             out, row_max, row_sum):
    """out = softmax(q k^T * scale + bias, hidden) v, a block of queries against every key it
    may see at once (up to SHORT_KEYS keys), one block per job. Causal, a block stops at its
    last query's last visible key."""
    heads, queries, _ = q.shape
    blocks = (queries + query_block - 1) // query_block
    for job in prange(heads * blocks):
        bh = job // blocks
        i0 = (job % blocks) * query_block
        i1 = min(i0 + query_block, queries)
        key_end = min(k.shape[1], i1 + causal_offset) if causal else k.shape[1]
        if key_end <= 0:  # these queries see no key: zero output (the policy), l = 0
            out[bh, i0:i1] = 0.0
            row_max[bh, i0:i1] = -np.inf
            row_sum[bh, i0:i1] = 0.0
            continue
        scores = np.dot(q[bh, i0:i1], k[bh, :key_end].T)  # (block, keys), BLAS
        _mask_tile(scores, bh, i0, 0, hidden, bias, causal, causal_offset, scale)
        _visible_row_max(scores, row_max[bh, i0:i1])
        weights = np.empty(scores.shape, dtype=q.dtype)
        _exp_block(scores, row_max[bh, i0:i1], weights)  # exp(s - m), not yet divided by l
        for a in range(i1 - i0):
            total = 0.0
            for b in range(key_end):
                total += weights[a, b]
            row_sum[bh, i0 + a] = total
            if total != total and row_max[bh, i0 + a] != np.inf:  # a NaN score: the row's max is NaN
                row_max[bh, i0 + a] = total
        block_out = np.dot(weights, v[bh, :key_end])  # (block, dv), BLAS
        for a in range(i1 - i0):
            # a fully masked row (l = 0) outputs zero (the policy); "!= 0" lets a NaN through
            inverse = 1.0 / row_sum[bh, i0 + a] if row_sum[bh, i0 + a] != 0 else 0.0
            for c in range(out.shape[2]):
                out[bh, i0 + a, c] = block_out[a, c] * inverse


@njit(parallel=True, cache=True, fastmath=_ROW_FLAGS)
def _short_attention_backward(q, k, v, out, row_max, row_sum, dout, hidden, bias, causal, causal_offset, scale,
                              query_block, dq, dk, dv):
    """_attention_backward below with one tile holding every key a block of queries sees, and 1 / l
    folded into the small factors: with W = exp(S - m) and P = W / l,
    dV = W^T (dO / l), dS = W * (dO V^T - D) / l, dQ = scale dS K, dK = scale dS^T Q.
    One (batch*head) per job, so no two threads add into the same dK or dV (zeros on entry)."""
    heads, queries, _ = q.shape
    for job in prange(heads):
        bh = np.int64(job)  # (the parfor index alone is typed as a float inside _mask_tile)
        for i0 in range(0, queries, query_block):
            i1 = min(i0 + query_block, queries)
            key_end = min(k.shape[1], i1 + causal_offset) if causal else k.shape[1]
            if key_end <= 0:
                dq[bh, i0:i1] = 0.0
                continue
            scores = np.dot(q[bh, i0:i1], k[bh, :key_end].T)
            _mask_tile(scores, bh, i0, 0, hidden, bias, causal, causal_offset, scale)
            inverse = np.empty(i1 - i0, dtype=q.dtype)  # 1 / l, and 0 for a fully masked row (no gradient)
            for a in range(i1 - i0):
                inverse[a] = 1.0 / row_sum[bh, i0 + a] if row_sum[bh, i0 + a] != 0 else 0.0
            weights = np.empty(scores.shape, dtype=q.dtype)
            _exp_block(scores, row_max[bh, i0:i1], weights)
            dout_over_l = np.empty((i1 - i0, dout.shape[2]), dtype=q.dtype)
            for a in range(i1 - i0):
                for c in range(dout.shape[2]):
                    dout_over_l[a, c] = dout[bh, i0 + a, c] * inverse[a]
            _add_into(dv[bh, :key_end], np.dot(weights.T, dout_over_l))
            dS = np.dot(dout[bh, i0:i1], v[bh, :key_end].T)  # dP, then dS in place
            for a in range(i1 - i0):
                D = 0.0
                for c in range(out.shape[2]):
                    D += dout[bh, i0 + a, c] * out[bh, i0 + a, c]
                factor = inverse[a] * scale
                for b in range(key_end):
                    dS[a, b] = weights[a, b] * (dS[a, b] - D) * factor
            _copy_into(dq[bh, i0:i1], np.dot(dS, k[bh, :key_end]))
            _add_into(dk[bh, :key_end], np.dot(dS.T, q[bh, i0:i1]))


@njit(parallel=True, cache=True)
def _attention_forward(q, k, v, hidden, bias, causal, causal_offset, scale, out, row_max, row_sum):
    """out = softmax(q k^T * scale + bias, hidden) v per (batch*head), one query block per job."""
    heads, queries, _ = q.shape
    keys = k.shape[1]
    query_blocks = (queries + QUERY_BLOCK - 1) // QUERY_BLOCK
    for job in prange(heads * query_blocks):
        bh = job // query_blocks
        i0 = (job % query_blocks) * QUERY_BLOCK
        i1 = min(i0 + QUERY_BLOCK, queries)
        q_block = q[bh, i0:i1]
        running_max = np.full(i1 - i0, -np.inf)
        normaliser = np.zeros(i1 - i0)
        acc = np.zeros((i1 - i0, v.shape[2]), dtype=q.dtype)
        weights = np.empty(KEY_TILE, dtype=q.dtype)  # one row of exp(scores - max)
        for j0 in range(0, keys, KEY_TILE):
            if causal and j0 > i1 - 1 + causal_offset:
                break  # every later key is in every query's future
            j1 = min(j0 + KEY_TILE, keys)
            scores = np.dot(q_block, k[bh, j0:j1].T)  # (block, tile), BLAS
            _mask_tile(scores, bh, i0, j0, hidden, bias, causal, causal_offset, scale)
            for a in range(i1 - i0):
                new_max = running_max[a]
                for b in range(j1 - j0):
                    if scores[a, b] > new_max or scores[a, b] != scores[a, b]:  # NaN wins
                        new_max = scores[a, b]
                if new_max == -np.inf:  # nothing visible yet in this row
                    for b in range(j1 - j0):
                        scores[a, b] = 0.0
                    continue
                correction = math.exp(running_max[a] - new_max)  # 0 when nothing was seen
                _exp_into(scores[a], new_max, weights[: j1 - j0])  # 0 for hidden keys (-inf)
                tile_sum = 0.0
                for b in range(j1 - j0):
                    scores[a, b] = weights[b]
                    tile_sum += weights[b]
                normaliser[a] = normaliser[a] * correction + tile_sum
                for c in range(acc.shape[1]):
                    acc[a, c] *= correction
                running_max[a] = new_max
            _add_into(acc, np.dot(scores, v[bh, j0:j1]))  # (block, dv), BLAS
        for a in range(i1 - i0):
            # a fully masked row (l = 0) outputs zero (the policy); "!= 0" lets a NaN through
            inverse = 1.0 / normaliser[a] if normaliser[a] != 0 else 0.0
            for c in range(acc.shape[1]):
                out[bh, i0 + a, c] = acc[a, c] * inverse
            row_max[bh, i0 + a] = running_max[a]
            row_sum[bh, i0 + a] = normaliser[a]


@njit(parallel=True, cache=True)
def _attention_backward(q, k, v, out, row_max, row_sum, dout, hidden, bias, causal, causal_offset, scale, dq, dk, dv):
    """Recompute each tile's weights P = exp(S - m) / l and accumulate
    dV += P^T dO, dS = P * (dO V^T - D), dQ += scale dS K, dK += scale dS^T Q.
    One (batch*head) per job, so no two threads add into the same dK or dV."""
    heads, queries, _ = q.shape
    keys = k.shape[1]
    for job in prange(heads):
        bh = np.int64(job)  # (the parfor index alone is typed as a float inside _mask_tile)
        for i0 in range(0, queries, QUERY_BLOCK):
            i1 = min(i0 + QUERY_BLOCK, queries)
            q_block = q[bh, i0:i1]
            dout_block = dout[bh, i0:i1]
            D = np.zeros(i1 - i0, dtype=q.dtype)
            for a in range(i1 - i0):
                for c in range(out.shape[2]):
                    D[a] += dout_block[a, c] * out[bh, i0 + a, c]
            dq_block = np.zeros((i1 - i0, q.shape[2]), dtype=q.dtype)
            weights = np.empty(KEY_TILE, dtype=q.dtype)
            for j0 in range(0, keys, KEY_TILE):
                if causal and j0 > i1 - 1 + causal_offset:
                    break
                j1 = min(j0 + KEY_TILE, keys)
                P = np.dot(q_block, k[bh, j0:j1].T)
                _mask_tile(P, bh, i0, j0, hidden, bias, causal, causal_offset, scale)
                for a in range(i1 - i0):
                    total = row_sum[bh, i0 + a]
                    if total == 0:  # a fully masked row: no weights, no gradient
                        P[a, :] = 0.0
                        continue
                    _exp_into(P[a], row_max[bh, i0 + a], weights[: j1 - j0])
                    inverse = 1.0 / total
                    for b in range(j1 - j0):
                        P[a, b] = weights[b] * inverse
                _add_into(dv[bh, j0:j1], np.dot(P.T, dout_block))
                dS = np.dot(dout_block, v[bh, j0:j1].T)  # dP, then dS in place
                for a in range(i1 - i0):
                    for b in range(j1 - j0):
                        dS[a, b] = P[a, b] * (dS[a, b] - D[a]) * scale
                _add_into(dq_block, np.dot(dS, k[bh, j0:j1]))
                _add_into(dk[bh, j0:j1], np.dot(dS.T, q_block))
            _copy_into(dq[bh, i0:i1], dq_block)
# END SOLUTION


def _heads(q, k, v, mask):
    """Broadcast q, k, v to one batch shape and flatten it: (batch*heads, T, d), C order.
    The mask keeps a leading size 1 when it is shared by every batch and head."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    heads = math.prod(batch)
    dtype = common_dtype(q, k, v)  # mixed dtypes compute in the common one, as the reference does

    def flat(t):
        return _input(np.broadcast_to(t, batch + t.shape[-2:]), (heads,) + t.shape[-2:], dtype)

    q3, k3, v3 = flat(q), flat(k), flat(v)
    hidden = _read_only(np.zeros((0, 0, 0), dtype=np.bool_))
    bias = _read_only(np.zeros((0, 0, 0), dtype=dtype))
    if mask is not None:
        scores_shape = (q.shape[-2], k.shape[-2])
        full = np.broadcast_to(mask, batch + scores_shape)
        shared = mask.ndim <= 2 or all(n == 1 for n in mask.shape[:-2])
        m3 = (np.broadcast_to(mask.reshape(mask.shape[-2:]) if mask.ndim >= 2 else mask, scores_shape)[None]
              if shared else full.reshape((heads,) + scores_shape))
        if mask.dtype == np.bool_:
            hidden = _input(m3, m3.shape)
        else:
            bias = _input(m3, m3.shape, dtype)
    return batch, q3, k3, v3, hidden, bias


def _is_short(q3, k3, v3):
    """Few enough keys for the short path (a block of queries against every key at once)."""
    return 0 < k3.shape[1] <= SHORT_KEYS and q3.shape[2] > 0 and v3.shape[2] > 0


# BEGIN SOLUTION tiled_attention
def attention(q, k, v, mask=None, scale=None, is_causal=False):
    """Returns (out, (row_max, row_sum)), as the reference does."""
    scale = default_scale(q.shape[-1]) if scale is None else scale
    batch, q3, k3, v3, hidden, bias = _heads(q, k, v, mask)
    out = np.empty(q3.shape[:2] + (v3.shape[-1],), dtype=q3.dtype)
    row_max = np.empty(q3.shape[:2], dtype=q3.dtype)
    row_sum = np.empty(q3.shape[:2], dtype=q3.dtype)
    causal_offset = k.shape[-2] - q.shape[-2]
    if _is_short(q3, k3, v3):
        _short_attention_forward(q3, k3, v3, hidden, bias, bool(is_causal), causal_offset, scale,
                                 SHORT_QUERY_BLOCK, out, row_max, row_sum)
    else:
        _attention_forward(q3, k3, v3, hidden, bias, bool(is_causal), causal_offset, scale, out, row_max, row_sum)
    stats_shape = batch + (q.shape[-2],)
    return out.reshape(batch + out.shape[1:]), (row_max.reshape(stats_shape), row_sum.reshape(stats_shape))


def attention_backward(q, k, v, out, softmax_stats, dout, mask=None, scale=None, is_causal=False):
    scale = default_scale(q.shape[-1]) if scale is None else scale
    batch, q3, k3, v3, hidden, bias = _heads(q, k, v, mask)
    out3 = _input(out, q3.shape[:2] + (v3.shape[-1],), q3.dtype)
    row_max, row_sum = (_input(s, q3.shape[:2], q3.dtype) for s in softmax_stats)
    dout3 = _input(dout, out3.shape, q3.dtype)
    dq, dk, dv = np.empty_like(q3), np.zeros_like(k3), np.zeros_like(v3)
    causal_offset = k.shape[-2] - q.shape[-2]
    if _is_short(q3, k3, v3):
        _short_attention_backward(q3, k3, v3, out3, row_max, row_sum, dout3, hidden, bias, bool(is_causal),
                                  causal_offset, scale, SHORT_QUERY_BLOCK, dq, dk, dv)
    else:
        _attention_backward(
            q3, k3, v3, out3, row_max, row_sum, dout3, hidden, bias, bool(is_causal), causal_offset, scale, dq, dk, dv
        )
    return (dq.reshape(batch + dq.shape[1:]), dk.reshape(batch + dk.shape[1:]), dv.reshape(batch + dv.shape[1:]))
# END SOLUTION


__all__ = [
    "xp", "name", "matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
    "layer_norm", "layer_norm_backward", "gelu", "gelu_backward", "attention", "attention_backward",
]
