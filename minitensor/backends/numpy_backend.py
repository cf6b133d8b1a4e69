"""The reference backend: every hot kernel written plainly in NumPy.

This is the definition every other backend is tested against, and the one to
step through in a debugger (`mt.set_backend("numpy")`, the default).

Every function takes and returns arrays. `xp` is the array module; the
functions below look it up from their input (`_xp(x)`), so the same reference
code also runs on CuPy arrays for the CuPy backend.

Masks: a boolean mask marks hidden positions with True (as in the seeds and
torch.nn.MultiheadAttention); it broadcasts against the scores.
Policy for a fully masked row (every key hidden, or every score -inf): its softmax
weights are all zero, its attention output is zero, and no gradient flows through
it. We never produce NaN there (softmax over an all -inf row would be 0 / 0, and
torch.softmax gives NaN); mt.debug.detect_anomaly reports such a row.
"""

import math

import numpy as np
from scipy.special import erf, expit

from . import blas_threads

xp = np
name = "numpy"


def _xp(array):
    """numpy for NumPy arrays, cupy for CuPy arrays (so the reference serves both)."""
    if isinstance(array, (np.ndarray, np.generic)):
        return np
    import cupy  # only ever reached with a CuPy array in hand

    return cupy.get_array_module(array)


# ----------------------------------------------------------------------------
# matmul
# ----------------------------------------------------------------------------


def _product(a, b):
    """a @ b with NumPy's batching rules. BLAS does the work, on the threads blas_threads.py
    chooses for its size (one for a small product, which a busy machine cannot stall)."""
    xp = _xp(a)
    if xp is not np:
        return xp.matmul(a, b)
    with blas_threads.for_product(a, b):
        return np.matmul(a, b)


# The interface's matmul. Attention calls _product directly: its products belong to the one
# attention kernel, so code that swaps or wraps `matmul` (demos/model_size.py counts the
# matrix products of the linear layers that way) sees only the products the ops ask for.
matmul = _product


# ----------------------------------------------------------------------------
# softmax and log-softmax
# ----------------------------------------------------------------------------


def softmax(x, axis=-1, mask=None):
    """y_i = exp(x_i - max) / sum_j exp(x_j - max) along axis; hidden entries get y = 0."""
    xp = _xp(x)
    if mask is not None:
        x = xp.where(mask, -xp.inf, x)
    row_max = x.max(axis=axis, keepdims=True)  # NaN if the row holds one: every weight is NaN
    row_max = xp.where(row_max == -xp.inf, 0, row_max)  # a fully hidden row: avoid -inf - -inf
    exp_x = xp.exp(x - row_max)
    total = exp_x.sum(axis=axis, keepdims=True)
    return exp_x / xp.where(total == 0, 1, total)  # a fully hidden row stays all zeros


def softmax_backward(y, dy, axis=-1):
    """dL/dx along axis, given y = softmax(x) and dy = dL/dy (the homework task softmax_backward)."""
    # BEGIN SOLUTION softmax_backward
    # dx_i = sum_j dy_j dy_j/dx_i = y_i (dy_i - sum_j dy_j y_j)
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))
    # END SOLUTION


def log_softmax(x, axis=-1):
    """y_i = x_i - max - log sum_j exp(x_j - max)."""
    xp = _xp(x)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def log_softmax_backward(y, dy, axis=-1):
    """dL/dx along axis, given y = log_softmax(x) and dy = dL/dy. Part of the homework task
    softmax_backward: softmax's backward is this one rearranged (softmax = exp(log_softmax))."""
    # BEGIN SOLUTION softmax_backward
    # dx_j = dy_j - exp(y_j) sum_i dy_i
    return dy - _xp(y).exp(y) * dy.sum(axis=axis, keepdims=True)
    # END SOLUTION


# ----------------------------------------------------------------------------
# layer norm (over the last axis)
# ----------------------------------------------------------------------------


def common_dtype(*arrays):
    """The dtype a kernel computes in when its inputs' dtypes differ: NumPy's promotion of
    all of them (float32 with float64 is float64), the rule every backend follows (None
    stands for an absent weight or bias)."""
    return np.result_type(*(a.dtype for a in arrays if a is not None))



