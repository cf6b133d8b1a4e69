"""What both attention algorithms do to a tile of scores: scale, mask, find each row's max, exp.

A tile is a C-contiguous (queries, keys) array of q k^T, made by one BLAS call inside a kernel.
These helpers are compiled into the kernels that call them (attention_short.py and
attention_tiled.py); they are not called from Python.
"""

import numpy as np
from numba import njit

from .elementwise import exp_into
from .settings import ROW_FLAGS


@njit(cache=True, fastmath=ROW_FLAGS)
def exp_block(scores, row_max, weights):
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
    exp_into(scores.reshape(-1), scores.dtype.type(0), weights.reshape(-1))


@njit(cache=True, fastmath=ROW_FLAGS)
def visible_row_max(scores, row_max):
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
# and compiling that string code made the first compile of a block several times slower.
@njit(cache=True, inline="always")
def add_into(dst, src):
    """dst += src, both (rows, columns)."""
    for a in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[a, c] += src[a, c]


@njit(cache=True, inline="always")
def copy_into(dst, src):
    """dst[...] = src, both (rows, columns)."""
    for a in range(src.shape[0]):
        for c in range(src.shape[1]):
            dst[a, c] = src[a, c]


# BEGIN SOLUTION tiled_attention
@njit(cache=True)
def mask_tile(scores, bh, i0, j0, hidden, bias, causal, causal_offset, scale):
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

# END SOLUTION
