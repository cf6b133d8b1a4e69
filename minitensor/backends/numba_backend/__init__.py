"""Numba kernels: an accelerator for softmax, log-softmax, layer norm, GELU and attention.

Same results as the ops' own code (minitensor/ops/), which every kernel here is tested against.

Each kernel fuses what the op's own NumPy code does in several passes over memory into one loop
per row (softmax, layer norm) or per element (GELU), and runs the rows in parallel. Attention
takes a block of queries at a time, with BLAS for the matrix products: up to SHORT_KEYS keys,
against every key at once (a plain softmax per row); beyond, one tile of keys at a time with a
running max and normaliser per query, so that the scores of a block never outgrow the cache.

This file is the interface (the functions every backend has); the kernels live by job:

    settings.py          every process-wide setting (threads, BLAS, fast-math flags, cache)
    layout.py            arrays as the kernels read them (rows, read-only, heads)
    elementwise.py       exp, erf, GELU
    softmax_rows.py      softmax and log-softmax
    layer_norm_rows.py   layer norm
    products.py          matmul (BLAS)
    score_tiles.py       what both attention paths do to a tile of scores
    attention_short.py   attention up to SHORT_KEYS keys
    attention_tiled.py   attention over any number of keys, a tile at a time

To step into a kernel with pdb, run with NUMBA_DISABLE_JIT=1: the kernels are then ordinary
Python functions (slow, but every local is visible). Or run without an accelerator,
mt.set_backend("numpy"): each op's own code, in minitensor/ops/.
"""

import numpy as np

from . import settings  # first: the threading layer must be chosen before any kernel runs
from . import attention_short, attention_tiled, elementwise, layer_norm_rows, layout, softmax_rows
from ..conventions import default_scale
from .elementwise import erf, exp  # noqa: F401 (the kernels the tests hold against NumPy's)
from .products import matmul

xp = np
name = "numba"

# Up to SHORT_KEYS keys, attention takes a block of SHORT_QUERY_BLOCK queries against every key at
# once (attention_short.py); beyond, a tile of keys at a time (attention_tiled.py). Both chosen by
# timing forward + backward against the tiled kernels (T from 101 to 2048, d 16 and 64, causal or
# not): the short path was the faster at every size tried. Set SHORT_KEYS = 0 to run the tiled
# kernels at every length (the tests do).
SHORT_KEYS = 2048
SHORT_QUERY_BLOCK = 128


def _is_short(q3, k3, v3):
    """Few enough keys for the short path (a block of queries against every key at once)."""
    return 0 < k3.shape[1] <= SHORT_KEYS and q3.shape[2] > 0 and v3.shape[2] > 0


def takes(*arrays):
    """Whether these kernels take these arrays: float16 has no Numba kernel (Numba cannot compile
    float16 arithmetic), so the op computes it with its own code (backends.accelerator_for)."""
    return not any(a is not None and a.dtype == np.float16 for a in arrays)


softmax, softmax_backward = softmax_rows.softmax, softmax_rows.softmax_backward
log_softmax, log_softmax_backward = softmax_rows.log_softmax, softmax_rows.log_softmax_backward
layer_norm, layer_norm_backward = layer_norm_rows.layer_norm, layer_norm_rows.layer_norm_backward
gelu, gelu_backward = elementwise.gelu, elementwise.gelu_backward


# BEGIN SOLUTION tiled_attention
def attention(q, k, v, mask=None, scale=None, is_causal=False):
    """Returns (out, (row_max, row_sum)), as Attention.forward's own code does."""
    scale = default_scale(q.shape[-1]) if scale is None else scale
    batch, q3, k3, v3, hidden, bias = layout.heads(q, k, v, mask)
    q3 = layout.read_only(q3 * q3.dtype.type(scale))  # scaled before q k^T, as PyTorch: no overflow past it
    scale = 1.0
    out = np.empty(q3.shape[:2] + (v3.shape[-1],), dtype=q3.dtype)
    row_max = np.empty(q3.shape[:2], dtype=q3.dtype)
    row_sum = np.empty(q3.shape[:2], dtype=q3.dtype)
    causal_offset = k.shape[-2] - q.shape[-2]
    if _is_short(q3, k3, v3):
        attention_short.forward(q3, k3, v3, hidden, bias, bool(is_causal), causal_offset, scale,
                                SHORT_QUERY_BLOCK, out, row_max, row_sum)
    else:
        attention_tiled.forward(q3, k3, v3, hidden, bias, bool(is_causal), causal_offset, scale, out, row_max, row_sum)
    stats_shape = batch + (q.shape[-2],)
    return out.reshape(batch + out.shape[1:]), (row_max.reshape(stats_shape), row_sum.reshape(stats_shape))


def attention_backward(q, k, v, out, softmax_stats, dout, mask=None, scale=None, is_causal=False):
    scale = default_scale(q.shape[-1]) if scale is None else scale
    batch, q3, k3, v3, hidden, bias = layout.heads(q, k, v, mask)
    q3 = layout.read_only(q3 * q3.dtype.type(scale))  # as forward: the kernels see scores (scale q) k^T,
    # so their dK = dS^T (scale q) is already scaled, and dQ = dS K gets the scale below
    out3 = layout.as_input(out, q3.shape[:2] + (v3.shape[-1],), q3.dtype)
    row_max, row_sum = (layout.as_input(s, q3.shape[:2], q3.dtype) for s in softmax_stats)
    dout3 = layout.as_input(dout, out3.shape, q3.dtype)
    dq, dk, dv = np.empty_like(q3), np.zeros_like(k3), np.zeros_like(v3)
    causal_offset = k.shape[-2] - q.shape[-2]
    if _is_short(q3, k3, v3):
        attention_short.backward(q3, k3, v3, out3, row_max, row_sum, dout3, hidden, bias, bool(is_causal),
                                 causal_offset, 1.0, SHORT_QUERY_BLOCK, dq, dk, dv)
    else:
        attention_tiled.backward(
            q3, k3, v3, out3, row_max, row_sum, dout3, hidden, bias, bool(is_causal), causal_offset, 1.0, dq, dk, dv
        )
    dq *= scale
    return (dq.reshape(batch + dq.shape[1:]), dk.reshape(batch + dk.shape[1:]), dv.reshape(batch + dv.shape[1:]))
# END SOLUTION


settings.drop_stale_cache(elementwise.exp_into)  # any cached kernel of the package: they share one folder

__all__ = [
    "xp", "name", "takes", "matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
    "layer_norm", "layer_norm_backward", "gelu", "gelu_backward", "attention", "attention_backward",
]