def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), var biased.

    Returns (y, mean, rstd); mean and rstd have x's shape with the last axis
    of size 1, and are what the backward needs besides x. Mixed dtypes: x, weight and
    bias are cast to their common dtype first (common_dtype), on every backend. Every
    backend computes in float64 and stores the results in that dtype: in float32 the
    squares of values past ~1e19 overflow, and the fused kernels accumulate in float64.
    """
    xp = _xp(x)
    dtype = common_dtype(x, weight, bias)
    x, weight, bias = (None if a is None else a.astype(xp.float64) for a in (x, weight, bias))
    mean = x.mean(axis=-1, keepdims=True)
    # x is our own float64 copy (astype copies), so each step below works on it in place:
    # it is the one array as large as the input here.
    centered = x
    centered -= mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    rstd = 1 / xp.sqrt(var + eps)
    y = centered
    y *= rstd
    if weight is not None:
        y *= weight
    if bias is not None:
        y += bias
    return y.astype(dtype, copy=False), mean.astype(dtype), rstd.astype(dtype)


def layer_norm_backward(dy, x, weight, mean, rstd):
    """Gradients of layer norm over the last axis, given dy and what forward returned (the
    homework task layer_norm_backward). Returns (dx, dweight, dbias); dweight and dbias are None
    without weight.
    """
    # BEGIN SOLUTION layer_norm_backward
    # With x_hat = (x - mean) * rstd and g = dy * weight:
    #     dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))     (means over the last axis)
    #     dweight = sum of dy * x_hat over every axis but the last
    #     dbias   = sum of dy over every axis but the last
    dtype = common_dtype(x, weight, mean)
    x, weight, dy, mean, rstd = (None if a is None else a.astype(_xp(x).float64) for a in (x, weight, dy, mean, rstd))
    x_hat = x  # x is our own float64 copy (astype copies): x_hat = (x - mean) * rstd in place
    x_hat -= mean
    x_hat *= rstd
    g = dy if weight is None else dy * weight
    dx = x_hat * -(g * x_hat).mean(axis=-1, keepdims=True)  # the formula above, term by term
    dx += g  # in place, as the arrays are as large as x
    dx -= g.mean(axis=-1, keepdims=True)
    dx *= rstd
    batch_axes = tuple(range(x.ndim - 1))
    dweight = None if weight is None else (dy * x_hat).sum(axis=batch_axes).astype(dtype)
    dbias = None if weight is None else dy.sum(axis=batch_axes).astype(dtype)
    return dx.astype(dtype, copy=False), dweight, dbias
    # END SOLUTION


# ----------------------------------------------------------------------------
# GELU
# ----------------------------------------------------------------------------

SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def gelu(x, approximate="none"):
    """x * Phi(x): exact with erf, or GPT-2's tanh approximation.

    The tanh form 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), is computed as
    x * sigmoid(2u): the same function, without the cancellation in 1 + tanh u for u << 0
    (where float32 loses every digit)."""
    if approximate == "tanh":
        return x * _expit(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3))
    return x * _normal_cdf(x)


def gelu_backward(x, dy, approximate="none"):
    """dy * d/dx gelu(x): Phi(x) + x phi(x), or the tanh form's derivative."""
    xp = _xp(x)
    if approximate == "tanh":  # d/dx [x s(2u)] = s + 2 x s (1 - s) du/dx, s = sigmoid
        s = _expit(2 * SQRT_2_OVER_PI * (x + 0.044715 * x**3))
        du_dx = SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
        return dy * (s + 2 * x * s * (1 - s) * du_dx)
    # In place after each array's first step: these arrays are as large as x, and a new one
    # per step costs more than the arithmetic.
    cdf = _normal_cdf(x)
    pdf = xp.asarray(-0.5 * x)  # (asarray: for a 0-d x, NumPy's products are scalars, with no out=)
    pdf *= x
    pdf = xp.exp(pdf, out=pdf)
    pdf /= math.sqrt(2 * math.pi)
    slope = xp.multiply(x, pdf, out=pdf)  # x phi(x), then Phi(x) + x phi(x)
    slope += cdf
    return dy * slope


def _normal_cdf(x):
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF."""
    cdf = _erf(x / math.sqrt(2))
    cdf += 1
    cdf *= 0.5
    return cdf


def _expit(x):
    if _xp(x) is np:
        return expit(x)
    import cupyx.scipy.special

    return cupyx.scipy.special.expit(x)


def _erf(x):
    if _xp(x) is np:
        return erf(x)
    import cupyx.scipy.special

    return cupyx.scipy.special.erf(x)


# ----------------------------------------------------------------------------
# Attention, tiled over keys with an online softmax (FlashAttention's idea)
# ----------------------------------------------------------------------------

KEY_TILE = 128


def default_scale(d_k):
    """1 / sqrt(d_k); with d_k = 0 every score is an empty sum, 0, and any scale gives 0
    (PyTorch returns the mean of the values there, and so do we)."""
    return 1 / math.sqrt(d_k) if d_k else 1.0


def _full_mask(mask, q, k):
    """The mask with its last two axes grown to (Tq, Tk) (a view, no copy), so that a tile
    of keys can be sliced from it: a (Tq, 1) or 0-d mask has no key axis to slice. A float
    mask takes the scores' dtype (it never changes the result's dtype)."""
    if mask is None:
        return None
    xp = _xp(q)
    if mask.dtype != bool:
        mask = mask.astype(q.dtype, copy=False)
    return xp.broadcast_to(mask, mask.shape[:-2] + (q.shape[-2], k.shape[-2]))


def _tile_scores(q, k_tile, k_total, scale, key_start, mask, is_causal):
    """Scores of every query against one tile of keys; hidden ones set to -inf. A new array, so
    the caller may overwrite it."""
    xp = _xp(q)
    # q is scaled before the product, as PyTorch does: in float32 a product q k^T past 3.4e38
    # overflows to inf even where the scaled score would not
    scores = _product(q * q.dtype.type(scale), xp.swapaxes(k_tile, -1, -2))  # (..., Tq, tile)
    key_end = key_start + k_tile.shape[-2]
    if mask is not None:
        if mask.dtype == bool:
            scores = xp.where(mask[..., key_start:key_end], -xp.inf, scores)
        else:  # a float mask is added to the scores (ALiBi, relative biases)
            scores = scores + mask[..., key_start:key_end]
    if is_causal:
        # The queries are the last Tq of the Tk positions (Tq = Tk in training; Tq = 1 when
        # generating with a KV cache): hide each query's future keys in this tile.
        # BEGIN SOLUTION tiled_attention
        offset = k_total - q.shape[-2]  # query i sees keys j <= i + (Tk - Tq)
        queries = xp.arange(q.shape[-2])[:, None]
        keys = xp.arange(key_start, key_end)[None, :]
        xp.copyto(scores, -xp.inf, where=keys > queries + offset)
        # END SOLUTION
    return scores


def attention(q, k, v, mask=None, scale=None, is_causal=False):
    """out = softmax(q k^T * scale + mask) v, one tile of keys at a time.

    q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv); mask broadcasts to (..., Tq, Tk).
    Only (..., Tq, KEY_TILE) scores exist at a time, never (..., Tq, Tk) (the homework task
    tiled_attention). Returns (out, (row_max, row_sum)): each query's running max m and
    normaliser l, all backward needs to rebuild the weights. (Kept apart, not as
    lse = m + log l: at a score of 1e30, or 1e7 in float32, m + log l rounds to m and the
    weights rebuilt from it lose their normaliser.) A fully masked row has m = -inf and l = 0.
    """
    # BEGIN SOLUTION tiled_attention
    # For each query keep a running max m, a running normaliser l = sum exp(s - m) and a
    # running weighted sum acc = sum exp(s - m) v. A new tile with a larger max rescales the
    # old l and acc by exp(m_old - m_new). At the end out = acc / l.
    xp = _xp(q)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    mask = _full_mask(mask, q, k)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    dtype = common_dtype(q, k, v)
    q, k, v = (xp.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))  # views: each tile's block
    # then has the whole batch shape, so that the steps below can work on it in place
    running_max = xp.full(batch + (q.shape[-2], 1), -xp.inf, dtype=dtype)
    normaliser = xp.zeros(batch + (q.shape[-2], 1), dtype=dtype)
    acc = xp.zeros(batch + (q.shape[-2], v.shape[-1]), dtype=dtype)
    for start in range(0, k.shape[-2], KEY_TILE):
        k_tile, v_tile = k[..., start : start + KEY_TILE, :], v[..., start : start + KEY_TILE, :]
        scores = _tile_scores(q, k_tile, k.shape[-2], scale, start, mask, is_causal)  # (..., Tq, tile)
        new_max = xp.maximum(running_max, scores.max(axis=-1, keepdims=True))  # NaN if a score is
        safe_max = xp.where(new_max == -xp.inf, 0, new_max)  # rows with nothing visible yet
        # The (..., Tq, tile) block is the large array here: every step on it works in place,
        # so the tile costs one new block (the scores) and one pass per step.
        scores -= safe_max
        weights = xp.exp(scores, out=scores)  # exp(s - m), 0 for hidden keys (exp(-inf) = 0)
        correction = xp.exp(running_max - safe_max)  # rescales what was summed so far
        normaliser = normaliser * correction + weights.sum(axis=-1, keepdims=True)
        acc *= correction
        acc += _product(weights, v_tile)
        running_max = new_max
    # A fully masked row has l = 0 and acc = 0, so out = 0 (the policy). "!= 0", not "> 0":
    # a NaN normaliser must stay visible and carry its NaN into the output.
    out = acc
    out /= xp.where(normaliser != 0, normaliser, 1)
    return out, (running_max[..., 0], normaliser[..., 0])
    # END SOLUTION


def attention_backward(q, k, v, out, softmax_stats, dout, mask=None, scale=None, is_causal=False):
    """Gradients of attention, rebuilding each tile's weights from the saved row max and sum
    (the homework task tiled_attention, with its forward above; no (..., Tq, Tk) array either).

    Returns (dq, dk, dv) with the broadcast batch shape; where q, k or v was
    broadcast, the engine's unbroadcast sums the gradient back, as for any op.
    """
    # BEGIN SOLUTION tiled_attention
    # With P = exp(S - m) / l (the softmax weights) and D_i = sum_c dout_ic out_ic:
    #     dV = P^T dout,   dP = dout V^T,   dS = P * (dP - D),
    #     dQ = scale * dS K,   dK = scale * dS^T Q.
    # Each tile rebuilds W = exp(S - m), so P = W / l; 1 / l goes into the small factors,
    # (..., Tq, dv) and (..., Tq, 1), and scale into dQ and dK, rather than over the
    # (..., Tq, tile) block:   dV = W^T (dout / l),   dS = W * ((dout / l) V^T - D / l).
    xp = _xp(q)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    mask = _full_mask(mask, q, k)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (xp.broadcast_to(a, batch + a.shape[-2:]) for a in (q, k, v))  # views: each tile's block
    # then has the whole batch shape, so that the steps below can work on it in place
    row_max, row_sum = (s[..., None] for s in softmax_stats)  # (..., Tq, 1)
    visible = row_sum != 0  # a fully masked row (l = 0) has no weights and gets no gradient
    safe_max = xp.where(row_max == -xp.inf, 0, row_max)
    inverse_sum = xp.where(visible, 1 / xp.where(visible, row_sum, 1), 0)  # 1 / l, and 0 where l = 0
    D = (dout * out).sum(axis=-1, keepdims=True)  # (..., Tq, 1)
    dout_over_l, D_over_l = dout * inverse_sum, D * inverse_sum
    dq = xp.zeros(q.shape, dtype=common_dtype(q, k, v))
    dk_tiles, dv_tiles = [], []
    for start in range(0, k.shape[-2], KEY_TILE):
        k_tile, v_tile = k[..., start : start + KEY_TILE, :], v[..., start : start + KEY_TILE, :]
        scores = _tile_scores(q, k_tile, k.shape[-2], scale, start, mask, is_causal)
        scores -= safe_max
        W = xp.exp(scores, out=scores)  # (..., Tq, tile), in place: P = W / l
        dv_tiles.append(_product(xp.swapaxes(W, -1, -2), dout_over_l))
        dS = _product(dout_over_l, xp.swapaxes(v_tile, -1, -2))  # dP / l
        dS -= D_over_l
        dS *= W  # dS = P * (dP - D), in place
        dq += _product(dS, k_tile)
        dk_tiles.append(_product(xp.swapaxes(dS, -1, -2), q))
    dq *= scale
    dk = xp.concatenate(dk_tiles, axis=-2) if dk_tiles else xp.zeros_like(k)
    dk *= scale
    dv = xp.concatenate(dv_tiles, axis=-2) if dv_tiles else xp.zeros_like(v)
    return dq, dk, dv
    # END SOLUTION
